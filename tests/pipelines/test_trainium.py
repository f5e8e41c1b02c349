"""TrainingPipeline on Trainium: both Neuron paths synthesize with the image, launcher, compile
cache and environment AWS documents, and every combination that cannot run is refused
naming the path to use instead.

AWS itself cannot exist here: the images are AWS's published tags (the table the library
ships, each row cited), the requests are checked against botocore's SageMaker model and the
published pipeline schema, and the SDK v2 oracle builds the same job's request offline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk.assertions import Template

from compiled_training import (
    Compiler,
    Distribution,
    Framework,
    InputChannel,
    TrainingImage,
    TrainingPipeline,
)
from compiled_training.catalog import neuron
from compiled_training_runtime import contract
from tests.helpers import definitions, new_stack, validate_envelope, validate_job_arguments

NEURONX = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:"
           "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04")


# The legacy path on one trn1.32xlarge; each test overrides what it is about.
TRN1 = {"pipeline_name": "bert-trn", "framework": Framework.pytorch("2.9.0"),
        "compiler": Compiler.neuron_xla(), "instance_type": "ml.trn1.32xlarge",
        "entry_point": "train.py",
        "channels": [InputChannel("train", "s3://team-data/bert/train/")]}


def _pipeline(stack: cdk.Stack, source_dir: Path, **overrides) -> TrainingPipeline:
    return TrainingPipeline(stack, "Bert", **{**TRN1, "source_dir": source_dir, **overrides})


def _definition(stack: cdk.Stack) -> dict:
    (definition,) = definitions(Template.from_stack(stack).to_json())
    validate_envelope(definition)
    validate_job_arguments(definition)
    return definition


def _execution_statements(stack: cdk.Stack) -> list[dict]:
    roles = Template.from_stack(stack).find_resources("AWS::IAM::Role")
    (role,) = [r for logical_id, r in roles.items() if logical_id.startswith("BertExecutionRole")]
    return role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]


def test_neuron_xla_on_two_trn1_nodes_precompiles_then_trains_with_a_shared_cache(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, instance_count=2, compiler=Compiler.neuron_xla(precompile=True))
    precompile, train = _definition(stack)["Steps"]
    assert [precompile["Name"], train["Name"], train["DependsOn"]] == [
        "Precompile", "Train", ["Precompile"]]
    for step in (precompile, train):
        args = step["Arguments"]
        assert args["AlgorithmSpecification"]["TrainingImage"] == NEURONX
        assert args["ResourceConfig"] == {"VolumeSizeInGB": 30, "InstanceCount": 2,
                                          "InstanceType": "ml.trn1.32xlarge"}
        hyperparameters = args["HyperParameters"]
        # torchrun through the toolkit's TorchDistributedRunner, and the path named in the job.
        assert hyperparameters["sagemaker_torch_distributed_enabled"] == "true"
        assert hyperparameters["sagemaker_instance_type"] == '"ml.trn1.32xlarge"'
        assert not [name for name in hyperparameters if name.startswith("compiled_training")]
        environment = args["Environment"]
        assert environment[contract.ENV_NEURON_XLA] == "true"
        assert environment["NEURON_CC_FLAGS"] == "--model-type=transformer"
        # One cache for the pipeline, not per execution: the next run finds the graphs.
        assert re.fullmatch(r"s3://[^/]+/bert-trn/neuron-compile-cache/",
                            environment["NEURON_COMPILE_CACHE_URL"])
        # Neuron's multi-node guide; the toolkit sets these on trn1.32xlarge only.
        assert environment["FI_PROVIDER"] == "efa"
        assert environment["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert precompile["Arguments"]["Environment"]["RUN_NEURON_PARALLEL_COMPILE"] == "1"
    assert "RUN_NEURON_PARALLEL_COMPILE" not in train["Arguments"]["Environment"]
    assert precompile["Arguments"]["HyperParameters"]["max_steps"] == "10"
    assert "max_steps" not in train["Arguments"]["HyperParameters"]
    # A trial run's weights are never resumed by the real one.
    assert "CheckpointConfig" not in precompile["Arguments"]
    assert "CheckpointConfig" in train["Arguments"]


def test_the_execution_role_reads_and_writes_the_cache_and_deletes_nothing(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir)
    statements = _execution_statements(stack)
    writes = [json.dumps(s["Resource"]) for s in statements if "s3:PutObject" in s["Action"]]
    assert len(writes) == 1 and "/bert-trn/*" in writes[0]  # the cache is under this prefix
    reads = [json.dumps(s["Resource"]) for s in statements if "s3:GetObject" in s["Action"]]
    assert any("/bert-trn/*" in r for r in reads)
    assert not [s for s in statements if "s3:DeleteObject" in s["Action"]]


def test_a_gpu_pipeline_gets_no_neuron_environment(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, framework=Framework.pytorch("2.9.0"),
              compiler=Compiler.torch_compile(), instance_type="ml.g5.48xlarge")
    (step,) = _definition(stack)["Steps"]
    # Only torch.compile's switches and compile cache: no Neuron flag, cache or EFA setting,
    # and the default backend.
    assert set(step["Arguments"]["Environment"]) == {
        contract.ENV_TORCH_COMPILE, contract.ENV_TORCH_COMPILE_MODE,
        contract.ENV_COMPILE_CACHE_URL, contract.ENV_ENTRY_POINT}


def test_torch_compile_on_trn2_is_the_native_neuron_backend_on_the_teams_image(source_dir):
    stack = new_stack()
    repository = ecr.Repository.from_repository_name(stack, "TorchNeuron", "team/torchneuron")
    _pipeline(stack, source_dir, compiler=Compiler.torch_compile(),
              instance_type="ml.trn2.48xlarge",
              image=TrainingImage.from_ecr_repository(repository, "2.33"))
    (step,) = _definition(stack)["Steps"]
    args = step["Arguments"]
    assert args["AlgorithmSpecification"]["TrainingImage"].endswith("/team/torchneuron:2.33")
    hyperparameters = args["HyperParameters"]
    assert hyperparameters["sagemaker_torch_distributed_enabled"] == "true"
    # One node, and no Neuron XLA flags on the native path: the switches alone.
    assert args["Environment"] == {contract.ENV_TORCH_COMPILE: "true",
                                   contract.ENV_TORCH_COMPILE_BACKEND: "neuron",
                                   contract.ENV_TORCH_COMPILE_MODE: "default"}


@pytest.mark.parametrize(("overrides", "message"), [
    ({"compiler": Compiler.training_compiler(), "framework": Framework.pytorch("1.13.1")},
     r"AWS Trainium, which compiles with the Neuron SDK: use Compiler.neuron_xla\(\)"),
    ({"distribution": Distribution.PYTORCHXLA},
     r"Trainium jobs launch through torchrun.*'pytorchxla' is Training Compiler's GPU "
     r"launcher; Compiler.neuron_xla\(\) runs PyTorch/XLA under torchrun"),
    ({"distribution": Distribution.NONE}, r"use Distribution.TORCH_DISTRIBUTED"),
    ({"instance_type": "ml.g5.48xlarge"},
     r"Compiler.neuron_xla\(\) runs on AWS Trainium \(ml.trn1.2xlarge.*got 'ml.g5.48xlarge'; "
     r"on GPUs use Compiler.torch_compile\(\)"),
    ({"compiler": Compiler.torch_compile()},
     r"native TorchNeuron backend, which runs on trn2 only, got 'ml.trn1.32xlarge'; on trn1 "
     r"use Compiler.neuron_xla\(\)"),
    ({"compiler": Compiler.torch_compile(mode="reduce-overhead"),
      "instance_type": "ml.trn2.48xlarge"}, r"mode 'reduce-overhead' tunes CUDA"),
    ({"compiler": Compiler.torch_compile(), "instance_type": "ml.trn2.48xlarge"},
     r"no SageMaker training image to resolve: a public beta since Neuron SDK 2.33 "
     r"\(2026-10-19\) on trn2 and trn3.*no SageMaker repository or tag \(read 2026-11-26\); "
     r"pass your TorchNeuron image as image=TrainingImage.from_ecr_repository"),
    ({"compiler": Compiler.none()}, r"runs compiled graphs only: use Compiler.neuron_xla\(\)"),
    ({"network_isolation": True}, r"network_isolation cuts Compiler.neuron_xla\(\) off from its "
                                  r"compile cache in S3"),
    ({"instance_type": "ml.trn1.2xlarge", "instance_count": 2},
     r"instance_count must be 1 on ml.trn1.2xlarge, which has no EFA.*ml.trn1.32xlarge"),
    ({"framework": Framework.pytorch("2.10.0")},
     r"PyTorch 2.10.0 has no Neuron training image \(pytorch-training-neuronx\); for "
     r"ml.trn1.32xlarge: PyTorch 1.13.1, PyTorch 2.1.2, PyTorch 2.5.1, PyTorch 2.6.0, "
     r"PyTorch 2.7.0, PyTorch 2.8.0, PyTorch 2.9.0"),
    ({"framework": Framework.pytorch("1.11.0"), "instance_type": "ml.trn2.48xlarge"},
     r"PyTorch 1.11.0's Neuron training image \(pytorch-training-neuron, Neuron SDK 2.4.0, "
     r"2022-10-27\) serves trn1 only"),
    ({"framework": Framework.pytorch("2.1.2"), "instance_type": "ml.trn2.48xlarge"},
     r"PyTorch 2.1.2's Neuron training images serve trn1, trn1n, not 'ml.trn2.48xlarge'"),
    ({"framework": Framework.huggingface("4.28.1", pytorch_version="1.13.1")},
     r"Transformers 4.28.1 with PyTorch 1.13.1 has no Neuron training image "
     r"\(huggingface-pytorch-training-neuronx\); for ml.trn1.32xlarge: Transformers 4.36.2 "
     r"with PyTorch 1.13.1, .*Transformers 4.55.4 with PyTorch 2.8.0$"),
    ({"framework": Framework.huggingface("4.55.4", pytorch_version="2.8.0"),
      "instance_type": "ml.trn2.48xlarge"},
     r"Transformers 4.55.4 with PyTorch 2.8.0's Neuron training images serve trn1, not "
     r"'ml.trn2.48xlarge'"),
    ({"hyperparameters": {"precision": "fp16"}},
     r"precision 'fp16' needs a loss scaler, which torch-xla 2.9 lacks; Trainium trains in "
     r"bf16: set hyperparameters\['precision'\] to 'bf16'"),
])
def test_what_cannot_run_on_trainium_is_refused_naming_the_way(source_dir, overrides, message):
    with pytest.raises(ValueError, match=message):
        _pipeline(new_stack(), source_dir, **overrides)


def test_pytorch_1_11_on_trn1_trains_on_the_image_both_sdks_resolve_under_torchrun(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, framework=Framework.pytorch("1.11.0"),
              instance_type="ml.trn1.2xlarge")
    (step,) = _definition(stack)["Steps"]
    arguments = step["Arguments"]
    assert arguments["AlgorithmSpecification"]["TrainingImage"].endswith(
        "/pytorch-training-neuron:1.11.0-neuron-py38-sdk2.4.0-ubuntu20.04")
    assert arguments["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"


def test_hugging_face_jobs_train_on_the_hugging_face_neuronx_images(source_dir):
    # AWS's tables, not the SDK v3's huggingface-neuronx.json, which pairs 4.55.4 with PyTorch
    # 2.7.0 where AWS publishes 2.8.0; the registries per region are the SDK's.
    stack = new_stack()
    _pipeline(stack, source_dir,
              framework=Framework.huggingface("4.55.4", pytorch_version="2.8.0"))
    (train,) = _definition(stack)["Steps"]
    assert train["Arguments"]["AlgorithmSpecification"]["TrainingImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training-neuronx:"
        "2.8.0-transformers4.55.4-neuronx-py310-sdk2.26.0-ubuntu22.04")
    assert train["Arguments"]["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"


def test_neuron_xla_options_are_checked():
    with pytest.raises(ValueError, match=r"model_type must be one of transformer, generic, "
                                         r"got 'cnn'"):
        Compiler.neuron_xla(model_type="cnn")
    with pytest.raises(ValueError, match=r"precompile_steps must be at least 1, got 0"):
        Compiler.neuron_xla(precompile=True, precompile_steps=0)
    assert Compiler.neuron_xla(model_type="generic").environment() == {
        "COMPILED_TRAINING_NEURON_XLA": "true", "NEURON_CC_FLAGS": "--model-type=generic"}


def test_every_trainium_training_type_the_api_knows_has_its_neuron_cores():
    from compiled_training.catalog.instances import training_instance_types

    trainium = {t for t in training_instance_types() if neuron.is_trainium(t)}
    assert trainium == set(neuron.NEURON_CORES)


def test_a_benchmark_on_trainium_is_refused_naming_the_trainium_arm(source_dir):
    from compiled_training import CompilerBenchmark

    with pytest.raises(ValueError, match=re.escape(
            "'ml.trn1.32xlarge' is AWS Trainium, where the baseline arm cannot run eager; "
            "benchmark on the GPU job's instances and put Trainium in an arm of its own: "
            "arms=[BenchmarkArm('trainium', Compiler.neuron_xla(), 'ml.trn1.32xlarge', ...)]")):
        CompilerBenchmark(new_stack(), "Trial", framework=Framework.pytorch("2.9.0"),
                          compiler=Compiler.neuron_xla(), instance_type="ml.trn1.32xlarge",
                          source_dir=source_dir, entry_point="train.py",
                          channels=[InputChannel("train", "s3://team-data/bert/train/"),
                                    InputChannel("validation", "s3://team-data/bert/val/")])


def test_a_team_in_cdk_json_names_the_neuron_path_by_its_compiler_name(source_dir):
    from compiled_training.reference.platform import pipeline_props

    props = pipeline_props("Nlp", {
        "framework": "pytorch", "framework_version": "2.9.0", "compiler": "neuron-xla",
        "instance_type": "ml.trn1.32xlarge", "source_dir": str(source_dir),
        "entry_point": "train.py", "channels": {"train": "s3://team-data/bert/train/"}},
        base_dir=source_dir)
    assert props["compiler"] == Compiler.neuron_xla()
    stack = new_stack()
    TrainingPipeline(stack, "Bert", **props)
    (step,) = _definition(stack)["Steps"]
    assert step["Arguments"]["Environment"][contract.ENV_NEURON_XLA] == "true"


def test_a_token_instance_type_still_launches_torchrun_and_warns(source_dir):
    from aws_cdk.assertions import Annotations, Match

    stack = new_stack()
    instance_type = cdk.CfnParameter(stack, "InstanceType", default="ml.trn1.32xlarge")
    pipeline = _pipeline(stack, source_dir, instance_type=instance_type.value_as_string)
    assert pipeline.distribution is Distribution.TORCH_DISTRIBUTED
    assert pipeline.job.distribution is Distribution.TORCH_DISTRIBUTED
    Annotations.from_stack(stack).has_warning(
        "*", Match.string_like_regexp("instance_type is a token, so Compiler.neuron_xla"))
