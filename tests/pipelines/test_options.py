"""One definition of a training job's props: both constructs, the boundary type check and the
cdk.json team keys read `TrainingJobOptions` (and the Props that extend it)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from compiled_training import (
    CompilerBenchmark,
    CompilerBenchmarkProps,
    Framework,
    InputChannel,
    TrainingJobOptions,
    TrainingPipeline,
    TrainingPipelineProps,
)
from compiled_training.pipelines import options
from compiled_training.pipelines.options import prop_types
from compiled_training.reference.platform import TeamConfigError, benchmark_props, pipeline_props
from tests.helpers import ROOT, definitions, new_stack

CHANNELS = [InputChannel("train", "s3://team-data/t/"),
            InputChannel("validation", "s3://team-data/v/")]


class _Wrong:
    """A value of no prop's type."""

    def __repr__(self) -> str:
        return "wrong"


def _props(source_dir) -> dict:
    return {"framework": Framework.pytorch("1.13.1"), "instance_type": "ml.g5.48xlarge",
            "source_dir": source_dir, "entry_point": "train.py", "channels": CHANNELS}


@pytest.mark.parametrize("construct", [TrainingPipeline, CompilerBenchmark])
def test_every_job_option_is_a_typed_prop_of_both_constructs(construct):
    options = list(prop_types(TrainingJobOptions))
    with pytest.raises(TypeError) as raised:
        construct(new_stack(), "Job", **dict.fromkeys(options, _Wrong()))
    header, *problems = str(raised.value).splitlines()
    assert header == f"{construct.__name__} Team/Job has {len(options)} problems:"
    assert [line.split(" must be ")[0] for line in problems] == [f"  - {o}" for o in options]
    assert all(line.endswith(", got _Wrong wrong") for line in problems)


def test_the_props_extend_the_job_options():
    shared = prop_types(TrainingJobOptions)
    for props in (TrainingPipelineProps, CompilerBenchmarkProps):
        assert list(prop_types(props))[:len(shared)] == list(shared)


def _prop_docs() -> dict[str, str]:
    """Each prop's doc, the string under its annotation in options.py (what the props page
    shows)."""
    body = [node for cls in ast.parse(Path(options.__file__).read_text()).body
            if isinstance(cls, ast.ClassDef) for node in cls.body]
    return {target.target.id: doc.value.value
            for target, doc in zip(body, body[1:], strict=False)
            if isinstance(target, ast.AnnAssign) and isinstance(target.target, ast.Name)
            and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)}


def _states(doc: str, prop: str) -> bool:
    """Whether a prop's doc says what `OMITTED` names for it."""
    return f"when omitted, {options.OMITTED[prop]}".lower() in " ".join(doc.lower().split())


def test_each_named_default_is_what_its_prop_doc_says():
    docs = _prop_docs()
    assert [prop for prop in options.OMITTED if not _states(docs[prop], prop)] == []
    # The twin: a doc that states another value, or none, is caught.
    assert not _states("When omitted, 5 attempts per step.", "max_attempts")
    assert not _states("Attempts per step.", "max_attempts")


def test_an_omitted_prop_takes_its_named_default(source_dir):
    stack = new_stack()
    TrainingPipeline(stack, "Job", **_props(source_dir))
    (step,) = definitions(Template.from_stack(stack).to_json())[0]["Steps"]
    resources = step["Arguments"]["ResourceConfig"]
    assert resources["VolumeSizeInGB"] == options.DEFAULT_VOLUME_SIZE_GIB
    assert step["Arguments"]["StoppingCondition"]["MaxRuntimeInSeconds"] == \
        options.DEFAULT_MAX_RUNTIME_HOURS * 3600
    assert {policy["MaxAttempts"] for policy in step["RetryPolicies"]} == {
        options.DEFAULT_MAX_ATTEMPTS}


def test_fails_on_an_unknown_prop_naming_the_allowed_ones(source_dir):
    with pytest.raises(TypeError, match=r"^TrainingPipeline Team/Job: instance_typ is not a "
                                        r"prop; allowed: framework, instance_type, compiler, "):
        TrainingPipeline(new_stack(), "Job",
                         **{**_props(source_dir), "instance_typ": "ml.g5.xlarge"})


