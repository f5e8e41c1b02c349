"""The advisor's cost model: the speedup to expect, when compiling pays back, and the money a
run costs and a compiler saves."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from compiled_training.advice.priors import (
    CACHE_EXPIRY_DAYS,
    FP32_SPEEDUP_CAP,
    MIN_RUN_OVER_COMPILE,
    WEEKS_PER_YEAR,
)
from compiled_training.advice.workload import WorkloadProfile
from compiled_training.catalog.prices import price_per_hour
from compiled_training.compilers import Prior, compiler_module


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


@dataclass(frozen=True)
class CompileMinutes:
    """What a run of the workload compiles, in minutes (low, high)."""

    per_run: tuple[float, float]
    """A typical run's: a warm run's where the graphs persist between its runs."""
    first: tuple[float, float]
    warm: bool
    source: str

    def describe(self) -> str:
        low, high = self.per_run
        if self.warm:
            return (f"warm-start overhead ({low:g}-{high:g} min after the first run's "
                    f"{self.first[0]:g}-{self.first[1]:g}; {self.source})")
        return f"compile overhead ({low:g}-{high:g} min a run: {self.source})"


def compile_minutes(profile: WorkloadProfile, compiler: str) -> CompileMinutes:
    """The compiler's overhead for this workload: warm where its graphs persist between runs
    (torch.compile from PyTorch 2.4, the cache on by default) and a run comes at least once
    in the cache's lifetime; a first run's otherwise."""
    module = compiler_module(compiler)
    overhead = module.compile_overhead
    if overhead is None:
        return CompileMinutes((0.0, 0.0), (0.0, 0.0), False, "no compiler")
    version = profile.framework_version
    # The version is PyTorch's for a pytorch workload (a Hugging Face one's is Transformers').
    since = overhead.warm_since
    cached = (since is None or profile.framework != "pytorch"
              or version is None or minor(version) >= minor(since))
    if overhead.warm is None:
        cold_because = overhead.source
    elif not cached:
        cold_because = f"PyTorch {version} predates the compile caches carried ({since} and later)"
    elif overhead.expires and profile.runs_per_week * CACHE_EXPIRY_DAYS / 7 < 1:
        cold_because = f"runs further apart than the {CACHE_EXPIRY_DAYS} days a cache is kept"
    else:
        return CompileMinutes(overhead.warm, overhead.first, True, overhead.source)
    return CompileMinutes(overhead.first, overhead.first, False, cold_because)


def minor(version: str) -> tuple[int, ...]:
    """``2.21.0`` as ``(2, 21)``: what the priors and AWS's support windows compare."""
    return tuple(int(part) for part in version.split(".")[:2])


def break_even_minutes(speedup: tuple[float, float], compile: CompileMinutes) -> float:
    """From the expected (middle) gain against the worst compile time, and never below six
    times that compile time (the half hour under which a 5-minute compile is not worth its
    risk)."""
    expected_saving = 1 - 2 / sum(speedup)
    if expected_saving <= 0:
        return math.inf
    worst = compile.per_run[1]
    return max(worst / expected_saving, worst * MIN_RUN_OVER_COMPILE)


@dataclass(frozen=True)
class Money:
    reason: str
    per_run: float | None = None
    per_year: float | None = None
    saving: tuple[float, float] | None = None
    at_stake: float = math.inf
    """The most the compiler could save a year; unknown counts as enough (never blocks)."""


def price_unknown(instance_type: str) -> str:
    """Why a workload's money is not counted, and how to give the price."""
    return (f"price unknown for {instance_type}: dollars not counted; supply one with "
            f"prices={{'{instance_type}': USD per hour}} or `advise --prices FILE` (or "
            f"--live-prices)")


def money(profile: WorkloadProfile, compiler: str, speedup: tuple[float, float],
           prices: Mapping[str, float] | None, compile: CompileMinutes) -> Money:
    price = price_per_hour(profile.instance_type, prices)
    if price is None:
        return Money(price_unknown(profile.instance_type))
    hourly = price * profile.instance_count
    per_run = hourly * profile.hours_per_run
    runs = profile.runs_per_week * WEEKS_PER_YEAR
    # A year's compiling: the first run cold, the others at the per-run figure.
    compile_cost = hourly / 60 * (compile.first[1] + (runs - 1) * compile.per_run[1]) \
        if runs >= 1 else hourly / 60 * compile.first[1] * runs
    low, high = (max(0.0, per_run * (1 - 1 / s) * runs - compile_cost) for s in speedup)
    reason = f"${per_run:,.0f} a run, ${per_run * runs:,.0f} a year"
    if profile.region != "us-east-1" and profile.instance_type not in (prices or {}):
        # The table is us-east-1's; a price given (or read live for the region) is the job's.
        reason += f" (us-east-1 price; {profile.region} may differ)"
    if (module := compiler_module(compiler)).enabled:
        reason += f"; {module.title} would save ${low:,.0f}-${high:,.0f} a year"
    return Money(reason, per_run, per_run * runs, (low, high), high)
