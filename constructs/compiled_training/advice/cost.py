"""The advisor's cost model: the speedup to expect, when compiling pays back, and the money a
run costs and a compiler saves."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from compiled_training.advice.priors import (
    COMPILE_MINUTES,
    FP32_SPEEDUP_CAP,
    MIN_MINUTES_PER_RUN,
    WEEKS_PER_YEAR,
    Prior,
)
from compiled_training.advice.workload import WorkloadProfile
from compiled_training.catalog.compilers import CompilerKind, compiler_name
from compiled_training.catalog.prices import price_per_hour


def speedup(profile: WorkloadProfile, prior: Prior | None) -> tuple[float, float]:
    """The prior, lowered for fp32, and with no gain promised at its low end until dynamic
    shapes are fixed or a data-loading or communication bottleneck is measured."""
    if prior is None:
        return (1.0, 1.0)
    low, high = prior.speedup
    if profile.precision == "fp32":
        low, high = min(low, FP32_SPEEDUP_CAP[0]), min(high, FP32_SPEEDUP_CAP[1])
    if not profile.static_shapes or profile.bottleneck in ("data-loading", "communication"):
        low = 1.0
    return (low, high)


def break_even_minutes(speedup: tuple[float, float]) -> float:
    """From the expected (middle) gain against the worst compile time, and never below the
    half hour under which compilation is not worth its risk."""
    expected_saving = 1 - 2 / sum(speedup)
    if expected_saving <= 0:
        return math.inf
    return max(COMPILE_MINUTES[1] / expected_saving, MIN_MINUTES_PER_RUN)


@dataclass(frozen=True)
class Money:
    reason: str
    per_run: float | None = None
    per_year: float | None = None
    saving: tuple[float, float] | None = None
    at_stake: float = math.inf
    """The most the compiler could save a year; unknown counts as enough (never blocks)."""


def money(profile: WorkloadProfile, compiler: CompilerKind, speedup: tuple[float, float],
           prices: Mapping[str, float] | None) -> Money:
    price = price_per_hour(profile.instance_type, prices)
    if price is None:
        return Money(f"price unknown for {profile.instance_type}: dollars not counted; supply "
                      f"one with prices={{'{profile.instance_type}': USD per hour}} or "
                      "`advise --prices FILE` (or --live-prices)")
    hourly = price * profile.instance_count
    per_run = hourly * profile.hours_per_run
    runs = profile.runs_per_week * WEEKS_PER_YEAR
    compile_cost = hourly * COMPILE_MINUTES[1] / 60
    low, high = (max(0.0, (per_run * (1 - 1 / s) - compile_cost) * runs) for s in speedup)
    reason = f"${per_run:,.0f} a run, ${per_run * runs:,.0f} a year"
    if profile.region != "us-east-1":
        reason += f" (us-east-1 price; {profile.region} may differ)"
    if compiler is not CompilerKind.NONE:
        reason += f"; {compiler_name(compiler)} would save ${low:,.0f}-${high:,.0f} a year"
    return Money(reason, per_run, per_run * runs, (low, high), high)
