"""CompilerBenchmark: parallel arms, the comparison step, the recorded verdict, the fail step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

from compiled_training import (
    BenchmarkArm,
    CompiledTrainingChecks,
    Compiler,
    CompilerBenchmark,
    Distribution,
    Framework,
    InputChannel,
    Parameter,
)
from compiled_training.definition.benchmark import COMPARE_ENTRYPOINT
from compiled_training.handlers import decision as decision_handler
from compiled_training.nag.rule_pack import PACK
from compiled_training.wiring.acknowledgements import acknowledge
from compiled_training_runtime import contract
from compiled_training_runtime.compare import ArmRun, Thresholds, compare
from tests.helpers import (
    SAMPLE_ENTRY_POINT,
    cfn_lint,
    condition_outcome,
    definitions,
    new_stack,
    validate_envelope,
    validate_job_arguments,
)

PYTORCH = Framework.pytorch("1.13.1")
CHANNELS = [InputChannel("train", Parameter.string("TrainDataUri", "s3://team-data/sd/train/")),
            InputChannel("validation", "s3://team-data/sd/validation/")]


def _benchmark(stack: cdk.Stack, source_dir: Path, **overrides) -> CompilerBenchmark:
    props = {
        "framework": PYTORCH,
        "instance_type": "ml.g5.12xlarge",
        "instance_count": 2,
        "source_dir": source_dir,
        "entry_point": "train.py",
        "channels": CHANNELS,
        "hyperparameters": {"model_family": "bert", "batch_size": 4,
                            "epochs": Parameter.integer("Epochs", 1)},
    }
    props.update(overrides)
    return CompilerBenchmark(stack, "Benchmark", **props)


def benchmark_definition(source_dir: Path, **overrides) -> dict:
    """One synthesized benchmark's pipeline definition (the runtime's tests read it too)."""
    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "train.py").write_text(SAMPLE_ENTRY_POINT)
    stack = new_stack()
    _benchmark(stack, source_dir, **overrides)
    (definition,) = definitions(Template.from_stack(stack).to_json())
    return definition


def _steps(definition: dict) -> dict[str, dict]:
    return {step["Name"]: step for step in definition["Steps"]}


# --- the definition -----------------------------------------------------------------------

def test_arms_run_in_parallel_on_the_same_data_and_hyperparameters(source_dir):
    definition = benchmark_definition(source_dir, large_batch_size=6)
    steps = _steps(definition)
    arms = [steps[n] for n in ("TrainBaseline", "TrainCompiler", "TrainCompilerLargeBatch")]
    # No arm waits for another: no dependency, no reference to another step's properties.
    for arm in arms:
        assert "DependsOn" not in arm
        assert '"Steps.' not in json.dumps(arm)
    assert len({json.dumps(a["Arguments"]["InputDataConfig"]) for a in arms}) == 1
    baseline, compiled, large = (a["Arguments"]["HyperParameters"] for a in arms)
    own = {"sagemaker_training_compiler_enabled", "sagemaker_training_compiler_debug_mode",
           "sagemaker_pytorch_xla_multi_worker_enabled", "sagemaker_torch_distributed_enabled",
           "sagemaker_instance_type", "batch_size", "base_batch_size"}
    common = {k: v for k, v in baseline.items() if k not in own}
    assert common == {k: v for k, v in compiled.items() if k not in own}
    assert common == {k: v for k, v in large.items() if k not in own}
    assert common["epochs"] == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.Epochs"}]}}


def test_baseline_uses_every_gpu_without_the_compiler_and_the_compiler_arms_use_xla(source_dir):
    steps = _steps(benchmark_definition(source_dir, large_batch_size=6))
    baseline = steps["TrainBaseline"]["Arguments"]
    compiled = steps["TrainCompiler"]["Arguments"]
    large = steps["TrainCompilerLargeBatch"]["Arguments"]
    assert baseline["AlgorithmSpecification"]["TrainingImage"].endswith(
        "/pytorch-training:1.13.1-gpu-py39")
    assert baseline["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert "sagemaker_training_compiler_enabled" not in baseline["HyperParameters"]
    for arm in (compiled, large):
        assert arm["AlgorithmSpecification"]["TrainingImage"].endswith(
            "/pytorch-trcomp-training:1.13.1-gpu-py39")
        assert arm["HyperParameters"]["sagemaker_training_compiler_enabled"] == "true"
        assert arm["HyperParameters"]["sagemaker_pytorch_xla_multi_worker_enabled"] == "true"
    assert compiled["HyperParameters"]["batch_size"] == "4"
    assert (large["HyperParameters"]["batch_size"], large["HyperParameters"]["base_batch_size"]
            ) == ("6", "4")
    for arm in (baseline, compiled, large):
        assert arm["ResourceConfig"] == {"VolumeSizeInGB": 30, "InstanceCount": 2,
                                         "InstanceType": "ml.g5.12xlarge"}


def test_each_arm_checkpoints_to_its_own_folder_per_execution(source_dir):
    steps = _steps(benchmark_definition(source_dir, large_batch_size=6))
    folders = []
    for name, arm in (("baseline", "TrainBaseline"), ("compiler", "TrainCompiler"),
                      ("compiler-large-batch", "TrainCompilerLargeBatch")):
        join = steps[arm]["Arguments"]["CheckpointConfig"]["S3Uri"]["Std:Join"]
        assert join["Values"][0].endswith(f"/checkpoints/{name}")
        assert join["Values"][1] == {"Get": "Execution.PipelineExecutionId"}
        folders.append(join["Values"][0])
    assert len(set(folders)) == 3


def test_comparison_reads_every_arm_output_and_timing_in_isolation(source_dir):
    steps = _steps(benchmark_definition(source_dir))
    compare_step = steps["Compare"]
    args = compare_step["Arguments"]
    inputs = {i["InputName"]: i["S3Input"] for i in args["ProcessingInputs"]}
    assert set(inputs) == {"baseline", "compiler", "code"}
    for name, step in (("baseline", "TrainBaseline"), ("compiler", "TrainCompiler")):
        values = inputs[name]["S3Uri"]["Std:Join"]["Values"]
        assert values[1:] == [{"Get": f"Steps.{step}.TrainingJobName"}, "output",
                              "output.tar.gz"]
        assert inputs[name]["LocalPath"] == f"/opt/ml/processing/input/{name}"
    arguments = args["AppSpecification"]["ContainerArguments"]
    timing = [a["Std:Join"]["Values"] for a in arguments if isinstance(a, dict)
              and isinstance(a["Std:Join"]["Values"][0], str)]
    assert timing == [
        ["baseline=", {"Get": "Steps.TrainBaseline.TrainingTimeInSeconds"}, ":",
         {"Get": "Steps.TrainBaseline.BillableTimeInSeconds"}],
        ["compiler=", {"Get": "Steps.TrainCompiler.TrainingTimeInSeconds"}, ":",
         {"Get": "Steps.TrainCompiler.BillableTimeInSeconds"}],
    ]
    assert args["AppSpecification"]["ContainerEntrypoint"] == [
        "/bin/bash", "-c", COMPARE_ENTRYPOINT, "compare"]
    assert args["AppSpecification"]["ImageUri"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.13.1-cpu-py39")
    assert args["NetworkConfig"] == {"EnableNetworkIsolation": True}
    assert args["ProcessingResources"]["ClusterConfig"]["InstanceType"] == "ml.m5.large"
    output = args["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"]["Std:Join"]
    assert output["Values"][0].endswith("/comparison")
    assert compare_step["PropertyFiles"] == [{"PropertyFileName": "Comparison",
                                              "OutputName": "comparison",
                                              "FilePath": "comparison.json"}]


def test_verdict_is_recorded_then_a_hold_fails_the_execution_with_the_reason(source_dir):
    definition = benchmark_definition(source_dir)
    steps = _steps(definition)
    record = steps["RecordDecision"]
    assert record["Type"] == "Lambda"
    assert record["FunctionArn"].startswith("arn:aws:lambda:us-east-1:123456789012:function:")
    assert set(record["Arguments"]) == set(decision_handler.FIELDS)
    assert record["Arguments"]["verdict"] == {"Std:JsonGet": {
        "PropertyFile": {"Get": "Steps.Compare.PropertyFiles.Comparison"},
        "Path": "decision.verdict"}}
    # The verdict records the thresholds the comparison judged by, as it wrote them down.
    assert record["Arguments"]["speedup_threshold"]["Std:JsonGet"]["Path"] == "thresholds.speedup"
    assert (record["Arguments"]["quality_tolerance"]["Std:JsonGet"]["Path"]
            == "thresholds.quality_tolerance")
    decision = steps["ShipDecision"]
    assert decision["DependsOn"] == ["RecordDecision"]
    conditions = decision["Arguments"]["Conditions"]
    assert [(c["Type"], c["LeftValue"]["Std:JsonGet"]["Path"], c["RightValue"]) for c in conditions
            ] == [("GreaterThanOrEqualTo", "decision.gain", {"Get": "Parameters.SpeedupThreshold"}),
                  ("LessThanOrEqualTo", "decision.quality_drop",
                   {"Get": "Parameters.QualityTolerance"})]
    assert decision["Arguments"]["IfSteps"] == []
    (fail,) = decision["Arguments"]["ElseSteps"]
    assert fail["Type"] == "Fail"
    assert fail["Arguments"]["ErrorMessage"]["Std:Join"]["Values"] == [
        "The compiler does not ship: ",
        {"Std:JsonGet": {"PropertyFile": {"Get": "Steps.Compare.PropertyFiles.Comparison"},
                         "Path": "decision.reason"}}]
    parameters = {p["Name"]: p for p in definition["Parameters"]}
    assert parameters["SpeedupThreshold"] == {"Name": "SpeedupThreshold", "Type": "Float",
                                              "DefaultValue": 0.2}
    assert parameters["QualityTolerance"]["DefaultValue"] == 0.1
    assert set(parameters) == {"Epochs", "TrainDataUri", "SpeedupThreshold", "QualityTolerance"}


def test_definition_passes_the_schema_and_the_api_shapes(source_dir):
    definition = benchmark_definition(source_dir, large_batch_size=6)
    validate_envelope(definition)
    validate_job_arguments(definition)


def test_fails_schema_validation_when_a_branch_step_is_malformed(source_dir):
    # The validator reaches into a condition's branches: a check that can fail.
    definition = benchmark_definition(source_dir)
    _steps(definition)["ShipDecision"]["Arguments"]["ElseSteps"][0]["Type"] = "Stop"
    with pytest.raises(Exception, match="is not valid under any of the given schemas"):
        validate_envelope(definition)


def _comparison(baseline_seconds: float, arm_seconds: float, baseline_accuracy: float,
                arm_accuracy: float, thresholds: Thresholds) -> dict:
    def run(name: str, seconds: float, accuracy: float) -> ArmRun:
        return ArmRun(name, "none", 32, 5e-5, 1000 / seconds, accuracy, seconds, seconds)

    return compare([run("baseline", baseline_seconds, baseline_accuracy),
                    run("compiler", arm_seconds, arm_accuracy)], thresholds)


@pytest.mark.parametrize("arm_seconds, arm_accuracy, speedup, tolerance", [
    (800, 0.5, 0.25, 0.1),           # exactly the speedup threshold: ship
    (800, 0.5, 0.26, 0.1),           # just short of it: hold
    (500, 0.498046875, 0.2, 0.1953125),  # exactly the quality tolerance: ship
    (500, 0.498046875, 0.2, 0.1953),     # just over it: hold
    (2000, 0.75, 0.2, 0.1),          # slower, better: hold
])
def test_the_pipeline_condition_and_the_comparison_verdict_agree(source_dir, arm_seconds,
                                                                 arm_accuracy, speedup,
                                                                 tolerance):
    definition = benchmark_definition(source_dir, speedup_threshold=speedup,
                                      quality_tolerance=tolerance)
    parameters = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
    comparison = _comparison(1000, arm_seconds, 0.5, arm_accuracy,
                             Thresholds(parameters["SpeedupThreshold"],
                                        parameters["QualityTolerance"]))
    # The document goes through JSON, as the property file does.
    document = json.loads(json.dumps(comparison))
    ships = condition_outcome(_steps(definition)["ShipDecision"], parameters,
                              {"Comparison": document})
    assert ships is (comparison["decision"]["verdict"] == "ship")


# --- the construct --------------------------------------------------------------------------

def test_synth_is_clean_under_cdk_nag_and_cfn_lint_and_deterministic(tmp_path, source_dir):
    outputs = []
    for name in ("a", "b"):
        stack = new_stack(outdir=tmp_path / name)
        app = stack.node.root
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
        benchmark = _benchmark(stack, source_dir, large_batch_size=6)
        acknowledge(benchmark.resource, "CompiledTraining-CT9",
                    "Benchmarking Training Compiler's last release is the point.", pack=PACK)
        app.synth()  # raises on any unacknowledged cdk-nag finding
        outputs.append(tmp_path / name / "Team.template.json")
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    assert cfn_lint(str(outputs[0])) == []


def test_roles_are_least_privilege(source_dir):
    stack = new_stack()
    benchmark = _benchmark(stack, source_dir, large_batch_size=6)
    template = Template.from_stack(stack).to_json()
    roles = {lid: r for lid, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"}

    def statements(prefix: str) -> str:
        (role,) = [r for lid, r in roles.items() if lid.startswith(prefix)]
        return json.dumps([s for p in role["Properties"]["Policies"]
                           for s in p["PolicyDocument"]["Statement"]])

    pipeline = statements("BenchmarkPipelineRole")
    assert '"sagemaker:CreateProcessingJob"' in pipeline
    assert '"aws:RequestTag/compiled-training:pipeline"' in pipeline
    assert '"lambda:InvokeFunction"' in pipeline and "BenchmarkDecisionFunction" in pipeline
    decision = statements("BenchmarkDecisionRole")
    assert json.loads(decision)[0]["Action"] == "ssm:PutParameter"
    assert "BenchmarkDecisionParameter" in decision and '"*"' not in decision
    execution = statements("BenchmarkExecutionRole")
    for repository in ("pytorch-training", "pytorch-trcomp-training"):
        assert f"repository/{repository}" in execution
    assert "/aws/sagemaker/ProcessingJobs" in execution
    assert benchmark.decision_parameter_name == (
        f"/compiled-training/{benchmark.pipeline_name}/decision")


def test_decision_parameter_starts_undecided_and_the_function_may_write_only_it(source_dir):
    stack = new_stack()
    _benchmark(stack, source_dir, decision_parameter_name="/creative/sd/compiler-decision",
               speedup_threshold=0.25, quality_tolerance=0.05)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::SSM::Parameter", {
        "Name": "/creative/sd/compiler-decision", "Type": "String",
        "Value": json.dumps({"verdict": "undecided",
                             "reason": "no benchmark execution has finished yet"},
                            separators=(",", ":"))})
    # The range each threshold may take per execution: the bar set at synth or a stricter one.
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "decision.handler",
        "Environment": {"Variables": {
            "DECISION_PARAMETER": Match.any_value(),
            "THRESHOLD_RANGES": '{"quality_tolerance": [0.0, 0.05], '
                                '"speedup_threshold": [0.25, 10.0]}'}}})


def test_torch_compile_is_benchmarked_on_one_pytorch_2_image(source_dir):
    steps = _steps(benchmark_definition(
        source_dir, framework=Framework.pytorch("2.3.0"), compiler=Compiler.torch_compile(),
        instance_count=1, instance_type="ml.g5.2xlarge"))
    baseline = steps["TrainBaseline"]["Arguments"]
    compiled = steps["TrainCompiler"]["Arguments"]
    assert (baseline["AlgorithmSpecification"]["TrainingImage"]
            == compiled["AlgorithmSpecification"]["TrainingImage"])
    assert compiled["Environment"][contract.ENV_TORCH_COMPILE] == "true"
    assert contract.ENV_TORCH_COMPILE not in baseline.get("Environment", {})


@pytest.mark.parametrize("version", ["2.9.0", "2.10.0"])
def test_torch_compile_on_current_pytorch_uses_every_gpu_of_both_arms_by_default(source_dir,
                                                                               version):
    # The SDKs' torch_distributed list stops at 2.8.0; the benchmark's own default must not.
    stack = new_stack()
    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "train.py").write_text(SAMPLE_ENTRY_POINT)
    _benchmark(stack, source_dir, framework=Framework.pytorch(version),
               compiler=Compiler.torch_compile(), pipeline_name="sd-trial")
    (definition,) = definitions(Template.from_stack(stack).to_json())
    steps = _steps(definition)
    for arm in ("TrainBaseline", "TrainCompiler"):
        hyperparameters = steps[arm]["Arguments"]["HyperParameters"]
        assert hyperparameters[contract.HP_TORCH_DISTRIBUTED] == "true", arm
    Annotations.from_stack(stack).has_no_warning("*", Match.string_like_regexp("IdleGpus"))


def test_spot_arms_draw_a_warning(source_dir):
    stack = new_stack()
    _benchmark(stack, source_dir, spot=True)
    Annotations.from_stack(stack).has_warning(
        "/Team/Benchmark", Match.string_like_regexp("spot arms can be interrupted.*benchmark on demand"))


def test_a_derived_name_warns_that_a_rename_strands_comparisons_and_deletes_the_verdict(
        source_dir):
    stack = new_stack()
    name = _benchmark(stack, source_dir).pipeline_name
    Annotations.from_stack(stack).has_warning("/Team/Benchmark", Match.string_like_regexp(
        f"leaves its checkpoints and comparisons under the old one and replaces its verdict "
        f"parameter /compiled-training/{name}/decision, deleting the recorded verdict; pass "
        f"pipeline_name='{name}'"))
    named = new_stack()
    _benchmark(named, source_dir, pipeline_name="sd-compiler-trial")
    Annotations.from_stack(named).has_no_warning("/Team/Benchmark", Match.string_like_regexp(
        "pipeline_name is omitted"))


def test_decision_function_writes_only_its_parameter(monkeypatch):
    # AWS itself cannot exist here: moto stands in for SSM.
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("DECISION_PARAMETER", "/compiled-training/p/decision")
    monkeypatch.setenv("THRESHOLD_RANGES", DEPLOYED_RANGES)
    event = {"verdict": "ship", "arm": "compiler-large-batch", "speedup": 0.54, "gain": 0.54,
             "basis": "wall-clock", "instance_type": "ml.g5.12xlarge", "instance_count": 2,
             "quality_drop": 0.05, "global_batch_size": 48, "learning_rate": 7.5e-05,
             "reason": "ship: ...", "speedup_threshold": 0.2, "quality_tolerance": 0.1,
             "comparison": "s3://b/p/comparison/x",
             "execution": "arn:aws:sagemaker:us-east-1:123456789012:pipeline/p/execution/x",
             "unexpected": "ignored"}
    with mock_aws():
        import boto3

        ssm = boto3.client("ssm")
        assert decision_handler.handler(event) == {"version": 1}
        assert decision_handler.handler({**event, "verdict": "hold"}) == {"version": 2}
        stored = json.loads(ssm.get_parameter(Name="/compiled-training/p/decision")
                            ["Parameter"]["Value"])
        assert stored["verdict"] == "hold" and "unexpected" not in stored
        assert (stored["speedup_threshold"], stored["quality_tolerance"]) == (0.2, 0.1)
        assert len(ssm.describe_parameters()["Parameters"]) == 1
        with pytest.raises(ValueError, match="verdict must be one of ship, hold, got 'maybe'"):
            decision_handler.handler({**event, "verdict": "maybe"})


DEPLOYED_RANGES = '{"quality_tolerance": [0.0, 0.1], "speedup_threshold": [0.2, 10.0]}'
RECORDED = {"verdict": "ship", "arm": "compiler", "speedup": 0.05, "gain": 0.05,
            "basis": "wall-clock", "instance_type": "ml.g5.12xlarge", "instance_count": 2,
            "quality_drop": 0.0,
            "global_batch_size": 32, "learning_rate": 5e-05, "reason": "ship: ...",
            "speedup_threshold": 0.2, "quality_tolerance": 0.1,
            "comparison": "s3://b/p/comparison/x",
            "execution": "arn:aws:sagemaker:us-east-1:123456789012:pipeline/p/execution/x"}


@pytest.mark.parametrize(("thresholds", "message"), [
    ({"speedup_threshold": 0.0}, r"speedup_threshold 0.0 is outside 0.2-10"),
    ({"quality_tolerance": 5.0}, r"quality_tolerance 5.0 is outside 0-0.1"),
    ({"speedup_threshold": 0.01, "quality_tolerance": 1.0},
     r"quality_tolerance 1.0 is outside 0-0.1; speedup_threshold 0.01 is outside 0.2-10"),
])
def test_fails_to_record_a_verdict_judged_by_a_lowered_bar(monkeypatch, thresholds, message):
    # Whoever may start an execution may set its thresholds: lowering the bar to record
    # "ship" is refused, and the verdict recorded before stays. moto stands in for SSM.
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("DECISION_PARAMETER", "/compiled-training/p/decision")
    monkeypatch.setenv("THRESHOLD_RANGES", DEPLOYED_RANGES)
    with mock_aws():
        import boto3

        ssm = boto3.client("ssm")
        decision_handler.handler({**RECORDED, "verdict": "hold", "speedup_threshold": 0.3})
        with pytest.raises(ValueError, match=r"nothing recorded: the verdict was judged by "
                                             r"thresholds outside the range fixed when the "
                                             r"benchmark was deployed .*: " + message):
            decision_handler.handler({**RECORDED, **thresholds})
        stored = json.loads(ssm.get_parameter(Name="/compiled-training/p/decision")
                            ["Parameter"]["Value"])
        assert (stored["verdict"], stored["speedup_threshold"]) == ("hold", 0.3)


def test_fails_when_a_schedule_would_lower_the_bar(source_dir):
    from compiled_training import RetrainingSchedule

    stack = new_stack()
    benchmark = _benchmark(stack, source_dir, speedup_threshold=0.25)
    for parameters, message in (
            ({"SpeedupThreshold": 0.1}, r"parameter 'SpeedupThreshold' must be within 0.25-10, "
                                        r"the bar set at synth or a stricter one .*, got 0.1"),
            ({"QualityTolerance": 0.5}, r"parameter 'QualityTolerance' must be within 0-0.1, "
                                        r".*got 0.5")):
        with pytest.raises(ValueError, match=message):
            RetrainingSchedule(stack, f"Lower{len(message)}", pipeline=benchmark,
                               team="creative", expression="rate(7 days)",
                               parameters=parameters)


# --- failures -------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    ({"compiler": Compiler.none()},
     r"compiler must be Compiler.training_compiler\(\) or Compiler.torch_compile\(\): the "
     r"benchmark compares it with no compiler, got Compiler.none\(\)"),
    ({"channels": CHANNELS[:1]},
     r"channels must include 'validation' \(quality is compared on it\), got \['train'\]"),
    ({"quality_metric": "bleu"},
     r"quality_metric must be one of validation_accuracy, validation_loss, got 'bleu'"),
    ({"speedup_threshold": -0.1}, r"speedup_threshold must be between 0 and 10, got -0.1"),
    ({"quality_tolerance": 101}, r"quality_tolerance must be between 0 and 100, got 101"),
    ({"large_batch_size": 4}, r"large_batch_size must be an integer above batch_size 4, got 4"),
    ({"large_batch_size": 8, "hyperparameters": {"model_family": "bert"}},
     r"large_batch_size needs an integer hyperparameters\['batch_size'\] to scale the "
     r"learning rate from, got None"),
    ({"comparison_instance_type": "ml.m5.huge"},
     r"comparison_instance_type must be a SageMaker instance type, got 'ml.m5.huge'"),
    ({"instance_type": "ml.p4de.24xlarge"},
     r"\(compiler arm\): instance_type must be a GPU instance of p3, p3dn, g4dn, p4d, g5 for "
     r"Training Compiler, got 'ml.p4de.24xlarge'"),
])
def test_fails_on_bad_props_naming_field_value_and_what_is_allowed(source_dir, overrides,
                                                                     message):
    with pytest.raises(ValueError, match=r"CompilerBenchmark Team/Benchmark.*" + message):
        _benchmark(new_stack(), source_dir, **overrides)


def test_fails_with_every_problem_at_once(source_dir):
    with pytest.raises(ValueError, match=r"has 3 problems:\n  - compiler must be .*\n  - "
                                         r"framework must be a deep-learning framework .*"
                                         r"XGBoost 1.7-1\n  - channels must include"):
        _benchmark(new_stack(), source_dir, compiler=Compiler.none(),
                   framework=Framework.xgboost("1.7-1"), channels=CHANNELS[:1])


def test_fails_when_a_distribution_does_not_fit_the_arm(source_dir):
    with pytest.raises(ValueError, match=r"\(baseline arm\): distribution 'pytorchxla' runs only "
                                         r"with Training Compiler"):
        _benchmark(new_stack(), source_dir, baseline_distribution=Distribution.PYTORCHXLA)


def test_a_schedule_can_rerun_the_benchmark_with_its_own_thresholds(source_dir):
    from compiled_training import RetrainingSchedule

    stack = new_stack()
    benchmark = _benchmark(stack, source_dir)
    RetrainingSchedule(stack, "Monthly", pipeline=benchmark, team="creative",
                       expression="cron(0 3 1 * ? *)", parameters={"SpeedupThreshold": 0.3})
    Template.from_stack(stack).has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"SageMakerPipelineParameters": {
            "PipelineParameterList": [{"Name": "SpeedupThreshold", "Value": "0.3"}]}})})
    with pytest.raises(ValueError, match=r"parameter 'Speedup' is not declared by pipeline .*declared: "
                                         r".*SpeedupThreshold"):
        RetrainingSchedule(stack, "Typo", pipeline=benchmark, team="creative",
                           expression="rate(7 days)", parameters={"Speedup": 0.3})


def test_grants_reading_the_verdict_and_nothing_else(source_dir):
    from aws_cdk import aws_iam as iam

    stack = new_stack()
    benchmark = _benchmark(stack, source_dir)
    reader = iam.Role(stack, "Production", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    benchmark.grant_read_decision(reader)
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert set(statement["Action"]) == {"ssm:DescribeParameters", "ssm:GetParameter",
                                        "ssm:GetParameterHistory", "ssm:GetParameters"}
    assert "DecisionParameter" in json.dumps(statement["Resource"])


def test_advice_shared_by_arms_is_one_warning_naming_them(source_dir):
    stack = new_stack()
    _benchmark(stack, source_dir, large_batch_size=6)  # 2 x ml.g5.12xlarge: no EFA
    found = Annotations.from_stack(stack).find_warning(
        "/Team/Benchmark", Match.string_like_regexp("has no EFA"))
    assert len(found) == 1
    assert found[0].entry.data.startswith(
        "compiler, compiler-large-batch arms: ml.g5.12xlarge has no EFA")


# --- arms on instances of their own (a Trainium arm beside the GPU job) ----------------------

TRAINIUM_ARM = BenchmarkArm("trainium", Compiler.neuron_xla(precompile=True),
                            "ml.trn1.32xlarge", 2, Framework.pytorch("2.9.0"))


def test_a_trainium_arm_trains_beside_the_gpu_arms_and_is_priced_for_the_comparison(source_dir):
    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "train.py").write_text(SAMPLE_ENTRY_POINT)
    stack = new_stack()
    benchmark = _benchmark(stack, source_dir, arms=[TRAINIUM_ARM])
    (definition,) = definitions(Template.from_stack(stack).to_json())
    validate_envelope(definition)
    validate_job_arguments(definition)
    steps = _steps(definition)
    assert list(steps) == ["TrainBaseline", "TrainCompiler", "PrecompileTrainium",
                           "TrainTrainium", "Compare", "RecordDecision", "ShipDecision"]
    # Its own instances, its own framework's Neuron image, torchrun, the compile cache; the
    # GPU arms keep theirs. It waits for its own pre-compilation only.
    arm = steps["TrainTrainium"]["Arguments"]
    assert arm["ResourceConfig"]["InstanceType"] == "ml.trn1.32xlarge"
    assert arm["ResourceConfig"]["InstanceCount"] == 2
    assert "/pytorch-training-neuronx:2.9.0-neuronx-" in arm["AlgorithmSpecification"][
        "TrainingImage"]
    assert arm["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert arm["Environment"]["NEURON_COMPILE_CACHE_URL"].endswith("/neuron-compile-cache/")
    assert steps["TrainTrainium"]["DependsOn"] == ["PrecompileTrainium"]
    assert steps["TrainBaseline"]["Arguments"]["ResourceConfig"]["InstanceType"] == (
        "ml.g5.12xlarge")
    assert "DependsOn" not in steps["TrainBaseline"]
    # The comparison gets each arm's fleet and price, from the on-demand list (trn1 estimated).
    arguments = steps["Compare"]["Arguments"]["AppSpecification"]["ContainerArguments"]
    fleets = [arguments[i + 1] for i, a in enumerate(arguments) if a == "--fleet"]
    assert fleets == ["baseline=ml.g5.12xlarge:2:7.09", "compiler=ml.g5.12xlarge:2:7.09",
                      "trainium=ml.trn1.32xlarge:2:24.725"]
    assert benchmark.summary()["instances"] == (
        "2 x ml.g5.12xlarge per arm; trainium: 2 x ml.trn1.32xlarge")
    assert benchmark.summary()["benchmark"]["fleets"]["trainium"] == {
        "instanceType": "ml.trn1.32xlarge", "instanceCount": 2, "compiler": "neuron-xla",
        "usdPerInstanceHour": 24.725}


def test_an_arm_on_an_unpriced_instance_needs_a_price(source_dir):
    h200 = BenchmarkArm("h200", Compiler.torch_compile(), "ml.p5e.48xlarge", 1,
                        Framework.pytorch("2.9.0"))
    with pytest.raises(ValueError, match=re.escape(
            "arms on other instances than the baseline's are compared by cost per epoch, and "
            "ml.p5e.48xlarge has no recorded price (Amazon SageMaker AI pricing page, "
            "on-demand training, us-east-1, 2026-11); give prices={'ml.p5e.48xlarge': USD per "
            "instance-hour}")):
        benchmark_definition(source_dir, arms=[h200])
    definition = benchmark_definition(source_dir, arms=[h200],
                                      prices={"ml.p5e.48xlarge": 40.0, "ml.g5.12xlarge": 6.5})
    arguments = _steps(definition)["Compare"]["Arguments"]["AppSpecification"][
        "ContainerArguments"]
    assert "h200=ml.p5e.48xlarge:1:40" in arguments
    assert "baseline=ml.g5.12xlarge:2:6.5" in arguments  # a given price comes first


@pytest.mark.parametrize(("name", "message"), [
    ("Trainium", "arms: name must be 1 to 41 characters, words of lower-case letters and "
                 "digits joined by single hyphens, starting with a letter, got 'Trainium'"),
    ("baseline-", "arms: name must be 1 to 41 characters"),
    ("compiler", "arms: name 'compiler' is taken (its step TrainCompiler is arm 'compiler''s; "
                 "taken: baseline, compiler, compiler-large-batch)"),
    ("compiler-large-batch", "its step TrainCompilerLargeBatch is arm "
                             "'compiler-large-batch''s"),
])
def test_fails_on_an_arm_name_that_the_comparison_cannot_tell_apart(source_dir, name, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        benchmark_definition(source_dir, arms=[
            BenchmarkArm(name, Compiler.torch_compile(), "ml.g5.48xlarge", 1,
                         Framework.pytorch("2.9.0"))])


def test_an_arm_breaking_a_trainium_rule_is_refused_naming_the_arm(source_dir):
    # Training Compiler on Trainium: the validation of every job, with the arm named.
    with pytest.raises(ValueError, match=r"(?s)\(trainium arm\) has 2 problems.*AWS Trainium, "
                                         r"which compiles with the Neuron SDK: use "
                                         r"Compiler\.neuron_xla\(\)"):
        benchmark_definition(source_dir, arms=[BenchmarkArm(
            "trainium", Compiler.training_compiler(), "ml.trn1.32xlarge", 1)])


def test_arms_whose_steps_would_share_a_name_are_refused(source_dir):
    # Words joined by single hyphens give each name its own step; the same name twice does not.
    arms = [BenchmarkArm("trn2", Compiler.torch_compile(), "ml.g5.48xlarge", 1,
                         Framework.pytorch("2.9.0"))] * 2
    with pytest.raises(ValueError, match=re.escape(
            "arms: name 'trn2' is taken (its step TrainTrn2 is arm 'trn2''s")):
        benchmark_definition(source_dir, arms=arms)


def test_prices_must_be_positive_and_finite(source_dir):
    with pytest.raises(ValueError, match=re.escape(
            "prices must be positive, finite USD per instance-hour, got "
            "{'ml.g5.12xlarge': 0.0}")):
        benchmark_definition(source_dir, arms=[TRAINIUM_ARM], prices={"ml.g5.12xlarge": 0.0})


def test_a_trainium_arms_precompilation_counts_in_its_time_and_cost(source_dir):
    definition = benchmark_definition(source_dir, arms=[TRAINIUM_ARM],
                                      prices={"ml.trn1.32xlarge": 0.00001})
    arguments = _steps(definition)["Compare"]["Arguments"]["AppSpecification"][
        "ContainerArguments"]
    (precompile,) = [arguments[i + 1] for i, a in enumerate(arguments) if a == "--precompile"]
    assert precompile == {"Std:Join": {"On": "", "Values": [
        "trainium=", {"Get": "Steps.PrecompileTrainium.TrainingTimeInSeconds"},
        ":", {"Get": "Steps.PrecompileTrainium.BillableTimeInSeconds"}]}}
    # A price in fixed point, as the comparison's --fleet reads it (never 1e-05).
    assert "trainium=ml.trn1.32xlarge:2:0.00001" in arguments


def test_a_torch_compile_arm_runs_behind_the_launcher_its_archive_carries(tmp_path):
    """The benchmark's own compiler is Training Compiler (no launcher), an extra arm's is
    torch.compile: the shared code archive must carry the launcher that arm names."""
    import tarfile

    source = tmp_path / "training"
    source.mkdir()
    (source / "train.py").write_text(SAMPLE_ENTRY_POINT)  # imports nothing of the runtime
    stack = new_stack(outdir=tmp_path / "out")
    h200 = BenchmarkArm("h200", Compiler.torch_compile(), "ml.g5.48xlarge", 1,
                        Framework.pytorch("2.9.0"))
    _benchmark(stack, source, arms=[h200])
    steps = _steps(definitions(Template.from_stack(stack).to_json())[0])
    programs = {name: step["Arguments"]["HyperParameters"]["sagemaker_program"]
                for name, step in steps.items() if step["Type"] == "Training"}
    assert programs["TrainH200"] == json.dumps(contract.LAUNCHER)
    assert programs["TrainCompiler"] == '"train.py"'  # Training Compiler: no launcher
    archives = []
    for asset in Path(stack.node.root.synth().directory).glob("asset.*.tar.gz"):
        with tarfile.open(asset) as archive:
            archives.append(set(archive.getnames()))
    (code,) = [names for names in archives if "train.py" in names]  # the team's code
    assert contract.LAUNCHER in code
