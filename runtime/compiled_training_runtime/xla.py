"""The one place torch_xla is imported.

Only APIs present in torch-xla 1.12/1.13 (the Training Compiler DLCs) and 2.x alike:
``xm.xla_device``, ``xm.mark_step``, ``xm.optimizer_step``, ``xm.save``, ``xm.master_print``,
``xm.add_step_closure``, and the debug metrics.
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
