"""SageMaker instance types: families, GPUs, EFA. Pure data, no CDK."""

from __future__ import annotations

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
# GPUs per instance for the Training Compiler families (EC2 accelerated-computing specs):
# a job with more than one GPU gets the pytorchxla launcher unless told otherwise.
_MULTI_GPU_SIZES = {
    "p3": {"8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8},
    "p4d": {"24xlarge": 8},
    "g4dn": {"12xlarge": 4, "metal": 8},
    "g5": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
}


def instance_family(instance_type: str) -> str:
    parts = instance_type.split(".")
    return parts[1] if len(parts) == 3 else ""


def gpus_per_instance(instance_type: str) -> int:
    """GPUs of a Training Compiler instance type (1 for the single-GPU sizes)."""
    family, _, size = instance_type.partition(".")[2].partition(".")
    return _MULTI_GPU_SIZES.get(family, {}).get(size, 1)


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
