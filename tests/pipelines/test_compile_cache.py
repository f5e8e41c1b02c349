"""torch.compile's warm start as the constructs declare it: the cache's place under the
pipeline's own prefix, its key and expiry, the off switch, and where a job starts cold."""

from __future__ import annotations

import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template

from compiled_training import (
    Compiler,
    CompilerBenchmark,
    Framework,
    InputChannel,
    RetrainingSchedule,
    TrainingPipeline,
)
from compiled_training_runtime import contract
from tests.helpers import definitions, new_stack

URL = contract.ENV_COMPILE_CACHE_URL
PROPS = {
    "pipeline_name": "ranker", "framework": Framework.pytorch("2.9.0"),
    "compiler": Compiler.torch_compile(), "instance_type": "ml.g5.2xlarge",
    "entry_point": "train.py",
    "channels": [InputChannel("train", "s3://team-data/train/"),
                 InputChannel("validation", "s3://team-data/validation/")],
}


def _steps(stack: cdk.Stack) -> dict[str, dict]:
    (definition,) = definitions(Template.from_stack(stack).to_json())
    return {step["Name"]: step["Arguments"] for step in definition["Steps"]
            if step["Type"] == "Training"}


def _pipeline(source_dir, **overrides) -> tuple[cdk.Stack, TrainingPipeline]:
    stack = new_stack()
    pipeline = TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": source_dir,
                                                    **overrides})
    return stack, pipeline


def _warnings(stack: cdk.Stack, rule: str) -> list[str]:
    return [w.entry.data for w in Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp(f"{rule}"))]


def test_a_torch_compile_job_keeps_its_cache_under_its_pipelines_prefix(source_dir):
    stack, _ = _pipeline(source_dir)

    environment = _steps(stack)["Train"]["Environment"]

    # s3://<the stack's output bucket>/<pipeline name>/compile-cache/<step>/
    assert re.fullmatch(r"s3://[a-z0-9-]+/ranker/compile-cache/Train/", environment[URL])
    assert contract.ENV_COMPILE_CACHE_KMS_KEY_ID not in environment
    # The library's bucket expires a cache no run saved again for 30 days, and only that.
    Template.from_stack(stack).has_resource_properties("AWS::S3::Bucket", {
        "LifecycleConfiguration": {"Rules": Match.array_with([{
            "Id": "ranker-compile-cache", "Prefix": "ranker/compile-cache/",
            "ExpirationInDays": 30, "Status": "Enabled",
            # The bucket is versioned and every run overwrites the archive: the one before
            # it goes the next day, not after the bucket's 30 days for other versions.
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}])}})
    assert not _warnings(stack, "CompileCacheCold")


def test_the_cache_is_encrypted_with_the_pipelines_key(source_dir):
    stack = new_stack()
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": source_dir, "kms_key": key})

    environment = _steps(stack)["Train"]["Environment"]

    # The key's ARN, as the job's OutputDataConfig.KmsKeyId has it.
    assert environment[contract.ENV_COMPILE_CACHE_KMS_KEY_ID] == \
        _steps(stack)["Train"]["OutputDataConfig"]["KmsKeyId"]


def test_switched_off_the_job_gets_no_cache_and_the_bucket_no_rule(source_dir):
    stack, _ = _pipeline(source_dir, compile_cache=False)

    assert URL not in _steps(stack)["Train"].get("Environment", {})
    assert "compile-cache" not in str(Template.from_stack(stack).find_resources(
        "AWS::S3::Bucket"))
    assert not _warnings(stack, "CompileCacheCold")  # a choice, not an accident


@pytest.mark.parametrize(("overrides", "why"), [
    ({"network_isolation": True}, "network_isolation cuts the job off from S3"),
    ({"framework": Framework.pytorch("2.3.0")}, "PyTorch 2.3.0 predates the compile caches this carries"),
], ids=["network-isolation", "pytorch-2.3"])
def test_a_job_that_cannot_keep_it_compiles_cold_with_a_warning_saying_why(source_dir,
                                                                          overrides, why):
    stack, _ = _pipeline(source_dir, **overrides)

    assert URL not in _steps(stack)["Train"].get("Environment", {})
    (warning,) = _warnings(stack, "CompileCacheCold")
    assert why in warning and "compiles from nothing every run" in warning


def test_only_torch_compile_jobs_carry_one(source_dir):
    stack, _ = _pipeline(source_dir, framework=Framework.pytorch("1.13.1"),
                         compiler=Compiler.training_compiler())

    assert URL not in _steps(stack)["Train"].get("Environment", {})
    assert "compile-cache" not in str(Template.from_stack(stack).find_resources(
        "AWS::S3::Bucket"))


def test_on_a_given_bucket_the_job_keeps_it_and_the_owner_sets_the_expiry(source_dir):
    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Given", "team-outputs")
    TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": source_dir,
                                         "output_bucket": bucket})

    assert _steps(stack)["Train"]["Environment"][URL] == \
        "s3://team-outputs/ranker/compile-cache/Train/"
    assert not Template.from_stack(stack).find_resources("AWS::S3::Bucket")


def test_a_benchmarks_compiler_arms_each_keep_their_own_and_the_baseline_none(source_dir):
    stack = new_stack()
    CompilerBenchmark(
        stack, "Bench", pipeline_name="ranker-ab", framework=Framework.pytorch("2.9.0"),
        compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
        source_dir=source_dir, entry_point="train.py", channels=PROPS["channels"])

    caches = {name: arguments.get("Environment", {}).get(URL)
              for name, arguments in _steps(stack).items()}

    assert caches.pop("TrainBaseline") is None
    assert caches and all(re.fullmatch(rf"s3://[a-z0-9-]+/ranker-ab/compile-cache/{name}/", uri)
                          for name, uri in caches.items()), caches


