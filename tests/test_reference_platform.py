"""The reference platform (app.py + cdk.json) through every external validator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from tests.helpers import (
    ROOT,
    cdk_json_context,
    cfn_lint,
    definitions,
    pipeline_resources,
    synth_reference_app,
    templates,
    validate_envelope,
    validate_job_arguments,
)


def test_three_team_stacks_and_the_creative_team_benchmarks_before_it_ships(reference_assembly):
    found = templates(reference_assembly)
    assert sorted(found) == ["Creative", "DocumentClassification", "Tabular"]
    counts = {name: len(pipeline_resources(template)) for name, template in found.items()}
    assert counts == {"Creative": 2, "DocumentClassification": 2, "Tabular": 1}
    production, benchmark = definitions(found["Creative"])
    # Production runs without the compiler, on every GPU; the benchmark puts it on trial.
    (train,) = production["Steps"]
    assert "sagemaker_training_compiler_enabled" not in train["Arguments"]["HyperParameters"]
    assert train["Arguments"]["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert [s["Name"] for s in benchmark["Steps"]] == [
        "TrainBaseline", "TrainCompiler", "TrainCompilerLargeBatch", "Compare",
        "RecordDecision", "ShipDecision"]


def test_document_classification_puts_a_trainium_arm_on_trial_beside_its_gpu_job(
        reference_assembly):
    _, benchmark = definitions(templates(reference_assembly)["DocumentClassification"])
    steps = {step["Name"]: step for step in benchmark["Steps"]}
    assert list(steps) == ["TrainBaseline", "TrainCompiler", "PrecompileTrainium",
                           "TrainTrainium", "Compare", "RecordDecision", "ShipDecision"]
    gpu = steps["TrainCompiler"]["Arguments"]
    trainium = steps["TrainTrainium"]["Arguments"]
    assert (gpu["ResourceConfig"]["InstanceType"], gpu["ResourceConfig"]["InstanceCount"]) == (
        "ml.g5.48xlarge", 8)
    assert (trainium["ResourceConfig"]["InstanceType"],
            trainium["ResourceConfig"]["InstanceCount"]) == ("ml.trn1.32xlarge", 2)
    assert trainium["AlgorithmSpecification"]["TrainingImage"].endswith(
        "/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04")
    assert steps["PrecompileTrainium"]["Arguments"]["Environment"][
        "RUN_NEURON_PARALLEL_COMPILE"] == "1"
    # The comparison prices both fleets: the Trainium arm is judged by cost per epoch.
    arguments = steps["Compare"]["Arguments"]["AppSpecification"]["ContainerArguments"]
    assert "trainium=ml.trn1.32xlarge:2:24.725" in arguments
    assert "baseline=ml.g5.48xlarge:8:20.36" in arguments
    validate_envelope(benchmark)
    validate_job_arguments(benchmark)


def test_document_classification_uses_training_compiler_with_pytorchxla(reference_assembly):
    definition, _ = definitions(templates(reference_assembly)["DocumentClassification"])
    args = definition["Steps"][0]["Arguments"]
    # The team's runtime image, built in the cloud on the Training Compiler DLC.
    assert args["AlgorithmSpecification"]["TrainingImage"].endswith(":0123456789abcdef0123")
    template = templates(reference_assembly)["DocumentClassification"]
    # The stack's one build project takes each image's base image from its build request.
    (build,) = [r for r in template["Resources"].values()
                if r["Type"] == "Custom::RuntimeImageBuild"]
    assert build["Properties"]["BaseImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-trcomp-training:1.13.1-gpu-py39"
    )
    assert args["ResourceConfig"]["InstanceCount"] == 8
    assert args["ResourceConfig"]["InstanceType"] == "ml.g5.48xlarge"
    hps = args["HyperParameters"]
    assert hps["sagemaker_training_compiler_enabled"] == "true"
    assert hps["sagemaker_training_compiler_debug_mode"] == "false"
    assert hps["sagemaker_pytorch_xla_multi_worker_enabled"] == "true"
    assert "DebugHookConfig" not in args
    assert args["ProfilerConfig"] == {"DisableProfiler": True}
    assert {p["Name"] for p in definition["Parameters"]} == {
        "Epochs", "TrainDataUri", "ValidationDataUri", "MinValidationAccuracy"}


def test_each_team_retrains_on_its_rhythm(reference_assembly):
    rhythms = {}
    for name, template in templates(reference_assembly).items():
        (schedule,) = [r["Properties"] for r in template["Resources"].values()
                       if r["Type"] == "AWS::Scheduler::Schedule"]
        rhythms[name] = schedule["ScheduleExpression"]
    assert rhythms == {
        "DocumentClassification": "cron(0 1 ? * MON,WED,FRI *)",  # three times a week
        "Creative": "cron(0 20 ? * SAT *)",                      # weekly
        "Tabular": "cron(30 2 * * ? *)",                         # nightly
    }


def test_tabular_is_built_in_xgboost_on_cpu_without_compiler(reference_assembly):
    (definition,) = definitions(templates(reference_assembly)["Tabular"])
    args = definition["Steps"][0]["Arguments"]
    assert "sagemaker-xgboost:1.7-1" in args["AlgorithmSpecification"]["TrainingImage"]
    assert not any(k.startswith("sagemaker_") for k in args["HyperParameters"])
    assert args["HyperParameters"]["objective"] == "binary:logistic"
    assert args["InputDataConfig"][0]["ContentType"] == "text/csv"


def test_every_definition_envelope_matches_the_published_schema(reference_assembly):
    for template in templates(reference_assembly).values():
        for definition in definitions(template):
            validate_envelope(definition)


def test_every_training_step_matches_botocore_create_training_job(reference_assembly):
    for template in templates(reference_assembly).values():
        for definition in definitions(template):
            validate_job_arguments(definition)


def test_cfn_lint_is_clean_on_every_template(reference_assembly):
    for stack in reference_assembly.stacks:
        assert cfn_lint(stack.template_full_path) == [], stack.stack_name


def test_cdk_nag_has_no_unacknowledged_finding(reference_assembly):
    # app.synth() raises ValidationFailed on an unacknowledged finding; the report says so too.
    report = json.loads((Path(reference_assembly.directory) / "validation-report.json").read_text())
    conclusions = {p["pluginName"]: p["conclusion"] for p in report["pluginReports"]}
    assert conclusions == {"AwsSolutions": "success", "CompiledTraining": "success"}
    assert all(not p.get("violations") for p in report["pluginReports"])


# Retained with a literal name on purpose. CloudFormation requires a Model Package Group's name,
# and deployers look the group up by it; it keeps its versions after `cdk destroy`, and a
# redeploy adopts it with `existing_group=True` (README, "Model versions").
NAMED_ON_PURPOSE = ("ModelPackageGroupName",)


def test_a_deploy_after_cdk_destroy_meets_no_retained_namesake(reference_assembly):
    # A retained resource outlives its stack; with a literal name the next deploy fails on it.
    for stack, template in templates(reference_assembly).items():
        for logical_id, resource in template["Resources"].items():
            if resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"):
                named = {key: value for key, value in resource.get("Properties", {}).items()
                         if key.endswith("Name") and isinstance(value, str)
                         and key not in NAMED_ON_PURPOSE}
                assert named == {}, (stack, logical_id, named)


def test_synth_output_carries_no_warning(reference_assembly):
    # Read through the artifacts: the CDK keeps a stack's metadata in its own file now
    # (additionalMetadataFile), not in manifest.json.
    warnings = [(stack.stack_name, entry.path, entry.data) for stack in reference_assembly.stacks
                for entry in stack.find_metadata_by_type("aws:cdk:warning")]
    assert warnings == []


def test_the_warning_check_sees_a_warning(tmp_path):
    """The check above can fail: without its acknowledgement, the Creative team's benchmark
    warns that its instances have no EFA."""
    context = cdk_json_context()
    creative = context["compiled-training:teams"]["Creative"]
    del creative["acknowledge_warnings"]
    assembly = synth_reference_app(tmp_path, context)
    warnings = [entry.data for stack in assembly.stacks
                for entry in stack.find_metadata_by_type("aws:cdk:warning")]
    assert len(warnings) == 1 and "ml.g5.12xlarge has no EFA" in warnings[0]


def test_the_id_the_cli_prints_acknowledges_too(tmp_path):
    """The CDK CLI prints "Acknowledge with 'Annotation::<id>'"; cdk.json takes that form as well
    as the id alone (Annotations.acknowledge_warning's)."""
    context = cdk_json_context()
    acknowledged = context["compiled-training:teams"]["Creative"]["acknowledge_warnings"]
    ((warning, reason),) = acknowledged.items()
    context["compiled-training:teams"]["Creative"]["acknowledge_warnings"] = {
        f"Annotation::{warning}": reason}
    assembly = synth_reference_app(tmp_path, context)
    assert [entry for stack in assembly.stacks
            for entry in stack.find_metadata_by_type("aws:cdk:warning")] == []


def test_the_apps_warnings_carry_no_kernel_frame_for_the_cli_to_print_as_their_place(tmp_path):
    """The stray ``.../program.js:1:5591`` line: the CLI prints a warning's first stack frame
    outside the CDK, and a Python app's frames end in the jsii kernel. app.py's App records
    none; ``cdk.App()``'s default, for comparison, does."""
    from app import build_app

    for app, traced in ((build_app(), False), (cdk.App(), True)):
        stack = cdk.Stack(app, "Probe")
        cdk.Annotations.of(stack).add_warning_v2("probe:Warning", "a warning")
        (entry,) = app.synth().get_stack_by_name("Probe").find_metadata_by_type(
            "aws:cdk:warning")
        assert bool(entry.trace) is traced, entry.trace


# A deprecated API fails the synth instead of warning: Python's DeprecationWarnings (ours and our
# dependencies') become errors, and so do calls into deprecated aws-cdk-lib APIs (jsii's switch).
DEPRECATIONS_FAIL = {"PYTHONWARNINGS": "error::DeprecationWarning,error::PendingDeprecationWarning",
                     "JSII_DEPRECATED": "fail"}


def test_the_cdk_cli_prints_no_stray_line_and_no_unconfigured_feature_flag(tmp_path):
    """`make synth`'s first half, through the pinned CLI: its own lines, and nothing from the
    toolchain (the jsii kernel's frame as a warning's location, feature flags left unset, a
    deprecated API)."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           **DEPRECATIONS_FAIL}
    result = subprocess.run([ROOT / "node_modules" / ".bin" / "cdk", "synth", "--quiet",
                             "--output", tmp_path / "cdk.out"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert [line for line in lines if not line.startswith(
        ("Successfully synthesized to ", "Supply a stack id "))] == []


@pytest.mark.parametrize(("deprecated_call", "error"), [
    ("cdk.SecretValue.plain_text('not a secret')",
     "DeprecationError: aws-cdk-lib.SecretValue#plainText is deprecated"),
    ("warnings.warn('old', DeprecationWarning)", "DeprecationWarning: old"),
])
def test_the_deprecation_switches_fail_on_a_deprecated_call(deprecated_call, error):
    """The check above can fail: the same environment turns either kind into an error."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           **DEPRECATIONS_FAIL}
    code = f"import warnings\nimport aws_cdk as cdk\n{deprecated_call}\n"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=False)
    assert result.returncode != 0
    assert error in result.stderr


