"""CompiledTrainingChecks: each rule against a compliant and a non-compliant pipeline.

Non-compliant pipelines are raw CfnPipelines with literal definitions: TrainingPipeline
refuses most of them at synth, and the pack must catch them in pipelines built by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training import Compiler, Framework, TrainingPipeline, WorkloadProfile
from compiled_training.nag.rule_pack import RULES, CompiledTrainingChecks
from tests.helpers import REGION, new_stack

BERT_PROFILE = dict(name="bert", framework="pytorch", model_family="bert",
                    instance_type="ml.g5.48xlarge", instance_count=1, hours_per_run=6.2,
                    runs_per_week=3, static_shapes=True, precision="fp16")
COMPLIANT_STEP = {
    "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-trcomp-training:1.13.1-gpu-py39",
                               "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "HyperParameters": {"sagemaker_training_compiler_enabled": "true",
                        "sagemaker_pytorch_xla_multi_worker_enabled": "true"},
    "ProfilerConfig": {"DisableProfiler": True},
}


def _synth(tmp_path: Path, build) -> tuple[bool, dict]:
    """Whether the app's synth failed, and the pack's section of its validation report."""
    stack = new_stack(outdir=tmp_path)
    app = stack.node.root
    cdk.Validations.of(app).add_plugins(CompiledTrainingChecks(app))
    build(stack)
    failed = False
    try:
        app.synth()
    except Exception as error:  # ValidationFailed comes through jsii as a RuntimeError
        assert "ValidationFailed" in str(error)
        failed = True
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (section,) = [p for p in report["pluginReports"] if p["pluginName"] == "CompiledTraining"]
    return failed, section


def _findings(tmp_path: Path, build) -> dict[str, str]:
    """Rule id -> level of every CompiledTraining finding (the summary line aside)."""
    return {v["ruleName"]: v["severity"] for v in _synth(tmp_path, build)[1]["violations"]
            if v["ruleName"] != "CompiledTraining-Summary"}


# Neuron's PyTorch/XLA path on Trainium, as a hand-built pipeline writes it: the NeuronX
# image, neuronx-cc's flags, and a compile cache in S3.
NEURON_STEP = {
    "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04",
                               "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": "ml.trn1.32xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "HyperParameters": {"sagemaker_torch_distributed_enabled": "true",
                        "global_batch_size": "256", "micro_batch_size": "2"},
    "Environment": {"NEURON_CC_FLAGS": "--model-type=transformer",
                    "NEURON_COMPILE_CACHE_URL": "s3://b/p/neuron-compile-cache/"},
}


# A script on a 4-GPU instance with no launcher, as an SDK pipeline with no distribution writes it.
EAGER_STEP = {
    "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.9.0-gpu-py312",
                               "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "HyperParameters": {"sagemaker_program": '"train.py"', "epochs": "3"},
}


# The library's torch.compile step on one GPU, as it writes it with its compile cache off...
TORCH_COMPILE_STEP = {**EAGER_STEP, "Environment": {"COMPILED_TRAINING_TORCH_COMPILE": "true"},
                      "ResourceConfig": {**EAGER_STEP["ResourceConfig"],
                                         "InstanceType": "ml.g5.2xlarge"}}
# ...and as 0.2.0 wrote it, the switch a hyperparameter.
TORCH_COMPILE_STEP_0_2_0 = {**EAGER_STEP, "HyperParameters": {
    **EAGER_STEP["HyperParameters"], "compiled_training_torch_compile": "true"},
    "ResourceConfig": {**EAGER_STEP["ResourceConfig"], "InstanceType": "ml.g5.2xlarge"}}


def _raw(step_changes: dict, metadata: dict | None = None, *, base: dict = COMPLIANT_STEP,
         precompile: bool = False, scheduled: bool = False):
    def build(stack):
        arguments = json.loads(json.dumps(base))
        arguments.update(step_changes)
        steps = [{"Name": "Train", "Type": "Training", "Arguments": arguments}]
        if precompile:
            first = json.loads(json.dumps(arguments))
            first["Environment"] = {**first["Environment"], "RUN_NEURON_PARALLEL_COMPILE": "1"}
            steps = [{"Name": "Precompile", "Type": "Training", "Arguments": first},
                     {**steps[0], "DependsOn": ["Precompile"]}]
        definition = {"Version": "2020-12-01", "Steps": steps}
        pipeline = sagemaker.CfnPipeline(
            stack, "Raw", pipeline_name="raw", role_arn="arn:aws:iam::123456789012:role/r",
            pipeline_definition={"PipelineDefinitionBody": json.dumps(definition)})
        if metadata:
            pipeline.add_metadata("compiled-training", metadata)
        if scheduled:  # what a RetrainingSchedule records on the library's own pipelines
            pipeline.add_metadata("compiled-training:schedules", ["Team/Weekly"])
    return build


NON_COMPLIANT = {
    "CT1": _raw({"ResourceConfig": {**COMPLIANT_STEP["ResourceConfig"],
                                    "InstanceType": "ml.m5.xlarge"}}),
    "CT2": _raw({"HyperParameters": {**COMPLIANT_STEP["HyperParameters"],
                                     "sagemaker_distributed_dataparallel_enabled": "true"}}),
    "CT3": _raw({"DebugHookConfig": {"S3OutputPath": "s3://b/o"}}),
    "CT4": _raw({"HyperParameters": {"sagemaker_training_compiler_enabled": "true"}}),
    "CT5": _raw({}, {"workload": {**BERT_PROFILE, "hours_per_run": 0.2}}),
    "CT6": _raw({}, {"workload": {**BERT_PROFILE, "static_shapes": False}}),
    "CT7": _raw({}, {"workload": {**BERT_PROFILE, "precision": "fp32"}}),
    "CT8": _raw({}, {"frameworkName": "pytorch", "frameworkVersion": "2.1.0"}),
    "CT9": _raw({}),
    "CT10": _raw({"AlgorithmSpecification": {
        "TrainingImage": "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1",
        "TrainingInputMode": "File"}}),
    "CT11": _raw({"Environment": {"NEURON_CC_FLAGS": "--model-type=transformer"}},
                 base=NEURON_STEP),
    "CT12": _raw({"ResourceConfig": {**NEURON_STEP["ResourceConfig"], "InstanceCount": 2}},
                 base=NEURON_STEP),
    # 32 NeuronCores x 2 (micro batch) = 64 a step: 100 does not divide.
    "CT13": _raw({"HyperParameters": {**NEURON_STEP["HyperParameters"],
                                      "global_batch_size": "100"}}, base=NEURON_STEP),
    "CT14": _raw({"AlgorithmSpecification": {**EAGER_STEP["AlgorithmSpecification"]}},
                 base=EAGER_STEP),
    "CT15": _raw({}, {"frameworkName": "pytorch"}, base=TORCH_COMPILE_STEP, scheduled=True),
}


@pytest.mark.parametrize("rule_id", sorted(NON_COMPLIANT))
def test_non_compliant_pipeline_is_reported(tmp_path, rule_id):
    findings = _findings(tmp_path, NON_COMPLIANT[rule_id])
    assert f"CompiledTraining-{rule_id}" in findings


@pytest.mark.parametrize("changes", [
    {"HyperParameters": {**EAGER_STEP["HyperParameters"],
                         "sagemaker_torch_distributed_enabled": "true"}},
    {"ResourceConfig": {**EAGER_STEP["ResourceConfig"], "InstanceType": "ml.g5.2xlarge"}},
])
def test_a_script_on_every_gpu_or_on_one_gpu_leaves_none_idle(tmp_path, changes):
    assert _findings(tmp_path, _raw(changes, base=EAGER_STEP)) == {}


@pytest.mark.parametrize(("changes", "scheduled", "library"), [
    ({"Environment": {"COMPILED_TRAINING_TORCH_COMPILE": "true",
                      "COMPILED_TRAINING_COMPILE_CACHE_URL": "s3://b/p/compile-cache/Train/"}},
     True, True),                                 # scheduled, and warm after its first run
    ({}, False, True),                            # run by hand: its first run is every run
    ({}, True, False),                            # a script of another's: no warm start to ask
], ids=["cache-on", "not-scheduled", "hand-built"])
def test_ct15_holds_only_scheduled_library_pipelines_to_the_compile_cache(tmp_path, changes,
                                                                          scheduled, library):
    metadata = {"frameworkName": "pytorch"} if library else None
    assert "CompiledTraining-CT15" not in _findings(tmp_path, _raw(
        changes, metadata, base=TORCH_COMPILE_STEP, scheduled=scheduled))


def test_ct15_reads_the_switch_of_a_template_made_by_0_2_0(tmp_path):
    assert "CompiledTraining-CT15" in _findings(tmp_path, _raw(
        {}, {"frameworkName": "pytorch"}, base=TORCH_COMPILE_STEP_0_2_0, scheduled=True))
    # The twin: an eager step of the same shape is not held to it.
    assert "CompiledTraining-CT15" not in _findings(tmp_path, _raw(
        {}, {"frameworkName": "pytorch"}, base=EAGER_STEP, scheduled=True))


def test_a_built_in_algorithm_on_several_gpus_is_not_held_to_the_launcher_rule(tmp_path):
    step = {"AlgorithmSpecification": {
        "TrainingImage": "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1",
        "TrainingInputMode": "File"}, "HyperParameters": {"num_round": "100"},
        "ResourceConfig": {**EAGER_STEP["ResourceConfig"], "InstanceCount": 2}}
    assert _findings(tmp_path, _raw(step, base=EAGER_STEP)) == {}


def test_only_errors_fail_the_synth_and_warnings_are_reported(tmp_path):
    failed, section = _synth(tmp_path, NON_COMPLIANT["CT14"])
    assert not failed and section["conclusion"] == "success"
    assert [(v["ruleName"], v["severity"]) for v in section["violations"]] == [
        ("CompiledTraining-CT14", "warning")]


def test_an_error_still_fails_the_synth(tmp_path):
    failed, section = _synth(tmp_path, NON_COMPLIANT["CT1"])
    assert failed and section["conclusion"] == "failure"


def test_the_report_shows_the_pack_ran_where_it_found_nothing(tmp_path):
    failed, section = _synth(tmp_path, _raw({}, base=EAGER_STEP | {"ResourceConfig": {
        **EAGER_STEP["ResourceConfig"], "InstanceType": "ml.g5.2xlarge"}}))
    assert not failed and section["conclusion"] == "success"
    assert [(v["ruleName"], v["severity"], v["description"]) for v in section["violations"]] == [
        ("CompiledTraining-Summary", "info",
         "CompiledTraining checked 1 pipeline against CT1-CT15: no findings")]


def test_a_training_compiler_pipeline_synthesizes_with_its_frozen_notice(tmp_path, source_dir):
    # A newcomer's first pipeline: CT9 is informational and never fails the synth.
    def build(stack):
        TrainingPipeline(stack, "Bert", pipeline_name="bert", framework=Framework.pytorch("1.13.1"),
                         compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
                         source_dir=source_dir, entry_point="train.py")
    failed, section = _synth(tmp_path, build)
    assert not failed
    assert [v["ruleName"] for v in section["violations"]] == ["CompiledTraining-CT9"]


def test_an_acknowledged_finding_leaves_the_report_as_acknowledged(tmp_path, source_dir):
    # The README's one line, on the pipeline, with its reason.
    def build(stack):
        pipeline = TrainingPipeline(
            stack, "Bert", pipeline_name="bert", framework=Framework.pytorch("1.13.1"),
            compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
            source_dir=source_dir, entry_point="train.py")
        cdk.Validations.of(pipeline).acknowledge(cdk.Acknowledgment(
            id="CompiledTraining::CompiledTraining-CT9",
            reason="We keep Training Compiler's last release until our benchmark says otherwise."))
    failed, section = _synth(tmp_path, build)
    assert not failed
    assert [v["ruleName"] for v in section.get("suppressedViolations", [])] == [
        "CompiledTraining-CT9"]
    assert section["violations"] == [] and section["conclusion"] == "success"


def test_compliant_raw_pipeline_only_gets_the_frozen_notice(tmp_path):
    findings = _findings(tmp_path, _raw({}, {"frameworkName": "pytorch", "frameworkVersion": "1.13.1",
                                            "workload": BERT_PROFILE}))
    assert set(findings) == {"CompiledTraining-CT9"}
    assert findings["CompiledTraining-CT9"] == "info"  # informational: synth does not fail


def test_ct13_counts_data_parallel_replicas_over_tensor_and_pipeline_parallelism(tmp_path):
    # 32 NeuronCores over tensor parallelism 32: one replica; a global batch of 8 divides.
    step = {"HyperParameters": {**NEURON_STEP["HyperParameters"], "global_batch_size": "8",
                                "micro_batch_size": "1", "tensor_parallel_size": "32"}}
    assert _findings(tmp_path, _raw(step, base=NEURON_STEP)) == {}


def test_hugging_face_neuronx_images_are_held_to_the_trainium_rules(tmp_path):
    image = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training-"
             "neuronx:2.8.0-transformers4.55.4-neuronx-py310-sdk2.26.0-ubuntu22.04")
    step = {"AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
            "Environment": {}}
    assert "CompiledTraining-CT11" in _findings(tmp_path, _raw(step, base=NEURON_STEP))


@pytest.mark.parametrize("instances", [1, 2])
def test_a_compliant_neuron_pipeline_gets_no_finding(tmp_path, instances):
    # Multi-node with its pre-compilation step before it; the batch divides over 64 x 2.
    step = {"ResourceConfig": {**NEURON_STEP["ResourceConfig"], "InstanceCount": instances}}
    assert _findings(tmp_path, _raw(step, base=NEURON_STEP, precompile=instances > 1)) == {}


@pytest.mark.parametrize(("precompile", "expected"), [(True, set()),
                                                      (False, {"CompiledTraining-CT12"})])
def test_the_librarys_neuron_pipeline_is_held_to_the_trainium_rules(tmp_path, source_dir,
                                                                    precompile, expected):
    def build(stack):
        TrainingPipeline(stack, "Neuron", framework=Framework.pytorch("2.9.0"),
                         compiler=Compiler.neuron_xla(precompile=precompile),
                         instance_type="ml.trn1.32xlarge", instance_count=2,
                         source_dir=source_dir, entry_point="train.py")
    assert set(_findings(tmp_path, build)) == expected


def test_training_pipeline_from_the_advisor_is_compliant(tmp_path, source_dir):
    def build(stack):
        TrainingPipeline(stack, "Bert", framework=Framework.pytorch("1.13.1"),
                         compiler=Compiler.auto(WorkloadProfile(**BERT_PROFILE)),
                         instance_type="ml.g5.48xlarge", source_dir=source_dir,
                         entry_point="train.py")
    assert set(_findings(tmp_path, build)) == {"CompiledTraining-CT9"}


def test_pipelines_without_a_compiler_are_not_applicable(tmp_path, source_dir):
    def build(stack):
        TrainingPipeline(stack, "Xgb", framework=Framework.xgboost("1.7-1"),
                         instance_type="ml.m6i.12xlarge")
    assert _findings(tmp_path, build) == {}


def test_benchmark_verdict_gives_no_compiler_and_a_warning_pointing_to_the_ab_pipeline(source_dir):
    from aws_cdk.assertions import Annotations, Match

    stack = new_stack(env=cdk.Environment(region=REGION))
    profile = WorkloadProfile(**{**BERT_PROFILE, "model_family": "stable-diffusion"})
    pipeline = TrainingPipeline(stack, "Sd", framework=Framework.pytorch("1.13.1"),
                                compiler=Compiler.auto(profile), instance_type="ml.g5.48xlarge",
                                source_dir=source_dir, entry_point="train.py")
    assert not pipeline.compiler.is_enabled
    Annotations.from_stack(stack).has_warning("/Team/Sd", Match.string_like_regexp("CompilerBenchmark"))


@pytest.mark.parametrize(("written", "compliant"), [
    ("true", True), ('"true"', True), (True, True), ("false", False), (False, False)])
def test_ct4_reads_the_launcher_switch_as_sagemaker_does(written, compliant):
    """SageMaker's toolkit reads a hyperparameter JSON-decoded: a boolean or a quoted "true"
    starts pytorchxla as the plain text does (before, only the plain text counted)."""
    from compiled_training.nag.rule_pack import TrainingStep

    (ct4,) = [rule for rule in RULES if rule.id == "CT4"]
    arguments = {**COMPLIANT_STEP, "HyperParameters": {
        **COMPLIANT_STEP["HyperParameters"],
        "sagemaker_pytorch_xla_multi_worker_enabled": written}}
    assert ct4.check(TrainingStep(arguments, {})) is compliant


def test_each_compilers_rules_come_from_its_module():
    """CT1-CT4, CT8 and CT9 are Training Compiler's, CT11-CT13 Neuron's, CT15 torch.compile's:
    each is asked only of a step carrying that compiler (the twin: an eager step)."""
    from compiled_training.compilers import compiler_module
    from compiled_training.nag.rule_pack import TrainingStep

    owners = {rule.id: name for name in ("training-compiler", "torch-compile", "neuron-xla")
              for rule in (*compiler_module(name).step_rules, *compiler_module(name).notices)}
    assert sorted(owners, key=lambda i: int(i[2:])) == [
        "CT1", "CT2", "CT3", "CT4", "CT8", "CT9", "CT11", "CT12", "CT13", "CT15"]
    eager = TrainingStep(EAGER_STEP, {})
    assert all(rule.check(eager) is None for rule in RULES if rule.id in owners)


# --- the pack by property: its ids, and each rule both ways ---------------------------------

def _step(base: dict, changes: dict | None = None, metadata: dict | None = None,
          **flags: bool):
    from compiled_training.nag.step import TrainingStep

    return TrainingStep({**json.loads(json.dumps(base)), **(changes or {})}, metadata or {},
                        **flags)


# Each rule's step that keeps it and step that breaks it (CT9, a notice, is kept by no step of
# Training Compiler: an eager step is where it does not apply).
BOTH_WAYS = {
    "CT1": (_step(COMPLIANT_STEP), _step(COMPLIANT_STEP, {"ResourceConfig": {
        **COMPLIANT_STEP["ResourceConfig"], "InstanceType": "ml.m5.xlarge"}})),
    "CT2": (_step(COMPLIANT_STEP), _step(COMPLIANT_STEP, {"HyperParameters": {
        **COMPLIANT_STEP["HyperParameters"], "sagemaker_mpi_enabled": "true"}})),
    "CT3": (_step(COMPLIANT_STEP), _step(COMPLIANT_STEP, {"DebugHookConfig": {}})),
    "CT4": (_step(COMPLIANT_STEP), _step(COMPLIANT_STEP, {"HyperParameters": {
        "sagemaker_training_compiler_enabled": "true"}})),
    "CT5": (_step(TORCH_COMPILE_STEP, metadata={"workload": BERT_PROFILE}),
            _step(TORCH_COMPILE_STEP, metadata={"workload": {**BERT_PROFILE,
                                                              "hours_per_run": 0.2}})),
    "CT6": (_step(TORCH_COMPILE_STEP, metadata={"workload": BERT_PROFILE}),
            _step(TORCH_COMPILE_STEP, metadata={"workload": {**BERT_PROFILE,
                                                              "static_shapes": False}})),
    "CT7": (_step(TORCH_COMPILE_STEP, metadata={"workload": BERT_PROFILE}),
            _step(TORCH_COMPILE_STEP, metadata={"workload": {**BERT_PROFILE,
                                                              "precision": "fp32"}})),
    "CT8": (_step(COMPLIANT_STEP, metadata={"frameworkName": "pytorch",
                                            "frameworkVersion": "1.13.1"}),
            _step(COMPLIANT_STEP, metadata={"frameworkName": "pytorch",
                                            "frameworkVersion": "2.1.0"})),
    "CT9": (_step(EAGER_STEP), _step(COMPLIANT_STEP)),
    "CT10": (_step(TORCH_COMPILE_STEP), _step(TORCH_COMPILE_STEP, {"AlgorithmSpecification": {
        "TrainingImage": "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"}})),
    "CT11": (_step(NEURON_STEP), _step(NEURON_STEP, {"Environment": {
        "NEURON_CC_FLAGS": "--model-type=transformer"}})),
    "CT12": (_step(NEURON_STEP, {"ResourceConfig": {**NEURON_STEP["ResourceConfig"],
                                                    "InstanceCount": 2}}, precompiled=True),
             _step(NEURON_STEP, {"ResourceConfig": {**NEURON_STEP["ResourceConfig"],
                                                    "InstanceCount": 2}})),
    "CT13": (_step(NEURON_STEP), _step(NEURON_STEP, {"HyperParameters": {
        **NEURON_STEP["HyperParameters"], "global_batch_size": "100"}})),
    "CT14": (_step(EAGER_STEP, {"HyperParameters": {**EAGER_STEP["HyperParameters"],
                                                    "sagemaker_torch_distributed_enabled": "true"}}),
             _step(EAGER_STEP)),
    "CT15": (_step(TORCH_COMPILE_STEP, {"Environment": {
                 **TORCH_COMPILE_STEP["Environment"],
                 "COMPILED_TRAINING_COMPILE_CACHE_URL": "s3://b/p/compile-cache/Train/"}},
                   {"frameworkName": "pytorch"}, scheduled=True),
             _step(TORCH_COMPILE_STEP, metadata={"frameworkName": "pytorch"}, scheduled=True)),
}


def test_the_built_in_rule_ids_are_unique_and_run_from_ct1_without_a_gap():
    ids = [rule.id for rule in RULES if rule.id.startswith("CT")]
    assert ids == [f"CT{n}" for n in range(1, len(ids) + 1)]
    assert all(rule.info and rule.explanation for rule in RULES)


def test_every_rule_has_a_step_that_keeps_it_and_one_that_breaks_it():
    from compiled_training.compilers import all_compilers

    notices = {notice.id for module in all_compilers() for notice in module.notices}
    assert set(BOTH_WAYS) == {rule.id for rule in RULES}
    for rule in RULES:
        keeps, breaks = BOTH_WAYS[rule.id]
        # A notice holds of every step of its compiler, so none keeps it: elsewhere it is mute.
        assert rule.check(keeps) is (None if rule.id in notices else True), rule.id
        assert rule.check(breaks) is False, rule.id
