"""CT5: runs too short to earn back what the compiler costs each run."""

from __future__ import annotations

from compiled_training.advice.advisor import Verdict, WorkloadProfile, assess_workload
from compiled_training.advice.assessment import Factor
from compiled_training.compilers import StepRule
from compiled_training.nag.rules.workload import on_workload


def _pays_back(workload: WorkloadProfile) -> bool:
    return assess_workload(workload).limits[Factor.DURATION] is not Verdict.SKIP


RULE = StepRule(
    "CT5", "warning", "The workload's runs are shorter than the compiler's break-even.",
    "Compilation costs 2-5 minutes a run (torch.compile's warm start: under a third of that "
    "after the first run); shorter jobs lose more to it than they save.", on_workload(_pays_back))