def test_fails_on_a_missing_required_prop(source_dir):
    props = _props(source_dir)
    del props["framework"]
    with pytest.raises(TypeError, match=r"^TrainingPipeline Team/Job: framework is required$"):
        TrainingPipeline(new_stack(), "Job", **props)
    props = _props(source_dir)
    del props["entry_point"]
    with pytest.raises(TypeError, match=r"^CompilerBenchmark Team/Job: entry_point is required$"):
        CompilerBenchmark(new_stack(), "Job", **props)


@pytest.mark.slow  # mypy over aws-cdk-lib: seconds on the cache `make lint` leaves, minutes cold
def test_type_checkers_see_the_props_of_the_keyword_arguments(tmp_path):
    # Unpack[TrainingPipelineProps]: what a user's editor and mypy check.
    user_app = tmp_path / "user_app.py"
    user_app.write_text(textwrap.dedent("""
        import aws_cdk as cdk
        from compiled_training import Framework, TrainingPipeline

        stack = cdk.Stack(cdk.App(), "Team")
        TrainingPipeline(stack, "Ok", framework=Framework.xgboost("1.7-1"),
                         instance_type="ml.m5.xlarge", spot=True)
        TrainingPipeline(stack, "Bad", framework=Framework.xgboost("1.7-1"),
                         instance_type="ml.m5.xlarge", spot="yes", instance_typ="x")
        TrainingPipeline(stack, "Missing", instance_type="ml.m5.xlarge")
    """))
    # mypy's cache in the checkout (the lint run fills it) keeps this to seconds after a lint.
    result = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                             str(user_app)],
                            capture_output=True, text=True, cwd=ROOT, check=False,
                            env={**os.environ,
                                 "MYPYPATH": f"{ROOT / 'constructs'}:{ROOT / 'runtime'}"})
    errors = [line.split(": error: ")[1] for line in result.stdout.splitlines()
              if ": error: " in line]
    assert sorted(errors) == [
        'Argument "spot" to "TrainingPipeline" has incompatible type "str"; expected '
        '"bool | None"  [arg-type]',
        'Missing named argument "framework" for "TrainingPipeline"  [call-arg]',
        'Unexpected keyword argument "instance_typ" for "TrainingPipeline"; did you mean '
        '"instance_type"?  [call-arg]',
    ], result.stdout


def test_a_synth_loads_the_modules_of_the_props_it_is_given_only(source_dir):
    # A prop's type is read when the prop is given: a pipeline without a VPC or a
    # registration loads neither aws_ec2 nor Lambda's module (a third of a second per synth),
    # and one with a VPC still has it checked. In a fresh interpreter: this one has them all.
    program = textwrap.dedent(f"""
        import sys
        import aws_cdk as cdk
        from compiled_training import Framework, InputChannel, TrainingPipeline
        stack = cdk.Stack(cdk.App(), "Team", env=cdk.Environment(account="123456789012",
                                                                 region="us-east-1"))
        TrainingPipeline(stack, "Nlp", framework=Framework.pytorch("1.13.1"),
                         instance_type="ml.g5.2xlarge", source_dir={str(source_dir)!r},
                         entry_point="train.py", pipeline_name="nlp",
                         channels=[InputChannel("train", "s3://team-data/t/")])
        cdk.App.of(stack).synth()
        print(sorted(m for m in ("aws_cdk.aws_ec2", "aws_cdk.aws_lambda", "aws_cdk.aws_ecr",
                                 "botocore.session") if m in sys.modules))
        try:
            TrainingPipeline(stack, "Vpc", framework=Framework.pytorch("1.13.1"),
                             instance_type="ml.g5.2xlarge", source_dir={str(source_dir)!r},
                             entry_point="train.py", pipeline_name="vpc", vpc="vpc-1234")
        except TypeError as error:
            print(error)
    """)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            check=True, env={**os.environ,
                                             "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"})
    loaded, error = result.stdout.splitlines()[-2:]
    assert loaded == "[]"
    assert error == ("TrainingPipeline Team/Vpc: vpc must be aws_ec2.IVpc or None, got str "
                     "'vpc-1234'")


