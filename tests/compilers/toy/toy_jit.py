"""A toy compiler from outside the library: one module, registered by one entry-point line
(``toy-jit = toy_jit:ToyJit`` in ``toy_jit-0.1.dist-info/entry_points.txt``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiled_training.catalog.instances import is_gpu
from compiled_training.compilers import (
    Choice,
    CompileOverhead,
    CompilerModule,
    Finding,
    Job,
    Pick,
    Prior,
    Step,
    StepRule,
    Workload,
)

SWITCH = "TOY_JIT_LEVEL"
FAMILY = "toy-net"
"""The one model family the toy speaks for."""


MAX_LEVEL = 3


def _level_known(step: Step) -> bool:
    return int(step.environment.get(SWITCH, 0)) <= MAX_LEVEL


class ToyJit(CompilerModule):
    name = "toy-jit"
    title = "Toy JIT"
    settings = ("level",)
    priors = {"other": Prior((1.6, 1.9), "the toy's own bench", True)}
    compile_overhead = CompileOverhead((0.5, 1.0), None, "the toy's own bench")
    preference = 5  # asked before the built-in compilers, about its one family
    step_rules = (StepRule("TOY1", "warning", f"Toy JIT runs above level {MAX_LEVEL}.",
                           "Levels above 3 are the toy's experiments.", _level_known),)

    def choose_on_gpu(self, workload: Workload, category: str) -> Pick | None:
        if workload.model_family != FAMILY:
            return None  # no opinion: the built-in compilers decide
        return Pick(True, f"Toy JIT: built for {FAMILY}")

    def switches(self, choice: Choice) -> dict[str, str]:
        return {SWITCH: str(choice.option("level", 1))}

    def describe(self, choice: Choice) -> str:
        return f"Toy JIT (level {choice.option('level', 1)})"

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        if is_gpu(job.instance_type):
            return [], []
        return [("ToyJitInstance", f"Toy JIT compiles for GPUs, got {job.instance_type!r}; "
                                   f"use a GPU instance type")], []

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        return SWITCH in environment