def test_two_synths_are_byte_identical(tmp_path):
    first = synth_reference_app(tmp_path / "a")
    second = synth_reference_app(tmp_path / "b")
    for stack in first.stacks:
        a = Path(stack.template_full_path).read_bytes()
        b = Path(second.get_stack_by_name(stack.stack_name).template_full_path).read_bytes()
        assert a == b, stack.stack_name


@pytest.mark.parametrize(
    ("team", "key", "value", "message"),
    [
        ("Tabular", "instance_count", 0, r"Tabular: .*instance_count must be an integer of at least 1, got 0"),
        ("Creative", "instance_type", "ml.m6i.12xlarge",
         r"Creative: TrainingPipeline Creative/Pipeline: distribution 'torch_distributed' needs a GPU instance, got 'ml.m6i.12xlarge'"),
        ("Creative", "benchmark", {"compiler": "none"},
         r"Creative: CompilerBenchmark Creative/Benchmark: compiler must be Compiler.training_compiler\(\) or Compiler.torch_compile\(\): the benchmark compares it with no compiler, got Compiler.none\(\)"),
        ("Creative", "benchmark", {"large_batch_size": 2},
         r"Creative: CompilerBenchmark Creative/Benchmark: large_batch_size must be an integer above batch_size 4, got 2"),
        ("Creative", "benchmark", {"speedup_threshold": "20%"},
         r"Creative: benchmark.speedup_threshold must be a float, got str '20%'"),
        ("Creative", "benchmark", {"threshold": 0.2},
         r"Creative: benchmark.threshold is not a known key; allowed: compiler, compiler_options, large_batch_size, prices, quality_metric, speedup_threshold, quality_tolerance, baseline_distribution, comparison_instance_type, decision_parameter_name, spot, arms$"),
        ("DocumentClassification", "benchmark", {"arms": [{"name": "trainium",
                                                           "compiler": "neuron-xla"}]},
         r"DocumentClassification: benchmark.arms\[0\].instance_type is required$"),
        ("DocumentClassification", "benchmark", {"arms": [
            {"name": "trainium", "compiler": "torch-compile", "instance_type": "ml.trn1.32xlarge",
             "precompile": True}]},
         r"DocumentClassification: benchmark.arms\[0\].precompile is for compiler 'neuron-xla', "
         r"got 'torch-compile'$"),
        ("Creative", "benchmark", {"compiler": "torch-compile",
                                   "compiler_options": {"mode": "fastest"}},
         r"Creative: benchmark.compiler_options: Compiler.torch_compile mode must be one of "
         r"default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs, got 'fastest'$"),
        ("DocumentClassification", "framework_version", "2.1.0",
         r"DocumentClassification: .*Training Compiler does not support PyTorch 2.1.0.*PyTorch 1.13.1.*Compiler.torch_compile"),
        ("Tabular", "instance_count", "two", r"Tabular: instance_count must be an int, got str 'two'"),
        ("Creative", "compiler", "xla", r"Creative: compiler must be one of training-compiler, torch-compile, neuron-xla, none, got 'xla'"),
        ("Creative", "compiler", "torch_compile", r"Creative: compiler must be one of training-compiler, torch-compile, neuron-xla, none, got 'torch_compile' \(did you mean 'torch-compile'\?\)$"),
        ("Creative", "gpu_count", 8, r"Creative: gpu_count is not a known key"),
        ("Tabular", "schedule", {"expression": "cron(0 2 * * * *)"},
         r"Tabular: RetrainingSchedule Tabular/Schedule: cron expression must set exactly one of day-of-month and day-of-week"),
        ("Tabular", "schedule", {"expression": "rate(1 day)", "parameters": {"Rounds": 5}},
         r"Tabular: .*parameter 'Rounds' is not declared by pipeline Tabular-Pipeline-.* \(declared: MinValidationAuc, NumRound, TrainDataUri, ValidationDataUri\)"),
        ("Creative", "schedule", {"expression": "rate(7 days)", "time_zone": "Mars/Olympus"},
         r"Creative: RetrainingSchedule Creative/Schedule: time_zone must be an IANA time zone such as 'Europe/Berlin', got 'Mars/Olympus'"),
        ("Creative", "schedule", {"cron": "x"}, r"Creative has 2 problems:\n  - schedule.expression is required\n  - schedule.cron is not "
         r"a known key; allowed: expression, time_zone"),
        ("Creative", "acknowledge_warnings", {"NonEfa": ""},
         r"Creative: acknowledge_warnings.NonEfa must map a compiled-training warning id .*got ''"),
    ],
)
def test_fails_on_a_wrong_value_in_cdk_json_naming_team_and_key(tmp_path, team, key, value, message):
    context = cdk_json_context()
    context["compiled-training:teams"][team][key] = value
    with pytest.raises(ValueError, match=message):
        synth_reference_app(tmp_path, context)


