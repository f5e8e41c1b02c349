"""The Neuron SDK's PyTorch/XLA path on Trainium (``ml.trn1``, ``ml.trn1n``, ``ml.trn2``):
torchrun with one process per NeuronCore, the ``xla`` process group, and neuronx-cc compiling
each graph."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiled_training.catalog import neuron
from compiled_training.catalog.api_shapes import is_token
from compiled_training.compilers.base import (
    Choice,
    CompilerKind,
    CompilerModule,
    Finding,
    Framework,
    Job,
    switched_on,
    trainium,
)
from compiled_training_runtime import contract

TRAINIUM_EXAMPLE = "ml.trn1.32xlarge"
NEURONX_IMAGE = "pytorch-training-neuronx:"
"""What the URI of AWS's PyTorch NeuronX training images holds (Hugging Face's too)."""


class NeuronXla(CompilerModule):
    name = CompilerKind.NEURON_XLA
    title = "Neuron PyTorch/XLA"
    through_xla = True
    neuron_sdk = True
    dockerfile = "neuron-xla"
    default_instance_type = TRAINIUM_EXAMPLE
    settings = ("model_type", "precompile", "precompile_steps")

    def options(self, **given: Any) -> dict[str, Any]:
        fields = super().options(**given)
        model_type = given.get("model_type", "transformer")
        precompile = given.get("precompile", False)
        steps = given.get("precompile_steps", 10)
        if model_type not in contract.NEURON_MODEL_TYPES:
            raise ValueError(contract.not_one_of("Compiler.neuron_xla model_type", model_type,
                                                 contract.NEURON_MODEL_TYPES))
        if steps < 1:
            raise ValueError(f"Compiler.neuron_xla precompile_steps must be at least 1, got "
                             f"{steps}")
        return {**fields, "model_type": model_type,
                "precompile_steps": steps if precompile else None}

    def switches(self, choice: Choice) -> dict[str, str]:
        return {contract.ENV_NEURON_XLA: "true",
                contract.ENV_NEURON_CC_FLAGS: f"--model-type={choice.model_type}"}

    def environment(self, job: Job) -> dict[str, str]:
        environment = self.switches(job.compiler)
        if job.compile_cache_s3_uri:
            environment[contract.ENV_NEURON_COMPILE_CACHE_URL] = job.compile_cache_s3_uri
        return environment

    def describe(self, choice: Choice) -> str:
        precompile = (f", pre-compiled in {choice.precompile_steps} steps"
                      if choice.precompile_steps else "")
        return f"Neuron PyTorch/XLA (model type {choice.model_type}{precompile})"

    def default_distribution(self, framework: Framework, instance_type: str,
                             count: int) -> str | None:
        return "torch_distributed"

    def runtime_image_problem(self, instance_type: str) -> str | None:
        if trainium(instance_type):
            return None
        return (f"Compiler.neuron_xla() builds on the PyTorch NeuronX image, for AWS Trainium; "
                f"instance_type must be a Trainium type ({TRAINIUM_EXAMPLE}, ...), got "
                f"{instance_type!r}")

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        return (switched_on(contract.ENV_NEURON_XLA, hyperparameters, environment)
                or contract.ENV_NEURON_CC_FLAGS in environment
                or NEURONX_IMAGE in image)  # the Hugging Face images too

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        if is_token(job.instance_type):
            return [], [("NeuronXlaInstanceToken", "instance_type is a token, so "
                         "Compiler.neuron_xla() cannot check that it is Trainium nor set EFA for "
                         "a multi-node job (FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1); give a "
                         "literal ml.trn* type")]
        if not trainium(job.instance_type):
            return [("NeuronXlaInstance", f"Compiler.neuron_xla() runs on AWS Trainium "
                                          f"({', '.join(neuron.NEURON_CORES)}), got "
                                          f"{job.instance_type!r}; on GPUs use "
                                          f"Compiler.torch_compile()")], []
        errors: list[Finding] = []
        if job.network_isolation:
            errors.append(("TrainiumNetwork", "network_isolation cuts the job off from S3, where "
                           "Compiler.neuron_xla() keeps its compile cache "
                           "(NEURON_COMPILE_CACHE_URL): every run would compile everything "
                           "again; turn network_isolation off (a VPC with an S3 gateway endpoint "
                           "keeps the traffic private)"))
        if job.hyperparameters.get("precision") == "fp16":
            errors.append(("TrainiumPrecision", "precision 'fp16' needs a loss scaler, which "
                           "torch-xla 2.9 (the newest Neuron images) no longer has, and "
                           "Trainium computes in bf16 natively (Neuron's training guides "
                           "autocast to bf16, no scaler needed): set hyperparameters"
                           "['precision'] to 'bf16'"))
        return errors, []
