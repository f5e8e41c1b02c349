"""The decision: where a compiler pays, how much, and what to change to get it.

A compiler helps only where the workload fits: a GPU deep-learning graph, static shapes,
mixed precision, jobs long enough to amortise compilation, and enough money at stake.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from .instances import TRAINING_COMPILER_FAMILIES, instance_family, is_gpu

# SageMaker training, on-demand, US East (N. Virginia), USD per instance-hour: approximate
# list prices as recorded for this library in November 2026 from the Amazon SageMaker AI
# pricing page. Not read live (synth is offline); pass ``prices=`` to use your own.
PRICES_SOURCE = "Amazon SageMaker AI pricing page, on-demand training, us-east-1, 2026-11"
ON_DEMAND_PRICES_USD: Mapping[str, float] = {
    "ml.g4dn.xlarge": 0.736, "ml.g4dn.2xlarge": 0.94, "ml.g4dn.4xlarge": 1.505,
    "ml.g4dn.8xlarge": 2.72, "ml.g4dn.12xlarge": 4.89, "ml.g4dn.16xlarge": 5.44,
    "ml.g5.xlarge": 1.408, "ml.g5.2xlarge": 1.515, "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06, "ml.g5.12xlarge": 7.09, "ml.g5.16xlarge": 5.12,
    "ml.g5.24xlarge": 10.18, "ml.g5.48xlarge": 20.36,
    "ml.p3.2xlarge": 3.825, "ml.p3.8xlarge": 14.688, "ml.p3.16xlarge": 28.152,
    "ml.p3dn.24xlarge": 35.894, "ml.p4d.24xlarge": 37.688,
    "ml.m5.xlarge": 0.23, "ml.m5.4xlarge": 0.922, "ml.m6i.12xlarge": 2.765,
    "ml.c5.xlarge": 0.204, "ml.c5.9xlarge": 1.836,
}
DEEP_LEARNING_FRAMEWORKS = ("pytorch", "huggingface", "tensorflow")
# Model families whose Training Compiler gains AWS has published (transformer encoders
# and decoders); other deep-learning models must be measured first.
PROVEN_FAMILIES = ("bert", "roberta", "distilbert", "albert", "electra", "gpt2", "t5", "bart")
PRECISIONS = ("fp32", "fp16", "bf16")
BOTTLENECKS = ("compute", "data-loading", "communication")
# Throughput gain with the compiler (same batch), low and high, for proven families in
# mixed precision; the seed benchmark (820 -> 1,140 samples/s/GPU) sits in this range.
PROVEN_GAIN = (1.30, 1.45)
UNPROVEN_GAIN = (1.0, 1.3)  # may not help at all: hence BENCHMARK
FP32_GAIN = (1.0, 1.15)
COMPILE_MINUTES = (2.0, 5.0)
# The compiler frees memory, so the batch can grow; the seed went 32 -> 48 for +54 %.
BATCH_GROWTH = 1.5
MIN_MINUTES_PER_RUN = 30.0
WEEKS_PER_YEAR = 52


class Verdict(str, Enum):
    ENABLE = "ENABLE"
    BENCHMARK = "BENCHMARK"
    SKIP = "SKIP"


@dataclass(frozen=True)
class WorkloadProfile:
    """What decides whether a compiler pays for a training workload."""

    name: str
    framework: str
    model_family: str
    instance_type: str
    instance_count: int
    hours_per_run: float
    runs_per_week: float
    static_shapes: bool
    precision: str
    batch_size: int | None = None
    learning_rate: float | None = None
    bottleneck: str | None = None
    region: str = "us-east-1"

    def __post_init__(self) -> None:
        problems = []
        if self.instance_count < 1:
            problems.append(f"instance_count must be at least 1, got {self.instance_count}")
        if not self.hours_per_run > 0:
            problems.append(f"hours_per_run must be positive, got {self.hours_per_run}")
        if self.runs_per_week < 0:
            problems.append(f"runs_per_week must not be negative, got {self.runs_per_week}")
        if self.precision not in PRECISIONS:
            problems.append(f"precision must be one of {', '.join(PRECISIONS)}, "
                            f"got {self.precision!r}")
        if self.bottleneck is not None and self.bottleneck not in BOTTLENECKS:
            problems.append(f"bottleneck must be one of {', '.join(BOTTLENECKS)}, "
                            f"got {self.bottleneck!r}")
        if self.batch_size is not None and self.batch_size < 1:
            problems.append(f"batch_size must be at least 1, got {self.batch_size}")
        if problems:
            raise ValueError(f"workload {self.name!r}: " + "; ".join(problems))


@dataclass(frozen=True)
class Assessment:
    """The verdict, a reason per factor, and the numbers behind it."""

    profile: WorkloadProfile
    verdict: Verdict
    reasons: dict[str, str]
    speedup: tuple[float, float]
    """Throughput with the compiler over without, at the same batch size (low, high)."""
    compile_minutes: tuple[float, float]
    break_even_minutes: float
    dollars_per_run: float
    dollars_per_year: float
    saving_per_year: tuple[float, float]
    recommended_batch_size: int | None = None
    recommended_learning_rate: float | None = None
    notes: list[str] = field(default_factory=list)

    def predicted_hours(self, *, baseline: float, compiled: float,
                        compile_minutes: float) -> float:
        """Wall-clock of one run with the compiler, from measured throughputs."""
        return self.profile.hours_per_run * baseline / compiled + compile_minutes / 60


def price_per_hour(instance_type: str, prices: Mapping[str, float] | None = None) -> float:
    table = prices or ON_DEMAND_PRICES_USD
    if instance_type not in table:
        raise ValueError(f"instance_type {instance_type!r} has no price in the table "
                         f"({PRICES_SOURCE}); known: {', '.join(sorted(table))}; pass prices=")
    return table[instance_type]


def scaled_learning_rate(learning_rate: float, old_batch: int, new_batch: int, *,
                         rule: str = "linear") -> float:
    """The learning rate for a new batch size: linear scaling or square-root scaling."""
    ratio = new_batch / old_batch
    if rule == "linear":
        return learning_rate * ratio
    if rule == "sqrt":
        return learning_rate * math.sqrt(ratio)
    raise ValueError(f"rule must be 'linear' or 'sqrt', got {rule!r}")


def assess_workload(profile: WorkloadProfile, *,
                    prices: Mapping[str, float] | None = None) -> Assessment:
    """Whether to enable a compiler for this workload: ENABLE, BENCHMARK or SKIP."""
    reasons: dict[str, str] = {}
    hourly = price_per_hour(profile.instance_type, prices) * profile.instance_count
    dollars_per_run = hourly * profile.hours_per_run
    dollars_per_year = dollars_per_run * profile.runs_per_week * WEEKS_PER_YEAR
    minutes = profile.hours_per_run * 60

    if profile.framework not in DEEP_LEARNING_FRAMEWORKS or not is_gpu(profile.instance_type):
        # Nothing a deep-learning compiler can act on: no further factor matters.
        deep_learning = profile.framework in DEEP_LEARNING_FRAMEWORKS
        reasons["framework"] = (
            f"{profile.framework} builds a deep-learning graph" if deep_learning
            else f"{profile.framework} is not a GPU deep-learning graph; a deep-learning "
                 "compiler has nothing to compile")
        if not is_gpu(profile.instance_type):
            reasons["instance"] = (f"{profile.instance_type} is a CPU instance; the compiler "
                                   "targets GPUs")
        reasons["money"] = f"${dollars_per_run:,.0f} a run, ${dollars_per_year:,.0f} a year"
        return Assessment(
            profile=profile, verdict=Verdict.SKIP, reasons=reasons, speedup=(1.0, 1.0),
            compile_minutes=COMPILE_MINUTES, break_even_minutes=math.inf,
            dollars_per_run=dollars_per_run, dollars_per_year=dollars_per_year,
            saving_per_year=(0.0, 0.0))

    skip = False
    benchmark = False
    reasons["framework"] = f"{profile.framework} builds a deep-learning graph"
    family = instance_family(profile.instance_type)
    if family not in TRAINING_COMPILER_FAMILIES:
        reasons["instance"] = (f"{profile.instance_type}: Training Compiler supports "
                               f"{', '.join(TRAINING_COMPILER_FAMILIES)} only; torch.compile "
                               "must be measured here")
        benchmark = True
    else:
        reasons["instance"] = f"{profile.instance_type} is a supported GPU family ({family})"

    proven = profile.model_family.lower() in PROVEN_FAMILIES
    if profile.precision == "fp32":
        gain = FP32_GAIN
        reasons["precision"] = "fp32 only: most of the compiler's gain comes with fp16/bf16"
        benchmark = True
    else:
        gain = PROVEN_GAIN if proven else UNPROVEN_GAIN
        reasons["precision"] = f"{profile.precision} mixed precision suits the compiler"
    if proven:
        reasons["model"] = f"{profile.model_family}: a transformer family with published gains"
    else:
        reasons["model"] = (f"{profile.model_family}: no published gain for this family; "
                            "measure before shipping")
        benchmark = True
    if profile.static_shapes:
        reasons["shapes"] = "static shapes: one graph, compiled once"
    else:
        reasons["shapes"] = ("dynamic shapes recompile the graph for every new shape; pad to "
                             "a fixed length or bucket first")
        skip = True
    if profile.bottleneck in ("data-loading", "communication"):
        reasons["bottleneck"] = (f"bound by {profile.bottleneck}: a faster graph does not "
                                 "shorten that")
        benchmark = True
    elif profile.bottleneck == "compute":
        reasons["bottleneck"] = "compute-bound: what the compiler speeds up"

    saving_low, saving_high = (1 - 1 / gain[0], 1 - 1 / gain[1])
    # Break-even from the expected (middle) gain against the worst compile time, and never
    # below the half hour under which compilation is not worth its risk.
    expected_saving = 1 - 2 / (gain[0] + gain[1])
    break_even = max(COMPILE_MINUTES[1] / expected_saving, MIN_MINUTES_PER_RUN)
    if minutes < break_even:
        reasons["duration"] = (f"{minutes:.0f}-minute runs: compile overhead "
                               f"({COMPILE_MINUTES[0]:.0f}-{COMPILE_MINUTES[1]:.0f} min) exceeds "
                               f"or eats the saving ({minutes * saving_low:.1f}-"
                               f"{minutes * saving_high:.1f} min); break-even is "
                               f"{break_even:.0f} min")
        skip = True
    else:
        reasons["duration"] = (f"{profile.hours_per_run:g} h runs amortise the "
                               f"{COMPILE_MINUTES[0]:.0f}-{COMPILE_MINUTES[1]:.0f} min compile")

    compile_cost = hourly * COMPILE_MINUTES[1] / 60
    yearly_runs = profile.runs_per_week * WEEKS_PER_YEAR
    saving_per_year = (
        max(0.0, (dollars_per_run * saving_low - compile_cost) * yearly_runs),
        max(0.0, (dollars_per_run * saving_high - compile_cost) * yearly_runs),
    )
    reasons["money"] = (f"${dollars_per_run:,.0f} a run, ${dollars_per_year:,.0f} a year; "
                        f"the compiler would save ${saving_per_year[0]:,.0f}-"
                        f"${saving_per_year[1]:,.0f} a year")

    verdict = Verdict.SKIP if skip else Verdict.BENCHMARK if benchmark else Verdict.ENABLE
    batch = lr = None
    notes = []
    if verdict is Verdict.ENABLE and profile.batch_size:
        batch = int(profile.batch_size * BATCH_GROWTH)
        notes.append(f"raise the batch from {profile.batch_size} to {batch} (the compiler "
                     "frees memory) and scale the learning rate to match")
        if profile.learning_rate:
            lr = scaled_learning_rate(profile.learning_rate, profile.batch_size, batch)
    if verdict is Verdict.BENCHMARK:
        notes.append("deploy a CompilerBenchmark (A/B pipeline) and ship only at >= 20 % "
                     "speedup without quality loss")
    return Assessment(
        profile=profile, verdict=verdict, reasons=reasons, speedup=gain,
        compile_minutes=COMPILE_MINUTES, break_even_minutes=break_even,
        dollars_per_run=dollars_per_run, dollars_per_year=dollars_per_year,
        saving_per_year=saving_per_year, recommended_batch_size=batch,
        recommended_learning_rate=lr, notes=notes,
    )
