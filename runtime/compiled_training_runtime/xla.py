"""The one place torch_xla is imported.

Only APIs present in torch-xla 1.12/1.13 (the Training Compiler DLCs) and 2.x alike:
``xm.xla_device``, ``xm.xla_device_hw``, ``xm.mark_step``, ``xm.optimizer_step``,
``xm.reduce_gradients``, ``xm.save``, ``xm.add_step_closure``, the RNG state, the debug
metrics, ``MpDeviceLoader`` and the ``torch_xla.amp`` sync-free optimizers. What moved between
versions is bridged below: world size and ordinal (``torch_xla.runtime`` in 2.x), autocast
(a device argument in 2.x) and ``GradScaler`` (gone in 2.9).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import torch


def modules() -> tuple[ModuleType, ModuleType]:
    """``(xla_model, metrics)``; raises ImportError without torch_xla."""
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    return xm, met


def join_process_group() -> None:
    """Under torchrun (WORLD_SIZE > 1), joins the ``xla`` process group as the Neuron SDK's
    PyTorch/XLA training scripts do (``init_method="xla://"``: the ranks come from the XLA
    runtime); a lone process joins none."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        import torch_xla.distributed.xla_backend  # noqa: F401  (registers the backend)

        dist.init_process_group("xla", init_method="xla://")


def metric_count(met: ModuleType, name: str) -> int:
    data = met.metric_data(name)
    return int(data[0]) if data else 0


def world_size(xm: ModuleType) -> int:
    """Replicas in the job: ``torch_xla.runtime`` on 2.x, ``xm.xrt_world_size`` on 1.x."""
    try:
        import torch_xla.runtime as xr
    except ImportError:
        return int(xm.xrt_world_size())
    return int(xr.world_size())


def ordinal(xm: ModuleType) -> int:
    """This replica's index: ``torch_xla.runtime`` on 2.x, ``xm.get_ordinal`` on 1.x."""
    try:
        import torch_xla.runtime as xr
    except ImportError:
        return int(xm.get_ordinal())
    return int(xr.global_ordinal())


def autocast(xm: ModuleType, device: torch.device,
             dtype: torch.dtype) -> contextlib.AbstractContextManager[Any]:
    """Mixed precision on an XLA device, as AWS's Training Compiler guide sets it up."""
    if xm.xla_device_hw(device) == "CPU":
        return contextlib.nullcontext()  # XLA:CPU has no autocast (tests); loss scaling still runs
    from torch_xla import amp

    if "device" in inspect.signature(amp.autocast).parameters:
        return amp.autocast(device, dtype=dtype)  # torch-xla 2.x
    # torch-xla 1.x on XLA:GPU (the Training Compiler images) follows CUDA autocast.
    return torch.cuda.amp.autocast(dtype=dtype)


def grad_scaler() -> Any | None:
    """``torch_xla.amp.GradScaler`` (1.x to 2.8; torch-xla 2.9 removed it), or None."""
    from torch_xla import amp

    scaler = getattr(amp, "GradScaler", None)
    return scaler() if scaler is not None else None


def syncfree_adamw(parameters: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """AdamW that takes the scaler's ``found_inf`` on the device: a skipped step costs no sync."""
    from torch_xla.amp import syncfree

    optimizer: torch.optim.Optimizer = syncfree.AdamW(parameters, lr=lr)
    return optimizer


def device_loader(batches: Iterable[Any], device: torch.device,
                  batches_per_step: int) -> Iterable[Any]:
    """Batches copied to the device by a background thread while the previous step runs."""
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    return MpDeviceLoader(batches, device, batches_per_execution=batches_per_step)
