"""A second toy compiler, registered without a runtime backend: the library knows it, the
runtime cannot train with it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiled_training.compilers import Choice, CompilerModule

SWITCH = "TOY_AOT"


class ToyAot(CompilerModule):
    name = "toy-aot"
    title = "Toy AOT"

    def switches(self, choice: Choice) -> dict[str, str]:
        return {SWITCH: "1"}

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        return SWITCH in environment
