"""The Neuron SDK's PyTorch/XLA path on Trainium (``ml.trn1``, ``ml.trn1n``, ``ml.trn2``):
torchrun with one process per NeuronCore, the ``xla`` process group, and neuronx-cc compiling
each graph."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from compiled_training.catalog import neuron
from compiled_training.catalog.api_shapes import is_token
from compiled_training.compilers.base import (
    Choice,
    CompileOverhead,
    CompilerKind,
    CompilerModule,
    Finding,
    Framework,
    Job,
    Pick,
    Step,
    StepRule,
    TrainiumClaim,
    Workload,
    option,
    switched_on,
    trainium,
)
from compiled_training_runtime import contract

TRAINIUM_EXAMPLE = "ml.trn1.32xlarge"
NEURONX_IMAGE = "pytorch-training-neuronx:"
"""What the URI of AWS's PyTorch NeuronX training images holds (Hugging Face's too)."""


# Neuron's compiler (neuronx-cc), far longer than a GPU compiler's: AWS's BERT-Large
# pretraining tutorial on trn1.32xlarge, "it takes ~13 minutes to compile the BERT-Large model
# training step using the pre-compilation script (compare to ~40 minute if not using the
# pre-compilation script)" (aws-neuron-sdk frameworks/torch/torch-neuronx/tutorials/training/
# bert.rst at v2.25.0, 2025-07-31; the text since 2022-10; read 2026-11-26). A later run "will
# detect the cached graphs in the persistent cache (on-disk) and reload the compiled graphs for
# execution, avoiding any recompilation time" (the same tutorial): the library keeps that cache
# in S3 (NEURON_COMPILE_CACHE_URL). AWS publishes no time for the reload; the warm range is
# this library's assumption, up to the GPU compilers' first-compile bound.
NEURON_FIRST_COMPILE_MINUTES = (13.0, 40.0)
NEURON_WARM_COMPILE_MINUTES = (1.0, 5.0)
# AWS's Trn1 claim: "up to 50 % cost-to-train savings over comparable Amazon EC2 instances"
# (Amazon EC2 Trn1 instances page, since general availability in 2022-10); the comparable GPU
# is P4d: "you should expect between 1.4-5X higher throughput on Trn1 as compared to the latest
# GPUs instances (P4d)" (Neuron's training FAQ, about-neuron/faq/training/neuron-training.rst,
# 2026-07-23, read 2026-11-26).
TRN1_CLAIM = TrainiumClaim(
    TRAINIUM_EXAMPLE, CompilerKind.NEURON_XLA, (0.5, 1.0),
    "AWS's Trn1 claim: up to 50 % lower cost to train than comparable EC2 instances",
    public_image=True, families=("trn1", "trn1n"), compared_with=("ml.p4d.24xlarge",))


# --- its rule-pack rules: a step training on Trainium through the Neuron SDK ------------

def _on_trainium(rule: Callable[[Step], bool | None]) -> Callable[[Step], bool | None]:
    """Only where it trains on Trainium: elsewhere its switch compiles nothing."""
    return lambda step: rule(step) if trainium(step.instance_type) else None


def _compile_cache(step: Step) -> bool:
    return bool(step.environment.get(contract.ENV_NEURON_COMPILE_CACHE_URL))


def _multi_node_precompiled(step: Step) -> bool | None:
    if step.precompiles or step.instance_count < 2:
        return None
    return step.precompiled


def _batch_divides(step: Step) -> bool | None:
    """NeuronX Distributed's convention: ``global_batch_size`` over the data-parallel
    replicas (the NeuronCores over tensor x pipeline parallelism) times ``micro_batch_size``."""
    cores = neuron.NEURON_CORES.get(step.instance_type)
    hyperparameters = step.hyperparameters
    try:
        global_batch = int(hyperparameters["global_batch_size"])
        micro = int(hyperparameters.get("micro_batch_size", 1))
        model_parallel = (int(hyperparameters.get("tensor_parallel_size", 1))
                          * int(hyperparameters.get("pipeline_parallel_size", 1)))
    except (KeyError, TypeError, ValueError):
        return None  # not given, or a pipeline parameter read at run time
    if cores is None or micro < 1 or model_parallel < 1:
        return None
    replicas = max(1, cores * step.instance_count // model_parallel)
    return global_batch % (replicas * micro) == 0


STEP_RULES = (
    StepRule("CT11", "warning",
             "A Neuron PyTorch/XLA training step has no persistent compile cache.",
             "neuronx-cc compiles every graph, often for tens of minutes; without "
             "NEURON_COMPILE_CACHE_URL (an S3 prefix the role may read and write) every run "
             "compiles again on the Trainium instances it pays for.",
             _on_trainium(_compile_cache)),
    StepRule("CT12", "warning",
             "A multi-node Neuron PyTorch/XLA training step runs without a pre-compilation "
             "step.",
             "Each node compiles the graphs on its own, on the instances it pays for; a step "
             "before it with RUN_NEURON_PARALLEL_COMPILE=1 (Compiler.neuron_xla(precompile="
             "True)) compiles them in parallel into the shared cache first.",
             _on_trainium(_multi_node_precompiled)),
    StepRule("CT13", "warning",
             "The global batch does not divide over the data-parallel replicas.",
             "global_batch_size must be a multiple of micro_batch_size x the data-parallel "
             "replicas: the NeuronCores (32 on trn1.32xlarge and trn1n.32xlarge, 64 on "
             "trn2.48xlarge, 2 on trn1.2xlarge) x the instances, over tensor_parallel_size x "
             "pipeline_parallel_size; otherwise the job fails or trains on another batch.",
             _on_trainium(_batch_divides)),
)


class NeuronXla(CompilerModule):
    """The Neuron SDK's PyTorch/XLA path: its switches and flags, its S3 compile cache, its
    checks on Trainium, and what the advisor says of a job already on Trainium."""

    name = CompilerKind.NEURON_XLA
    title = "Neuron PyTorch/XLA"
    through_xla = True
    dockerfile = "neuron-xla"
    accelerators = frozenset({"trainium"})
    default_instance_type = TRAINIUM_EXAMPLE
    settings = ("model_type", "precompile", "precompile_steps")
    options_as_fields = True
    compile_overhead = CompileOverhead(
        NEURON_FIRST_COMPILE_MINUTES, NEURON_WARM_COMPILE_MINUTES,
        "AWS's BERT-Large tutorial on trn1: ~13 min with neuron_parallel_compile, ~40 without; "
        "a cached reload assumed 1-5 min, AWS publishing no time")
    trainium_claims = (TRN1_CLAIM,)
    trains_on_trainium = True
    warning_ids = ("NeuronXlaInstanceToken",)
    step_rules = STEP_RULES
    config_keys = MappingProxyType({"precompile": "precompile"})

    def choose_on_trainium(self, workload: Workload, family: str, image: str) -> Pick:
        native = neuron.native_families()
        if family in native:
            # "Starting with Neuron Release 2.30.0, PyTorch/XLA is no longer supported for
            # training workloads" (the catalog's no-xla-training-support source, 2026-11-26).
            return Pick(True, f"Neuron PyTorch/XLA (Compiler.neuron_xla()): {image}; the native "
                              f"path (Compiler.torch_compile(), torch.compile(backend='neuron')) "
                              f"is {neuron.native_image_status()}: with your own image it is "
                              f"the way forward, as AWS supports PyTorch/XLA for training no "
                              f"longer from Neuron 2.30")
        return Pick(True, f"Neuron PyTorch/XLA (Compiler.neuron_xla()), the one path on "
                          f"{family}: {image} (the native TorchNeuron backend runs on "
                          f"{', '.join(native)} only)")

    def fields(self, **given: Any) -> dict[str, Any]:
        fields = super().fields(**given)
        model_type = option(given, "model_type", "transformer", str)
        precompile = option(given, "precompile", False, bool)
        steps = option(given, "precompile_steps", 10, int)
        if model_type not in contract.NEURON_MODEL_TYPES:
            raise ValueError(contract.not_one_of("Compiler.neuron_xla model_type", model_type,
                                                 contract.NEURON_MODEL_TYPES))
        if steps < 1:
            raise ValueError(f"Compiler.neuron_xla precompile_steps must be at least 1, got "
                             f"{steps}")
        return {**fields, "model_type": model_type,
                "precompile_steps": steps if precompile else None}

    def precompile_step_count(self, choice: Choice) -> int | None:
        return choice.precompile_steps

    def workload_rules_apply(self) -> bool:
        return False  # its rules are CT11-CT13, and the advisor's Trainium claims

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
            errors.append(("TrainiumNetwork", "network_isolation cuts Compiler.neuron_xla() off "
                           "from its compile cache in S3, so every run compiles everything; turn "
                           "it off (docs/guides/trainium.md)"))
        if job.hyperparameters.get("precision") == "fp16":
            errors.append(("TrainiumPrecision", "precision 'fp16' needs a loss scaler, which "
                           "torch-xla 2.9 lacks; Trainium trains in bf16: set hyperparameters"
                           "['precision'] to 'bf16' (docs/guides/trainium.md)"))
        return errors, []
