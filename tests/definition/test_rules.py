"""Each rule a job is held to, on a plain job, as cdk-nag's own rules are tested: the job that
breaks it gets the rule's id and message, and the same job without the break gets nothing from
that rule. The job rules are `definition.rules.JOB_RULES`; a compiler's are its module's
`checks`. The constructs' tests still synthesize a few of these end to end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from compiled_training import Compiler, Distribution, Framework, InputChannel
from compiled_training.definition import rules, validation
from compiled_training.values.job import TrainingJob

GPU = "ml.g5.2xlarge"


@pytest.fixture
def job(tmp_path: Path) -> TrainingJob:
    """An eager PyTorch job that breaks no rule."""
    (tmp_path / "train.py").write_text("import os\nprint(os.environ['SM_MODEL_DIR'])\n")
    return TrainingJob(
        pipeline_name="team", framework=Framework.pytorch("2.9.0"), compiler=Compiler.none(),
        distribution=Distribution.NONE, instance_type=GPU, instance_count=1,
        volume_size_gib=30, max_runtime_seconds=3600, image_uri="",
        role_arn="arn:aws:iam::111122223333:role/r", region="eu-west-1",
        output_s3_uri="s3://team-data/team/output", entry_point="train.py",
        source_s3_uri="s3://team-data/code/sourcedir.tar.gz", source_dir=tmp_path,
        channels=[InputChannel("train", "s3://team-data/train/")])


TC = {"compiler": Compiler.training_compiler(), "framework": Framework.pytorch("1.13.1")}
NEURON = {"compiler": Compiler.neuron_xla(), "instance_type": "ml.trn1.32xlarge",
          "distribution": Distribution.TORCH_DISTRIBUTED}
NATIVE = {"compiler": Compiler.torch_compile(), "instance_type": "ml.trn2.48xlarge",
          "distribution": Distribution.TORCH_DISTRIBUTED}

# A job each compiler's checks pass, by compiler name.
COMPLIANT = {"training-compiler": TC, "neuron-xla": NEURON, "none": {},
             "torch-compile": {"compiler": Compiler.torch_compile()}}

# rule, the change that breaks it, the id and a part of the message; the same change less the
# break is the twin (`_compliant`).
JOB_CASES = [
    (rules.pipeline_name, {"pipeline_name": "team pipeline"}, "PipelineName", "pipeline_name"),
    (rules.instance_type, {"instance_type": "ml.g5.huge"}, "InstanceType", "ml.g5.huge"),
    (rules.counts, {"instance_count": 0}, "InstanceCount", "at least 1, got 0"),
    (rules.counts, {"max_attempts": 21}, "MaxAttempts", "at most 20, got 21"),
    (rules.spot_wait, {"spot": True, "max_wait_seconds": 60}, "SpotWait", "max_wait (60 s)"),
    (rules.vpc, {"subnet_ids": ("subnet-1",)}, "Vpc", "both subnets and security groups"),
    (rules.reserved_hyperparameters, {"hyperparameters": {"sagemaker_program": "x.py"}},
     "ReservedHyperparameter", "'sagemaker_program' is reserved"),
    (rules.channels, {"channels": [InputChannel("train", "s3://team-data/a/"),
                                   InputChannel("train", "s3://team-data/c/")]},
     "ChannelNames", "got 'train' twice"),
    (rules.channels, {"channels": [InputChannel("train", "https://team-data/a/")]}, "ChannelUri",
     "is not an S3 URI"),
    (rules.channels, {"channels": [InputChannel("train", "s3://team-data/train")]}, "ChannelPrefix",
     "ends without '/'"),
    (rules.metric_definitions, {"metric_definitions": [{"Name": "f1", "Regex": "f1=[0-9.]+"}]},
     "MetricDefinitions", "has 0 groups"),
    (rules.framework, {"entry_point": None}, "EntryPoint", "needs an entry_point script"),
    (rules.framework, {"framework": Framework.xgboost("1.7-1"), "entry_point": None,
                       "compiler": Compiler.torch_compile()}, "NotDeepLearning",
     "not a deep-learning graph"),
    (rules.image, {"framework": Framework.pytorch("2.14"), "instance_type": "ml.trn1.32xlarge"},
     "Image", "PyTorch 2.14 has no Neuron training image"),
    (rules.compiler_rules, {**TC, "instance_type": "ml.m5.xlarge"}, "CompilerInstance",
     "got 'ml.m5.xlarge' (a CPU instance)"),
    (rules.trainium_launch, {**NEURON, "distribution": Distribution.NONE},
     "TrainiumDistribution", "got 'none'"),
    (rules.trainium_launch, {**NEURON, "instance_type": "ml.trn1.2xlarge", "instance_count": 2},
     "TrainiumInstanceCount", "must be 1 on ml.trn1.2xlarge"),
    (rules.launcher, {"distribution": Distribution.PYTORCHXLA}, "XlaWithoutCompiler",
     "runs only with Training Compiler"),
    (rules.launcher, {"distribution": Distribution.SMDISTRIBUTED_DATA_PARALLEL},
     "Smdistributed", "not supported by compiled-training"),
    (rules.launcher, {"distribution": Distribution.TORCH_DISTRIBUTED,
                      "instance_type": "ml.m5.xlarge"}, "TorchDistributed",
     "needs a GPU instance"),
    (rules.idle_gpus, {"instance_type": "ml.g5.12xlarge"}, "IdleGpus", "3 of the 4 GPUs"),
    (rules.compile_cache_cold, {"compiler": Compiler.torch_compile(),
                                "framework": Framework.pytorch("2.3.0"),
                                "torch_compile_cache_s3_uri": "s3://team-data/team/compile-cache/"},
     "CompileCacheCold", "PyTorch 2.3.0 predates"),
    (rules.script, {"spot": True, "max_wait_seconds": 7200}, "SpotWithoutCheckpoints",
     "spot is on"),
]
COMPILER_CASES = [
    ({**TC, "instance_type": "ml.g6.xlarge"}, "CompilerInstance", "never supported"),
    ({**TC, "distribution": Distribution.SMDISTRIBUTED_DATA_PARALLEL}, "CompilerSmdistributed",
     "not compatible with Training Compiler"),
    ({**TC, "framework": Framework.pytorch("2.9.0")}, "CompilerVersion", "2.9.0"),
    ({**TC, "framework": Framework.huggingface("4.17.0", pytorch_version="1.10.2"),
      "distribution": Distribution.PYTORCHXLA}, "CompilerDistribution",
     "needs PyTorch 1.11 or newer"),
    ({**TC, "distribution": Distribution.TORCH_DISTRIBUTED}, "CompilerDistribution",
     "the only distribution Training Compiler supports"),
    ({**TC, "debugger": True}, "DebuggerProfiler", "recompilation overhead"),
    ({**TC, "instance_count": 2}, "NonEfa", "has no EFA"),
    ({"compiler": Compiler.torch_compile(), "framework": Framework.pytorch("1.13.1")},
     "TorchCompileVersion", "needs PyTorch 2.0 or newer"),
    (NATIVE, "Image", "pass your TorchNeuron image"),
    ({**NATIVE, "instance_type": "ml.trn1.32xlarge", "image_uri": "x"}, "TrainiumCompiler",
     "runs on trn2 only"),
    ({**NATIVE, "compiler": Compiler.torch_compile(mode="max-autotune"), "image_uri": "x"},
     "TrainiumCompiler", "means nothing to the neuron backend"),
    ({"compiler": Compiler.neuron_xla()}, "NeuronXlaInstance", "runs on AWS Trainium"),
    ({**NEURON, "instance_type": "${Token[TOKEN.1]}"}, "NeuronXlaInstanceToken",
     "instance_type is a token"),
    ({**NEURON, "network_isolation": True}, "TrainiumNetwork", "off from its compile cache in S3"),
    ({**NEURON, "hyperparameters": {"precision": "fp16"}}, "TrainiumPrecision", "'bf16'"),
    ({"instance_type": "ml.trn1.32xlarge", "distribution": Distribution.TORCH_DISTRIBUTED},
     "TrainiumCompiler", "runs compiled graphs only"),
]


def _ids(findings) -> list[str]:
    return [f.rule for f in findings]


def _compliant(changes: dict, rule_id: str) -> dict:
    """The twin: the breaking change undone where it is the break itself."""
    fixes = {"pipeline_name": "team-pipeline", "instance_type": GPU, "instance_count": 1,
             "max_attempts": 20, "max_wait_seconds": 7200, "subnet_ids": (),
             "hyperparameters": {"precision": "bf16"}, "entry_point": "train.py",
             "metric_definitions": [{"Name": "f1", "Regex": "f1=([0-9.]+)"}],
             "channels": [InputChannel("train", "s3://team-data/train/")], "compiler": Compiler.none(),
             "framework": Framework.pytorch("2.9.0"), "distribution": Distribution.NONE,
             "spot": False}
    return {key: fixes[key] for key in changes if key in fixes}


@pytest.mark.parametrize(("rule", "changes", "rule_id", "said"), JOB_CASES,
                         ids=[f"{c[0].__name__}-{c[2]}" for c in JOB_CASES])
def test_a_job_rule_finds_its_break_and_not_its_twin(job, rule, changes, rule_id, said):
    broken = replace(job, **changes)
    found = [f for f in rule(broken) if f.rule == rule_id]
    assert found and said in found[0].message, _ids(rule(broken))
    assert all(f.warning == (f.rule in rules.WARNING_IDS) for f in rule(broken))
    assert list(rule(replace(broken, **_compliant(changes, rule_id)))) == []


@pytest.mark.parametrize(("changes", "rule_id", "said"), COMPILER_CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(COMPILER_CASES)])
def test_a_compiler_rule_finds_its_break_and_not_its_twin(job, changes, rule_id, said):
    broken = replace(job, **changes)
    errors, warnings = broken.compiler.module.checks(broken)
    messages = [message for rule, message in errors + warnings if rule == rule_id]
    assert {rule for rule, _ in warnings} <= set(broken.compiler.module.warning_ids)
    assert not {rule for rule, _ in errors} & set(broken.compiler.module.warning_ids)
    assert messages and said in messages[0], errors + warnings
    twin = replace(job, **COMPLIANT[broken.compiler.name])
    assert twin.compiler.module is broken.compiler.module
    assert broken.compiler.module.checks(twin) == ([], [])


def test_every_job_rule_is_in_the_table_and_tested():
    public = {name for name, value in vars(rules).items()
              if callable(value) and getattr(value, "__module__", "") == rules.__name__
              and name not in ("check_api_string", "known_instance_type", "open_prefix")
              and not name[0].isupper()}
    assert {rule.__name__ for rule in rules.JOB_RULES} == public
    assert {case[0].__name__ for case in JOB_CASES} == public


def test_the_request_check_leaves_a_prop_a_rule_reported_and_reports_the_rest(job):
    broken = replace(job, instance_type="ml.g5.huge")
    assert [f.rule for f in validation.check(broken).errors] == ["InstanceType"]
    assert [f.prop for f in validation.request(broken, set())] == ["instance_type"]


def test_warnings_and_errors_are_told_apart(job):
    findings = validation.check(replace(job, instance_type="ml.g5.12xlarge", instance_count=0))
    assert [f.rule for f in findings.warnings] == ["IdleGpus"]
    assert "InstanceCount" in [f.rule for f in findings.errors]


def test_the_script_checks_declare_every_warning_they_raise():
    import inspect
    import re

    from compiled_training.definition import script_checks

    raised = set(re.findall(r'found\.append\(\("(\w+)"', inspect.getsource(script_checks)))
    assert raised == set(script_checks.WARNING_IDS)


def test_the_request_is_reported_after_the_prop_rules_and_before_the_others(job):
    broken = replace(job, hyperparameters={"x": "y" * 3000}, entry_point=None)
    assert [f.rule for f in validation.check(broken).errors] == ["Request", "EntryPoint"]
