"""How SageMaker starts a job's processes: the launcher a job gets when it names none, the
versions each launcher runs on, and the GPUs a job without one leaves idle."""

from __future__ import annotations

import re

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import TORCHRUN_SINCE, launches_torchrun
from compiled_training.catalog.instances import (
    accelerator,
    gpus_left_idle,
    gpus_per_instance,
    is_gpu,
)
from compiled_training.spec.compiler import CompilerKind
from compiled_training.spec.framework import Framework
from compiled_training.spec.job import Distribution, TrainingJob


def default_distribution(
    job_compiler: CompilerKind, framework: Framework, instance_type: str, count: int
) -> Distribution:
    """On Trainium, torchrun (one process per NeuronCore); ``pytorchxla`` when a Training
    Compiler job spans more than one GPU on a version that has it; else none (what the SDK
    runs when no distribution is given)."""
    if trainium(instance_type) or job_compiler is CompilerKind.NEURON_XLA:
        return Distribution.TORCH_DISTRIBUTED
    if job_compiler is CompilerKind.TRAINING_COMPILER and pytorchxla_supported(framework) and (
        count > 1 or gpus_per_instance(instance_type) > 1
    ):
        return Distribution.PYTORCHXLA
    return Distribution.NONE


def pytorchxla_from(framework: Framework) -> tuple[int, int]:
    # The SDK's thresholds: pytorchxla from PyTorch 1.12 (Hugging Face: 1.11).
    return (1, 11) if framework.name == "huggingface" else (1, 12)


def pytorchxla_supported(framework: Framework) -> bool:
    """Whether Training Compiler's ``pytorchxla`` launcher exists for this version."""
    return minor(framework.pytorch_version or "0") >= pytorchxla_from(framework)


def torch_distributed_problem(job: TrainingJob) -> str | None:
    """Why torchrun cannot launch the job (a CPU, a PyTorch before its images had it), or
    None. On Trainium the image is always given, which the SDK checks no version of."""
    framework = job.framework
    if framework.pytorch_version is None or is_token(job.instance_type) or trainium(
            job.instance_type):
        return None
    if not is_gpu(job.instance_type):
        return f"distribution 'torch_distributed' needs a GPU instance, got {job.instance_type!r}"
    if not launches_torchrun(framework.pytorch_version):
        return (f"distribution 'torch_distributed' needs PyTorch {TORCHRUN_SINCE} or newer (the "
                f"first SageMaker training image whose toolkit launches torchrun), got "
                f"{framework.describe()}")
    return None


def idle_gpus_message(job: TrainingJob) -> str | None:
    """Why a deep-learning job without a launcher wastes what it pays for, and the fix; None
    where it uses every GPU (a launcher, one GPU on one instance, a built-in algorithm that
    parallelizes itself, a CPU)."""
    if (job.distribution is not Distribution.NONE or not job.framework.runs_script
            or is_token(job.instance_type) or not is_gpu(job.instance_type)
            or not isinstance(job.instance_count, int)):
        return None
    paid, idle = gpus_left_idle(job.instance_type, job.instance_count)
    if idle == 0 and job.instance_count == 1:
        return None
    launcher = ("Distribution.PYTORCHXLA (Training Compiler's launcher, one process per GPU)"
                if job.compiler.is_training_compiler and pytorchxla_supported(job.framework)
                else "Distribution.TORCH_DISTRIBUTED (torchrun, one process per GPU; the "
                     "script joins the process group: docs/guides/runtime.md, the launch "
                     "contract)")
    waste = [f"{idle} of the {paid} GPUs paid for ({job.instance_count} x "
             f"{job.instance_type}) stay idle"] if idle else []
    if job.instance_count > 1:
        waste.append(f"the {job.instance_count} instances train {job.instance_count} separate "
                     f"models that never exchange gradients")
    return (f"distribution is none, so SageMaker starts one process per instance, on one "
            f"GPU: {' and '.join(waste)}; use {launcher}, or acknowledge this warning where "
            f"the script itself uses every GPU of its instance")


def trainium(instance_type: str) -> bool:
    return not is_token(instance_type) and accelerator(instance_type) == "trainium"


def minor(version: str) -> tuple[int, int]:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
    return parts[0], parts[1]


def major(version: str) -> int:
    return minor(version)[0]
