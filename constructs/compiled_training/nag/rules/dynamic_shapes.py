"""CT6: a workload whose input shapes change, so that the graph recompiles."""

from __future__ import annotations

from compiled_training.compilers import StepRule
from compiled_training.nag.rules.workload import on_workload

RULE = StepRule(
    "CT6", "warning", "The workload declares dynamic shapes.",
    "Every new input shape recompiles the graph; pad to a fixed length or bucket shapes.",
    on_workload(lambda workload: workload.static_shapes))
