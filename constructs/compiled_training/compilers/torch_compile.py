"""``torch.compile``: Inductor on a current PyTorch 2.x Deep Learning Container, and on
Trainium the native TorchNeuron backend (``backend="neuron"``, trn2).

TorchNeuron is this compiler keyed on the accelerator, not a compiler of its own: the script
and its switch are the same, and what differs (the backend's variable, the image, the mode and
family rules) follows from the instance type, which every rule here is handed."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from compiled_training.catalog import neuron
from compiled_training.catalog.instances import instance_family
from compiled_training.catalog.training_arguments import (
    TORCH_COMPILE,
    TORCH_COMPILE_MODE,
)
from compiled_training.compilers.base import (
    FIRST_COMPILE_MINUTES,
    Choice,
    CompileOverhead,
    CompilerKind,
    CompilerModule,
    Finding,
    Job,
    Pick,
    Prior,
    Step,
    StepRule,
    TrainiumClaim,
    Workload,
    minor,
    option,
    switched_on,
    trainium,
)
from compiled_training_runtime import contract

# PyTorch 2.0 announcement (pytorch.org, 2022-12): 163 open-source models from Hugging Face
# Transformers, TIMM and TorchBench on an A100, 43 % faster training on average (51 % in AMP,
# 21 % in fp32); per-suite geomeans in AMP approximately 1.5x (HF), 1.3-1.4x (TIMM) and
# 1.2-1.3x (TorchBench). Each range below sits at or below its suite's geomean: models vary.
SOURCE = "PyTorch 2.0 announcement, 2022-12"
PRIORS = {
    "transformer": Prior((1.2, 1.5), f"{SOURCE}: about 1.5x on Hugging Face models", True),
    "vision": Prior((1.1, 1.4), f"{SOURCE}: about 1.3-1.4x on TIMM models", True),
    "other": Prior((1.0, 1.3), f"{SOURCE}: about 1.2-1.3x on the TorchBench mix, the nearest",
                   False),
}
# The warm start (the runtime's `warm_start`, on by default from PyTorch 2.4):
# - this library's compile bench (`make bench-compile`, torch 2.9 on 2 CPU cores, 2026-11-26,
#   benchmarks/RESULTS.md section 4): to the first finished step warm from the job's restored
#   cache, 29.8 % of cold on a 4-layer BERT and 29.5 % on the tiny one; what stays is Dynamo's
#   tracing and loading the kernels;
# - a PyTorch maintainer on a warm recompile with Inductor's on-disk caches: "on the order of
#   30-40 seconds" for an LLM on a GPU (pytorch-labs/gpt-fast issue 43, 2023-12).
# PyTorch's caching recipe (read 2026-11-26) publishes no ratio. Warm: the high end is the
# bench's ratio on the use case's 5 minutes, the low end the maintainer's half minute.
WARM_RATIO = 0.30
# AWS's Trn2 claim: "30-40 % better price performance than the current generation of GPU-based
# EC2 P5e and P5en instances" (Amazon EC2 Trn2 instances page, 2024-12): cost x 1/1.4 at best.
# TorchNeuron has no SageMaker training image in AWS's tables as of Neuron 2.33 (public beta
# since 2026-10-19; `catalog/neuron-training-images.json`), so the row stays unbenchmarkable.
TRN2_CLAIM = TrainiumClaim(
    "ml.trn2.48xlarge", CompilerKind.TORCH_COMPILE, (1 / 1.4, 1.0),
    "AWS's Trn2 claim: 30-40 % better price performance than P5e/P5en", public_image=False,
    families=("trn2",), compared_with=("ml.p5e.48xlarge", "ml.p5en.48xlarge"))


def _warm_start(step: Step) -> bool | None:
    """A scheduled step of the library's own keeps its compile cache (the runtime's warm start
    reads the URL; a script of another's may not, so only its own); not on Trainium."""
    if not (step.scheduled and step.metadata) or trainium(step.instance_type):
        return None
    return bool(step.environment.get(contract.ENV_COMPILE_CACHE_URL))


STEP_RULES = (
    StepRule("CT15", "warning", "A scheduled torch.compile step compiles from nothing every run.",
             "Without its compile cache (compile_cache off, network_isolation, or PyTorch "
             "before 2.4) each scheduled run pays Dynamo, AOTAutograd and Inductor again on the "
             "instances it bills; with it, a run restores what the last one compiled "
             "(docs/guides/warm-starts.md).", _warm_start),
)


