"""The one place torch_xla is imported.

Only APIs present in torch-xla 1.12/1.13 (the Training Compiler DLCs) and 2.x alike:
``xm.xla_device``, ``xm.mark_step``, ``xm.optimizer_step``, ``xm.save``,
``xm.add_step_closure``, the RNG state and the debug metrics; world size and ordinal moved
to ``torch_xla.runtime`` in 2.x and are bridged below.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType


def available() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def modules() -> tuple[ModuleType, ModuleType]:
    """``(xla_model, metrics)``; raises ImportError without torch_xla."""
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    return xm, met


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
