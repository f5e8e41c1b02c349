"""CT14: a script on several GPUs with no launcher, so that all but one of each instance's
sit idle."""

from __future__ import annotations

from compiled_training.catalog.instances import gpus_per_instance, is_gpu
from compiled_training.compilers import StepRule
from compiled_training.nag.step import TrainingStep
from compiled_training_runtime import contract

# The switches by which the training toolkit starts a launcher (torchrun, xla_spawn, MPI,
# SageMaker's data-parallel library) instead of one `python script` per instance.
LAUNCHERS = (contract.HP_TORCH_DISTRIBUTED, contract.HP_PYTORCH_XLA_MULTI_WORKER,
             "sagemaker_distributed_dataparallel_enabled", "sagemaker_mpi_enabled")


def _every_gpu_used(step: TrainingStep) -> bool | None:
    runs_script = "sagemaker_program" in step.hyperparameters
    if step.metadata or not runs_script or any(m.sets_own_launcher for m in step.compilers) \
            or not is_gpu(step.instance_type):
        # The library's own pipelines warn at synth, naming the idle count (IdleGpus), and are
        # acknowledged there; a built-in algorithm parallelizes itself; a compiler with its own
        # launcher speaks for it (Training Compiler's CT4).
        return None
    if any(step.flag(launcher) for launcher in LAUNCHERS):
        return True
    return step.instance_count == 1 and gpus_per_instance(step.instance_type) == 1


RULE = StepRule(
    "CT14", "warning",
    "The training step runs its script on more than one GPU without a launcher.",
    "With no distribution SageMaker starts one process per instance, on one GPU: the other GPUs "
    "of each instance sit idle and several instances train separate models. Enable torchrun "
    "(sagemaker_torch_distributed_enabled, the torch_distributed distribution) and have the "
    "script join the process group.", _every_gpu_used)
