"""How SageMaker starts a job's processes: the launcher a job gets when it names none, the
versions each launcher runs on, and the GPUs a job without one leaves idle."""

from __future__ import annotations

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import TORCHRUN_SINCE, launches_torchrun
from compiled_training.catalog.instances import (
    gpus_left_idle,
    is_gpu,
)
from compiled_training.compilers.base import trainium
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.values.job import Distribution, TrainingJob


def default_distribution(
    compiler: Compiler, framework: Framework, instance_type: str, count: int
) -> Distribution:
    """On Trainium, torchrun (one process per NeuronCore); else the compiler's own launcher
    where it needs one (Training Compiler's ``pytorchxla`` on more than one GPU); else none
    (what the SDK runs when no distribution is given)."""
    if trainium(instance_type):
        return Distribution.TORCH_DISTRIBUTED
    own = compiler.module.default_distribution(framework, instance_type, count)
    if own is None:
        return Distribution.NONE
    allowed = [d.value for d in Distribution]
    if own not in allowed:
        raise ValueError(f"compiler {compiler.name!r} names launcher {own!r}, which is not a "
                         f"Distribution ({', '.join(allowed)}); fix its default_distribution")
    return Distribution(own)


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
    launcher = (job.compiler.module.launcher_hint(job.framework)
                or "Distribution.TORCH_DISTRIBUTED (torchrun, one process per GPU; the script "
                   "joins the process group: docs/guides/runtime.md, the launch contract)")
    waste = [f"{idle} of the {paid} GPUs paid for ({job.instance_count} x "
             f"{job.instance_type}) stay idle"] if idle else []
    if job.instance_count > 1:
        waste.append(f"the {job.instance_count} instances train {job.instance_count} separate "
                     f"models that never exchange gradients")
    return (f"distribution is none, so SageMaker starts one process per instance, on one "
            f"GPU: {' and '.join(waste)}; use {launcher}, or acknowledge this warning where "
            f"the script itself uses every GPU of its instance")

