"""The toy compiler's runtime backend, registered beside it (``toy-jit`` in the
``compiled_training_runtime.backends`` group): torch.compile with Dynamo alone (the ``eager``
backend), switched on by the toy's own variable."""

from __future__ import annotations

import os
from collections.abc import Mapping

from compiled_training_runtime.backends import Backend, TorchCompileBackend
from compiled_training_runtime.env import TrainingConfig

SWITCH = "TOY_JIT_LEVEL"


class ToyJitBackend(TorchCompileBackend):
    compiler = "toy-jit"

    def __init__(self, level: int) -> None:
        self.level = level
        super().__init__(backend="eager")

    @classmethod
    def from_config(cls, config: TrainingConfig) -> Backend:
        return cls(int(os.environ.get(SWITCH, "1")))

    @classmethod
    def switched_on(cls, environ: Mapping[str, str]) -> bool:
        return SWITCH in environ

    def compile_cache(self, environ: Mapping[str, str] | None = None) -> None:
        return None  # Dynamo alone: nothing to carry