def test_the_same_input_synthesizes_the_same_template(source_dir):
    first, _ = _pipeline(source_dir)
    second, _ = _pipeline(source_dir)
    assert Template.from_stack(first).to_json() == Template.from_stack(second).to_json()


def test_a_schedule_marks_its_pipeline_for_the_rule_pack(source_dir):
    stack, pipeline = _pipeline(source_dir, compile_cache=False)
    RetrainingSchedule(stack, "Weekly", pipeline=pipeline, team="ranking",
                       expression="cron(0 2 ? * MON *)")

    (resource,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Pipeline").values()
    assert resource["Metadata"]["compiled-training:schedules"] == ["Team/Weekly"]


def _archive_names(stack: cdk.Stack) -> set[str]:
    """The names in the code archive the stack's pipeline uploads."""
    import tarfile

    assembly = stack.node.root.synth()
    (asset,) = Path(assembly.directory).glob("asset.*.tar.gz")
    with tarfile.open(asset) as archive:
        return set(archive.getnames())


def _program_and_environment(stack: cdk.Stack) -> tuple[str, dict[str, str]]:
    (definition,) = definitions(Template.from_stack(stack).to_json())
    (step,) = definition["Steps"]
    return (step["Arguments"]["HyperParameters"]["sagemaker_program"],
            step["Arguments"].get("Environment", {}))


@pytest.mark.parametrize(("script", "launched"), [
    ("from compiled_training_runtime.warm_start import compile_cache\n", False),
    ("import torch\n", True),
], ids=["imports-the-runtime", "plain"])
def test_the_runtime_ships_and_a_script_without_it_runs_behind_the_launcher(tmp_path, script,
                                                                           launched):
    """A script that uses the cache keeps control; one that does not gets the launcher."""
    (tmp_path / "train.py").write_text(script)
    stack = new_stack(outdir=tmp_path / "out")
    TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": tmp_path})

    names = _archive_names(stack)
    program, environment = _program_and_environment(stack)

    assert {"train.py", "compiled_training_runtime/warm_start.py", contract.LAUNCHER} <= names
    assert program == ('"compiled_training_runtime/launch.py"' if launched else '"train.py"')
    assert (environment.get(contract.ENV_ENTRY_POINT) == "train.py") is launched
    assert not _warnings(stack, "CompileCacheUnused")


@pytest.mark.parametrize("props", [
    {"compiler": Compiler.none()},                  # nothing to carry
    {"compile_cache": False},                       # switched off
    {"framework": Framework.pytorch("2.3.0")},      # before Inductor's FX graph cache
], ids=["eager", "cache-off", "pytorch-2.3"])
def test_a_job_without_a_cache_to_carry_runs_its_script_itself(tmp_path, props):
    (tmp_path / "train.py").write_text("import torch\n")
    stack = new_stack(outdir=tmp_path / "out")
    TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": tmp_path, **props})

    program, environment = _program_and_environment(stack)

    assert program == '"train.py"' and contract.ENV_ENTRY_POINT not in environment
    if props.get("compiler") == Compiler.none():
        assert contract.LAUNCHER not in _archive_names(stack)


def test_a_source_dir_holding_the_runtime_keeps_its_own(tmp_path):
    stack = new_stack(outdir=tmp_path / "out")
    runtime = Path(__file__).resolve().parents[2] / "runtime"
    TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": runtime})

    names = _archive_names(stack)

    assert sum(name.endswith("/warm_start.py") for name in names) == 1


def test_the_execution_role_reaches_its_cache_as_the_job_asks_and_nothing_beside(source_dir):
    """The job's own requests (ListObjectsV2 with the archive's key as Prefix, GetObject,
    PutObject), evaluated as IAM evaluates the role's statements
    (`compiled_training.local.policy`)."""
    from compiled_training.local.policy import ALLOW, IMPLICIT_DENY, decide
    from tests.helpers import render_tree

    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Given", "team-outputs")
    TrainingPipeline(stack, "Ranker", **{**PROPS, "source_dir": source_dir,
                                         "output_bucket": bucket})
    template = Template.from_stack(stack).to_json()
    (role,) = [r for k, r in template["Resources"].items() if k.startswith("RankerExecutionRole")]
    statements = render_tree(role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"],
                             template)
    key = "ranker/compile-cache/Train/ml.g5.2xlarge/cuda-A10G-sm86/inductor-default/x.tar.gz"

    assert decide(statements, "s3:ListBucket", "arn:aws:s3:::team-outputs",
                  {"s3:prefix": key}) == ALLOW
    for action in ("s3:GetObject", "s3:PutObject"):
        assert decide(statements, action, f"arn:aws:s3:::team-outputs/{key}", {}) == ALLOW
        assert decide(statements, action, "arn:aws:s3:::team-outputs/other/compile-cache/x",
                      {}) == IMPLICIT_DENY
    # A GetObject carries no s3:prefix: without the listing first, a first run's missing
    # archive would come back as 403, not 404 (why the runtime lists before it gets).
    assert decide(statements, "s3:ListBucket", "arn:aws:s3:::team-outputs", {}) == IMPLICIT_DENY