class TorchCompile(CompilerModule):
    """torch.compile: its switches, Inductor's warm start on GPUs, TorchNeuron's backend and
    rules on Trainium, and its advice."""

    name = CompilerKind.TORCH_COMPILE
    title = "torch.compile"
    accelerators = frozenset({"nvidia", "trainium"})  # TorchNeuron's backend on trn2
    settings = ("mode",)
    options_as_fields = True
    priors = PRIORS
    compile_overhead = CompileOverhead(
        FIRST_COMPILE_MINUTES, (0.5, round(FIRST_COMPILE_MINUTES[1] * WARM_RATIO, 1)),
        "the library's warm-start bench, 2026-11-26: warm 30 % of cold (torch 2.9, CPU); "
        "a PyTorch maintainer's 30-40 s warm recompile (gpt-fast issue 43, 2023-12)",
        warm_since=contract.COMPILE_CACHE_SINCE, expires=True)
    trainium_claims = (TRN2_CLAIM,)
    preference = 20
    step_rules = STEP_RULES
    config_keys = MappingProxyType({"torch_compile_mode": "mode"})
    fp32_reason = ("fp32 only: torch.compile works without mixed precision but gains less "
                   "(PyTorch 2.0: 21 % in fp32, 51 % in AMP on average)")

    def choose_on_gpu(self, workload: Workload, category: str) -> Pick:
        version = workload.framework_version
        if version is None:
            return Pick(True, "torch.compile: framework_version not given, so PyTorch 2.x is "
                              "assumed")
        if minor(version)[0] >= 2:
            return Pick(True, f"torch.compile: PyTorch {version} has it")
        return Pick(False, "torch.compile needs PyTorch 2.0 or later: upgrade the job")

    def dynamic_shapes_reason(self, fix: str) -> str:
        return ("dynamic shapes: torch.compile handles them (automatic dynamic shapes, "
                "dynamic=True) at a cost, a recompile per new shape and less specialised "
                f"kernels; fixing them first ({fix}) recovers the static gain")

    def notes(self, workload: Workload, category: str, enabled: bool, skipped: bool) -> list[str]:
        if not enabled:
            return []
        return ["enable Compiler.torch_compile() and keep the batch size (no published memory "
                "saving to grow it on)"]

    def fields(self, **given: Any) -> dict[str, Any]:
        fields = super().fields(**given)
        mode = option(given, "mode", "default", str)
        if mode not in contract.TORCH_COMPILE_MODES:
            raise ValueError(contract.not_one_of("Compiler.torch_compile mode", mode,
                                                 contract.TORCH_COMPILE_MODES))
        return {**fields, "mode": mode}

    def switches(self, choice: Choice) -> dict[str, str]:
        return {contract.ENV_TORCH_COMPILE: "true",
                contract.ENV_TORCH_COMPILE_MODE: str(choice.mode)}

    def environment(self, job: Job) -> dict[str, str]:
        environment = self.switches(job.compiler)
        if trainium(job.instance_type):
            environment[contract.ENV_TORCH_COMPILE_BACKEND] = contract.TORCH_COMPILE_NEURON_BACKEND
        return environment

    def describe(self, choice: Choice) -> str:
        return f"torch.compile (mode={choice.mode})"

    def trainer_arguments(self, choice: Choice) -> dict[str, bool | str]:
        return {TORCH_COMPILE: True, TORCH_COMPILE_MODE: str(choice.mode)}

    def compiles_with_inductor(self, instance_type: str | None) -> bool:
        return not trainium(instance_type)  # TorchNeuron compiles with neuronx-cc instead

    def image_problem(self, instance_type: str) -> str | None:
        if not trainium(instance_type):
            return None
        return (f"the native TorchNeuron backend has no SageMaker training image to resolve: "
                f"{neuron.native_image_status()}; pass your TorchNeuron image as "
                f"image=TrainingImage.from_ecr_repository(...), or use Compiler.neuron_xla() on "
                f"the PyTorch NeuronX images")

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        return switched_on(contract.ENV_TORCH_COMPILE, hyperparameters, environment)

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        errors: list[Finding] = []
        version = job.framework.pytorch_version
        if version and minor(version)[0] < 2:
            errors.append(("TorchCompileVersion", f"torch.compile needs PyTorch 2.0 or newer, "
                                                  f"got {job.framework.describe()}"))
        if not job.image_uri and (problem := self.image_problem(job.instance_type)):
            errors.append(("Image", problem))
        if not trainium(job.instance_type):
            return errors, []
        family, native = instance_family(job.instance_type), neuron.native_families()
        if family not in native:
            errors.append(("TrainiumCompiler", f"Compiler.torch_compile() on Trainium is the "
                                               f"native TorchNeuron backend, which runs on "
                                               f"{', '.join(native)} only, got "
                                               f"{job.instance_type!r}; on {family} use "
                                               f"Compiler.neuron_xla()"))
        elif job.compiler.mode != "default":
            errors.append(("TrainiumCompiler", f"torch.compile mode {job.compiler.mode!r} tunes "
                                               f"CUDA (CUDA graphs, Triton autotuning) and "
                                               f"means nothing to the neuron backend; use mode "
                                               f"'default' on {job.instance_type}"))
        return errors, []
