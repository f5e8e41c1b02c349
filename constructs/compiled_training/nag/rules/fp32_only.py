"""CT7: a workload in fp32, where a compiler gains least."""

from __future__ import annotations

from compiled_training.compilers import StepRule
from compiled_training.nag.rules.workload import on_workload

RULE = StepRule(
    "CT7", "warning", "The workload trains in fp32 only.",
    "Most of the compiler's gain comes with fp16 or bf16 mixed precision.",
    on_workload(lambda workload: workload.precision != "fp32"))
