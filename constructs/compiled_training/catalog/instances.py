"""SageMaker instance types: families, GPUs, EFA. Pure data, no CDK."""

from __future__ import annotations

import functools

from compiled_training.catalog.api_shapes import api_shape
from compiled_training_runtime import contract

TRAINING_COMPILER_FAMILIES = ("p3", "p3dn", "g4dn", "p4d", "g5")
EFA_INSTANCE_TYPES = (
    "ml.g4dn.8xlarge",
    "ml.g4dn.12xlarge",
    "ml.g5.48xlarge",
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
)
# AMD Radeon GPUs: a "g" family that no CUDA image (nor Training Compiler) runs on.
AMD_GPU_FAMILIES = ("g4ad",)
# GPUs of each size, where more than one (every other size of a GPU family has one). Sources,
# read 2026-11-26: AWS's sagemaker-hyperpod-cli (INSTANCE_RESOURCES in its constants) for g5,
# g6, g6e, p4d, p4de, p5, p5e, p5en, p6-b200 and p6e-gb200; EC2's accelerated-computing
# instance specifications for p2, p3, p3dn, g4dn and p6-b300; the G7 and G7e launch tables
# (June 2026) for g7 and g7e. tests/catalog hold it to every GPU type of botocore's
# TrainingInstanceType, so a new one is counted before it is used.
_MULTI_GPU_SIZES = {
    "p2": {"8xlarge": 8, "16xlarge": 16},
    "p3": {"8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8},
    "p4d": {"24xlarge": 8},
    "p4de": {"24xlarge": 8},
    "p5": {"48xlarge": 8},
    "p5e": {"48xlarge": 8},
    "p5en": {"48xlarge": 8},
    "p6-b200": {"48xlarge": 8},
    "p6-b300": {"48xlarge": 8},
    "p6e-gb200": {"36xlarge": 4},
    "g4dn": {"12xlarge": 4, "metal": 8},
    "g5": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g6": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g6e": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g7": {"8xlarge": 2, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g7e": {"12xlarge": 2, "24xlarge": 4, "48xlarge": 8},
}


def instance_family(instance_type: str) -> str:
    parts = instance_type.split(".")
    return parts[1] if len(parts) == 3 else ""


def gpus_per_instance(instance_type: str) -> int:
    """GPUs of an NVIDIA GPU instance type (1 for the single-GPU sizes)."""
    family, _, size = instance_type.partition(".")[2].partition(".")
    return _MULTI_GPU_SIZES.get(family, {}).get(size, 1)


def gpus_left_idle(instance_type: str, instance_count: int) -> tuple[int, int]:
    """(GPUs paid for, GPUs left idle) when SageMaker starts one process per instance, as it
    does for a job without a launcher."""
    paid = instance_count * gpus_per_instance(instance_type)
    return paid, paid - instance_count


def accelerator(instance_type: str) -> str:
    """``nvidia``, ``amd``, ``trainium``, ``inferentia`` or ``cpu``: read from the family the
    way the SageMaker SDK picks an image's processor (``g*`` and ``p*`` are GPUs), AMD apart."""
    family = instance_family(instance_type)
    if family in AMD_GPU_FAMILIES:
        return "amd"
    if family.startswith("trn"):
        return "trainium"
    if family.startswith("inf"):
        return "inferentia"
    return "nvidia" if family[:1] in ("g", "p") else "cpu"


def is_gpu(instance_type: str) -> bool:
    """An NVIDIA GPU instance, what CUDA images and compilers run on."""
    return accelerator(instance_type) == "nvidia"


@functools.cache
def training_instance_types() -> tuple[str, ...]:
    """The instance types CreateTrainingJob accepts (botocore's ``TrainingInstanceType``)."""
    return tuple(api_shape("TrainingInstanceType").enum)


def instance_type_problem(instance_type: str) -> str | None:
    """Why CreateTrainingJob would refuse an instance type (with the nearest it accepts), or
    None."""
    if instance_type in training_instance_types():
        return None
    family = instance_family(instance_type)
    families = {instance_family(t) for t in training_instance_types()}
    if "local" in instance_type:
        hint = " (local mode does not exist in a pipeline)"
    elif family not in families and accelerator(instance_type) == "inferentia":
        # Spelt right, and near a GPU's name (ml.inf2.xlarge, ml.p2.xlarge): no typo to fix.
        hint = f" ({family} is Inferentia, which serves models: train on a GPU or Trainium)"
    else:
        hint = contract.did_you_mean(instance_type, training_instance_types()) or (
            f" (SageMaker has no training type in the {family} family)" if family else "")
    return (f"instance_type must be a SageMaker training instance type such as "
            f"'ml.g5.48xlarge', got {instance_type!r}{hint}")