def _creative(tmp_path: Path, **changes: object) -> tuple[bytes, list[dict]]:
    """The Creative team's stack alone on PyTorch 2.9 without its benchmark, with ``changes``
    to its cdk.json entry."""
    context = cdk_json_context()
    team = {key: value for key, value in context["compiled-training:teams"]["Creative"].items()
            if key != "benchmark"}
    context["compiled-training:teams"] = {"Creative": {**team, "framework_version": "2.9.0",
                                                      **changes}}
    assembly = synth_reference_app(tmp_path, context)
    stack = assembly.get_stack_by_name("Creative")
    return Path(stack.template_full_path).read_bytes(), definitions(stack.template)


def test_a_compilers_options_come_from_cdk_json_as_its_own_keys_give_them(tmp_path):
    options, found = _creative(tmp_path / "options", compiler="torch-compile",
                               compiler_options={"mode": "max-autotune"})
    own_key, _ = _creative(tmp_path / "own-key", compiler="torch-compile",
                           torch_compile_mode="max-autotune")
    assert options == own_key
    training = [step for definition in found for step in definition["Steps"]
                if step["Type"] == "Training"]
    assert training and {step["Arguments"]["Environment"][
        "COMPILED_TRAINING_TORCH_COMPILE_MODE"] for step in training} == {"max-autotune"}
    # The twin: an option the compiler does not take fails, naming the key.
    with pytest.raises(ValueError, match=r"Creative: compiler_options: compiler 'torch-compile' "
                                         r"takes the options mode, got model_type$"):
        _creative(tmp_path / "wrong", compiler="torch-compile",
                  compiler_options={"model_type": "transformer"})
