"""What the advisor answers for a workload (`Assessment`: the verdict, a reason per `Factor`, the
options costed and the decision)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from compiled_training.advice.workload import Verdict, WorkloadProfile
from compiled_training.compilers.base import value_of


class Factor(str, Enum):
    """What the advisor judges, in the order it reports them; each is its plain name, so
    ``reasons["model"]`` reads as ``reasons[Factor.MODEL]``."""

    FRAMEWORK = "framework"
    INSTANCE = "instance"
    COMPILER = "compiler"
    MODEL = "model"
    PRECISION = "precision"
    SHAPES = "shapes"
    BOTTLENECK = "bottleneck"
    DURATION = "duration"
    MONEY = "money"

    def __str__(self) -> str:
        return self.value


FACTORS = tuple(Factor)


class Judged(NamedTuple):
    """A factor's judgement: the best verdict it allows, and why."""

    verdict: Verdict
    reason: str


@dataclass(frozen=True)
class Option:
    """One way to run the workload, an instance type and a compiler, and what a run costs
    there in USD (best, worst), with where the figure comes from."""

    instance_type: str
    compiler: str
    dollars_per_run: tuple[float, float]
    basis: str
    claimed: bool = False
    """Derived from a vendor's claim (``basis`` names it), not from a price of its own."""

    @property
    def expected(self) -> float:
        return sum(self.dollars_per_run) / 2

    @property
    def name(self) -> str:
        return f"{self.instance_type} {value_of(self.compiler)}"

    def describe(self) -> str:
        """``ml.g5.12xlarge torch-compile $21``; a claim's figure says so, and whose."""
        if self.claimed:
            return f"{self.name} ~${self.expected:,.0f} (from {self.basis}; not a price)"
        return f"{self.name} ${self.expected:,.0f}"


ABOUT_THE_SAME = 0.05
"""Expected costs a run within 5 % of the lowest are about the same: the priors and claims they
come from span far more than that."""


def lowest(options: tuple[Option, ...]) -> tuple[Option, ...]:
    """The options whose expected cost a run is within `ABOUT_THE_SAME` of the lowest, lowest
    first: one where it is the lowest, more where they are about the same."""
    ranked = sorted(options, key=lambda option: option.expected)
    floor = ranked[0].expected
    return tuple(o for o in ranked if o.expected <= floor * (1 + ABOUT_THE_SAME))


def comparison(options: tuple[Option, ...]) -> str:
    """Which option costs least a run, said only where it does."""
    near = lowest(options)
    if len(near) == 1:
        return f"{near[0].name}'s is the lowest" + (
            ", by AWS's claim alone" if near[0].claimed else "")
    return (f"{', '.join(o.name for o in near)} are about the same (within "
            f"{ABOUT_THE_SAME * 100:.0f} %)")


@dataclass(frozen=True)
class Decision:
    """The verdict with the accelerator and the compiler it is for:
    ``BENCHMARK on ml.trn1.32xlarge with neuron-xla`` (the CLI's compiler names)."""

    verdict: Verdict
    instance_type: str
    compiler: str
    reason: str
    """Why this accelerator: the options' expected costs, or why Trainium was not costed."""

    def __str__(self) -> str:
        return (f"{self.verdict.value} on {self.instance_type} with "
                f"{value_of(self.compiler)}")


@dataclass(frozen=True)
class Assessment:
    """The compiler, the verdict, a reason per factor, and the numbers behind it."""

    profile: WorkloadProfile
    compiler: str
    verdict: Verdict
    reasons: dict[Factor, str]
    limits: dict[Factor, Verdict]
    """The best verdict each factor allows; ``verdict`` is the lowest of them."""
    speedup: tuple[float, float]
    """Throughput with the compiler over without, at the same batch size (low, high)."""
    compile_minutes: tuple[float, float]
    """A typical run's compile time: a warm run's where the graphs persist between runs."""
    break_even_minutes: float
    dollars_per_run: float | None
    """None when the instance type has no known price."""
    dollars_per_year: float | None
    saving_per_year: tuple[float, float] | None
    recommended_batch_size: int | None = None
    recommended_learning_rate: float | None = None
    notes: list[str] = field(default_factory=list)
    options: tuple[Option, ...] = ()
    """The run costed on the job's GPU (eager, with the compiler) and on Trainium; empty when
    the price is unknown."""
    decision: Decision | None = None
    """The verdict, the accelerator and the compiler; ``verdict`` and ``compiler`` are for the
    job's own instance type."""

    @property
    def deciding_factor(self) -> Factor:
        """The factor that set the verdict; for ENABLE, the model's published gains."""
        if self.verdict is Verdict.ENABLE:
            return Factor.MODEL
        return next(f for f in FACTORS if self.limits[f] is self.verdict)