# --- cdk.json team keys, read off the same definition ----------------------------------------

TEAM = {"framework": "xgboost", "framework_version": "1.7-1", "instance_type": "ml.m5.xlarge",
        "channels": {"train": "s3://tabular/train/"}}


def test_a_prop_json_can_hold_is_a_team_key_without_an_edit_in_teams(tmp_path):
    # network_isolation and pipeline_name were never written into the reference platform's key table.
    props = pipeline_props("Tabular", {**TEAM, "network_isolation": True,
                                       "pipeline_name": "tabular-nightly"}, base_dir=tmp_path)
    stack = new_stack("Tabular")
    TrainingPipeline(stack, "Pipeline", **props)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::SageMaker::Pipeline",
                                     {"PipelineName": "tabular-nightly"})
    (definition,) = definitions(template.to_json())
    assert definition["Steps"][0]["Arguments"]["EnableNetworkIsolation"] is True


def test_a_teams_own_metrics_are_a_key_of_its_pipeline(tmp_path):
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "train.py").write_text("print('F1 score: 0.9')\n")
    team = {"framework": "pytorch", "framework_version": "2.6.0", "compiler": "torch-compile",
            "instance_type": "ml.g5.2xlarge", "source_dir": "training",
            "entry_point": "train.py", "channels": {"train": "s3://team-data/clf/train/"},
            "metric_definitions": {"f1": r"F1 score: ([0-9.]+)"},
            "registration": {"model_package_group_name": "clf", "gate_metric": "f1"}}
    stack = new_stack("Clf")
    TrainingPipeline(stack, "Pipeline", **pipeline_props("Clf", team, base_dir=tmp_path))
    (definition,) = definitions(Template.from_stack(stack).to_json())
    assert definition["Steps"][0]["Arguments"]["AlgorithmSpecification"][
        "MetricDefinitions"] == [{"Name": "f1", "Regex": r"F1 score: ([0-9.]+)"}]
    with pytest.raises(ValueError, match=r"metric_definitions are read from a script's log, "
                                         r"and XGBoost 1.7-1 runs its own algorithm"):
        TrainingPipeline(new_stack("Tabular"), "Pipeline", **pipeline_props(
            "Tabular", {**TEAM, "metric_definitions": {"f1": "f1=(.*)"}}, base_dir=tmp_path))


@pytest.mark.parametrize(("key", "value", "message"), [
    ("kms_key", "alias/team", r"Tabular: kms_key is not a known key; allowed: acknowledge_warnings, benchmark, "),
    ("image", "nlp/bert:1", r"Tabular: image is not a known key"),
    ("network_isolation", "yes", r"Tabular: network_isolation must be a bool, got str 'yes'$"),
    ("volume_size_gib", 1.5, r"Tabular: volume_size_gib must be an int, got float 1.5$"),
    ("distribution", "ddp", r"Tabular: distribution must be one of none, pytorchxla, "
                            r"torch_distributed, smdistributed, got 'ddp'$"),
])
def test_fails_on_a_key_json_cannot_give_or_a_value_of_the_wrong_type(tmp_path, key, value,
                                                                       message):
    with pytest.raises(TeamConfigError, match=r"^cdk.json compiled-training:teams." + message):
        pipeline_props("Tabular", {**TEAM, key: value}, base_dir=tmp_path)


def test_a_benchmark_takes_the_pipelines_job_options_and_its_own_props(tmp_path):
    pipeline = pipeline_props("Nlp", {**TEAM, "network_isolation": True, "spot": True,
                                      "pipeline_name": "nlp"}, base_dir=tmp_path)
    props = benchmark_props({"baseline_distribution": "none"}, pipeline)
    assert props["network_isolation"] is True
    assert "spot" not in props and "pipeline_name" not in props  # on demand, named by path
    assert props["baseline_distribution"].value == "none"
