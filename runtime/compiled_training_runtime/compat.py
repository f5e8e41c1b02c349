"""What differs between the torch and Transformers versions the images carry.

The runtime runs on the Training Compiler DLCs (torch 1.13.1 on Python 3.9; torch 1.11 with
Transformers 4.21.1 on Python 3.8) and on current PyTorch DLCs (torch 2.x); each difference
it meets is bridged here, by what the installed version offers. torch_xla's are in ``xla``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from .env import InputError


def load(path: Path) -> Any:
    """``torch.load`` of a checkpoint this runtime wrote (``weights_only`` came in torch 1.13
    and became True by default in 2.6; a checkpoint holds RNG states and optimizer state)."""
    if "weights_only" in inspect.signature(torch.load).parameters:
        return torch.load(path, map_location="cpu", weights_only=False)
    return torch.load(path, map_location="cpu")


def check_autocast(device: torch.device, dtype: torch.dtype) -> None:
    """Refuses what this torch cannot autocast: fp16 on the CPU came in torch 2.x."""
    try:
        with torch.autocast(device_type=device.type, dtype=dtype):
            pass  # torch 1.x refuses fp16 on the CPU only on entering
    except RuntimeError as unsupported:  # "AutocastCPU only support Bfloat16"
        raise InputError(f"precision {_NAMES[dtype]} is not supported on {device.type} by "
                         f"torch {torch.__version__} ({unsupported}); use bf16 or fp32") from None


def grad_scaler(device: torch.device) -> Any:
    """Loss scaling for fp16: ``torch.amp.GradScaler(device)`` on torch 2.3+, else CUDA's."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device.type)
    if device.type != "cuda":
        raise InputError(f"precision fp16 on {device.type} needs torch 2.3 or newer for loss "
                         f"scaling, got torch {torch.__version__}; use bf16 or fp32")
    return torch.cuda.amp.GradScaler()


def prebuilt_4d_mask() -> bool:
    """Whether to hand the model a prebuilt 4D additive attention mask.

    Transformers 5.x checks ``padding_mask.all()`` on a 2D mask, a host sync that forces an
    XLA execution mid-step; a 4D mask skips it. Transformers 4.x accepts only 2D or 3D masks
    and, with eager attention, builds the 4D one on the device itself, without a sync.
    """
    import transformers

    return int(transformers.__version__.split(".")[0]) >= 5


_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
