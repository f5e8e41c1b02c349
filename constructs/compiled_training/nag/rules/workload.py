"""What the workload rules share: the workload a step's pipeline recorded, where a compiler
they judge compiles the step."""

from __future__ import annotations

from collections.abc import Callable

from compiled_training.advice.advisor import WorkloadProfile
from compiled_training.nag.step import TrainingStep


def on_workload(test: Callable[[WorkloadProfile], bool]) -> Callable[[TrainingStep], bool | None]:
    """``test`` of the recorded workload; None where there is none or no such compiler."""
    def check(step: TrainingStep) -> bool | None:
        workload = step.workload
        if not step.judged_by_workload_rules or workload is None:
            return None
        return test(workload)

    return check
