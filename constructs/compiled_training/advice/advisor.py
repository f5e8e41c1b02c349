"""The decision: which compiler, whether it pays, how much, and what to change to get it.

A compiler helps only where the workload fits: a GPU deep-learning graph, static shapes,
mixed precision, jobs long enough to amortise compilation, and enough money at stake. Each
factor sets the best verdict it allows; the verdict is the lowest of them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from compiled_training._internal.dlc import training_compiler_releases
from compiled_training._internal.instances import (
    TRAINING_COMPILER_FAMILIES,
    accelerator,
    instance_family,
)
from compiled_training.pipelines.compiler import CompilerKind
from compiled_training_runtime import contract

# --- Prices ----------------------------------------------------------------------------------

# SageMaker training, on-demand, US East (N. Virginia), USD per instance-hour: approximate
# list prices as recorded for this library in November 2026 from the Amazon SageMaker AI
# pricing page. Not read live by default (synth is offline); pass ``prices=`` for your own.
PRICES_SOURCE = "Amazon SageMaker AI pricing page, on-demand training, us-east-1, 2026-11"
_RECORDED_PRICES_USD = {
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
# Families the recorded list lacks, estimated (approximately; give or take 20 %): the EC2
# On-Demand Linux list price in us-east-1 (Amazon EC2 pricing page, as of 2024-2025) times
# SageMaker's training premium over EC2 that the recorded list shows for the nearest family
# (p4d 37.688 over EC2 32.77: about 1.15; g5 20.36 over 16.288: 1.25). AWS cut EC2 prices of
# P4 and P5 in mid-2025; SageMaker's may be lower too: decide p-family money on live prices.
# p5e, p5en and trn2 have no list price to estimate from: they are "price unknown" until given.
ESTIMATES_SOURCE = ("approximate: EC2 on-demand list price (us-east-1, 2024-2025) x SageMaker's "
                    "training premium on the nearest recorded family")
_ESTIMATED_FROM_EC2_USD = {
    1.15: {"p4de.24xlarge": 40.966, "p5.48xlarge": 98.32,  # premium as on p4d (trn1 alike)
           "trn1.2xlarge": 1.344, "trn1.32xlarge": 21.50, "trn1n.32xlarge": 24.78},
    1.25: {"g6.xlarge": 0.805, "g6.2xlarge": 0.978, "g6.4xlarge": 1.323,  # as on g5
           "g6.8xlarge": 2.014, "g6.12xlarge": 4.602, "g6.16xlarge": 3.397,
           "g6.24xlarge": 6.675, "g6.48xlarge": 13.35,
           "g6e.xlarge": 1.861, "g6e.2xlarge": 2.242, "g6e.4xlarge": 3.004,
           "g6e.8xlarge": 4.529, "g6e.12xlarge": 10.493, "g6e.16xlarge": 7.577,
           "g6e.24xlarge": 15.066, "g6e.48xlarge": 30.131},
}
# CPU families: AWS prices the sizes of a family linearly (the recorded list shows it:
# m5.4xlarge is 4 x m5.xlarge, c5.9xlarge 9 x c5.xlarge), so each size is its xlarge price
# times its multiple; c6i is listed at c5's price on EC2.
_CPU_FAMILIES = {
    "m5": (0.23, "large xlarge 2xlarge 4xlarge 12xlarge 24xlarge"),
    "m6i": (2.765 / 12, "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge"),
    "c5": (0.204, "large xlarge 2xlarge 4xlarge 9xlarge 18xlarge"),
    "c6i": (0.204, "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge"),
}


def _xlarges(size: str) -> float:
    """How many xlarges a size is: large 0.5, xlarge 1, 12xlarge 12."""
    return 0.5 if size == "large" else float(size.removesuffix("xlarge") or 1)


ON_DEMAND_PRICES_USD: Mapping[str, float] = {
    **{f"ml.{family}.{size}": round(per_xlarge * _xlarges(size), 3)
       for family, (per_xlarge, sizes) in _CPU_FAMILIES.items() for size in sizes.split()},
    **{f"ml.{name}": round(usd * premium, 3)
       for premium, ec2 in _ESTIMATED_FROM_EC2_USD.items() for name, usd in ec2.items()},
    **_RECORDED_PRICES_USD,
}
# The Price List API answers from us-east-1 whatever region it prices.
PRICE_LIST_REGION = "us-east-1"

# --- Vocabulary ------------------------------------------------------------------------------

# Specific names, as a user writes them (lower case; '_' and ' ' read as '-'), by category.
# ViT counts as vision (TIMM's suite holds it); U-Net as diffusion, the denoiser that Stable
# Diffusion fine-tunes train.
_NAMES = {
    "transformer": ("bert", "roberta", "distilbert", "albert", "electra", "deberta", "xlnet",
                    "xlm-roberta", "gpt2", "gpt-neo", "gpt-j", "opt", "bloom", "llama", "mistral",
                    "t5", "bart", "pegasus", "marian", "llm"),
    "vision": ("vit", "deit", "swin", "convnext", "resnet", "resnext", "efficientnet",
               "mobilenet", "densenet", "vgg", "inception", "regnet", "yolo", "detr", "cnn"),
    "diffusion": ("unet", "stable-diffusion", "sdxl", "ddpm", "latent-diffusion", "controlnet"),
    "tabular": ("gradient-boosted-trees", "xgboost", "lightgbm", "catboost", "gbdt",
                "random-forest"),
    "custom": (),
}
CATEGORIES = tuple(_NAMES)
MODEL_CATEGORIES: Mapping[str, str] = {
    name: category for category, names in _NAMES.items() for name in (category, *names)}

PYTORCH_FRAMEWORKS = ("pytorch", "huggingface")
PRECISIONS = ("fp32", "fp16", "bf16")
BOTTLENECKS = ("compute", "data-loading", "communication")
FACTORS = ("framework", "instance", "compiler", "model", "precision", "shapes", "bottleneck",
           "duration", "money")

# --- Priors ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prior:
    """Expected throughput with a compiler over without, at the same batch: mixed precision,
    static shapes, compute-bound (low, high), and where the figure comes from."""

    speedup: tuple[float, float]
    source: str
    """The citation a reason shows; the comments above ``PRIORS`` give the figures."""
    published: bool
    """Whether the source measured this category: only then can the verdict be ENABLE."""


# AWS, "Amazon SageMaker Training Compiler" launch (re:Invent, 2021-12): "up to 50 % faster"
# training on Hugging Face transformer models. An upper bound only: the low end is this
# library's conservative floor. AWS's tested models for PyTorch are transformers; elsewhere it
# may not help at all.
TC_SOURCE = "AWS's Training Compiler launch, 2021-12: up to 50 % on transformers"
# PyTorch 2.0 announcement (pytorch.org, 2022-12): 163 open-source models from Hugging Face
# Transformers, TIMM and TorchBench on an A100, 43 % faster training on average (51 % in AMP,
# 21 % in fp32); per-suite geomeans in AMP approximately 1.5x (HF), 1.3-1.4x (TIMM) and
# 1.2-1.3x (TorchBench). Each range below sits at or below its suite's geomean: models vary.
TORCH_COMPILE_SOURCE = "PyTorch 2.0 announcement, 2022-12"
PRIORS: Mapping[tuple[CompilerKind, str], Prior] = {
    (CompilerKind.TRAINING_COMPILER, "transformer"): Prior((1.1, 1.5), TC_SOURCE, True),
    (CompilerKind.TRAINING_COMPILER, "other"): Prior(
        (1.0, 1.3), "assumed no better than torch.compile on the TorchBench mix", False),
    (CompilerKind.TORCH_COMPILE, "transformer"): Prior(
        (1.2, 1.5), f"{TORCH_COMPILE_SOURCE}: about 1.5x on Hugging Face models", True),
    (CompilerKind.TORCH_COMPILE, "vision"): Prior(
        (1.1, 1.4), f"{TORCH_COMPILE_SOURCE}: about 1.3-1.4x on TIMM models", True),
    (CompilerKind.TORCH_COMPILE, "other"): Prior(
        (1.0, 1.3), f"{TORCH_COMPILE_SOURCE}: about 1.2-1.3x on the TorchBench mix, the "
                    "nearest", False),
}
# fp32 gains are smaller for both (PyTorch 2.0: 21 % in fp32 against 51 % in AMP on average).
FP32_SPEEDUP_CAP = (1.0, 1.2)
# The use case's figure: compilation costs 2-5 minutes a run; under ~30 min it does not pay.
COMPILE_MINUTES = (2.0, 5.0)
MIN_MINUTES_PER_RUN = 30.0
# AWS's Training Compiler "tested models" table lists, per model and instance, the largest
# batch with and without the compiler; for its transformer entries the compiler's batch is
# larger, approximately 1.5x to 2x or more. The low end is the step to recommend.
TC_BATCH_GROWTH = 1.5
# A CompilerBenchmark is a pipeline to deploy and read, a couple of engineer-days plus the
# A/B arms' compute (more where shapes must be fixed first): below this much a year at stake
# (the high end of the saving) it costs more than it can save in a year. This library's choice.
MIN_SAVING_FOR_A_BENCHMARK_USD = 2_500.0
WEEKS_PER_YEAR = 52
_VERSION = re.compile(r"\d+(\.\d+){0,2}")
_INSTANCE_TYPE = re.compile(r"ml\.[a-z][a-z0-9-]*\.[a-z0-9-]+")


class Verdict(str, Enum):
    """Worst to best: a factor's verdict is the best it allows, the workload's the lowest."""

    SKIP = "SKIP"
    BENCHMARK = "BENCHMARK"
    ENABLE = "ENABLE"

    @property
    def rank(self) -> int:
        return list(Verdict).index(self)


@dataclass(frozen=True)
class WorkloadProfile:
    """What decides whether a compiler pays for a training workload."""

    name: str
    framework: str
    """``pytorch``, ``huggingface``, ``tensorflow``, ``xgboost``, ...: the SageMaker SDK's names."""
    model_family: str
    """A category (transformer, vision, diffusion, tabular, custom) or a name such as bert,
    gpt2, vit, resnet or unet; an unknown word is treated as custom."""
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
    framework_version: str | None = None
    """The job's PyTorch version (for ``huggingface``, the PyTorch under Transformers): 2.x
    means torch.compile, a Training Compiler release means Training Compiler. When omitted,
    Training Compiler where it fits and has published gains, otherwise torch.compile."""

    def __post_init__(self) -> None:
        problems = []
        if not _INSTANCE_TYPE.fullmatch(self.instance_type):
            problems.append(f"instance_type must look like 'ml.g5.48xlarge', "
                            f"got {self.instance_type!r}")
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
        if self.framework_version is not None and not _VERSION.fullmatch(self.framework_version):
            problems.append(f"framework_version must be a version such as '2.3' or '1.13.1', "
                            f"got {self.framework_version!r}")
        if problems:
            raise ValueError(f"workload {self.name!r}: " + "; ".join(problems))


@dataclass(frozen=True)
class Assessment:
    """The compiler, the verdict, a reason per factor, and the numbers behind it."""

    profile: WorkloadProfile
    compiler: CompilerKind
    verdict: Verdict
    reasons: dict[str, str]
    limits: dict[str, Verdict]
    """The best verdict each factor allows; ``verdict`` is the lowest of them."""
    speedup: tuple[float, float]
    """Throughput with the compiler over without, at the same batch size (low, high)."""
    compile_minutes: tuple[float, float]
    break_even_minutes: float
    dollars_per_run: float | None
    """None when the instance type has no known price."""
    dollars_per_year: float | None
    saving_per_year: tuple[float, float] | None
    recommended_batch_size: int | None = None
    recommended_learning_rate: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def deciding_factor(self) -> str:
        """The factor that set the verdict; for ENABLE, the model's published gains."""
        if self.verdict is Verdict.ENABLE:
            return "model"
        return next(f for f in FACTORS if self.limits[f] is self.verdict)


def model_category(model_family: str) -> tuple[str, bool]:
    """The category of a model family, and whether the word was known (unknown: custom)."""
    word = re.sub(r"[\s_]+", "-", model_family.strip().lower())
    return MODEL_CATEGORIES.get(word, "custom"), word in MODEL_CATEGORIES


def price_per_hour(instance_type: str, prices: Mapping[str, float] | None = None) -> float | None:
    """USD per instance-hour: ``prices`` first, then the table; None when neither knows it."""
    return {**ON_DEMAND_PRICES_USD, **(prices or {})}.get(instance_type)


def compiler_name(kind: CompilerKind) -> str:
    return {CompilerKind.TRAINING_COMPILER: "Training Compiler",
            CompilerKind.TORCH_COMPILE: "torch.compile",
            CompilerKind.NONE: "no compiler"}[kind]


def choose_compiler(profile: WorkloadProfile) -> tuple[CompilerKind, dict[str, str]]:
    """The compiler for the job's framework, version and instance, with the reasons for it.

    Training Compiler where its support matrix (the SageMaker SDK's, read by ``dlc``) has a
    release for the framework and version and it supports the instance family; torch.compile
    for PyTorch 2.x on any NVIDIA GPU; nothing otherwise.
    """
    reasons = {"framework": _framework_reason(profile), "instance": _instance_reason(profile)}
    if not all(_pytorch_on_nvidia(profile)):
        return CompilerKind.NONE, reasons | {
            "compiler": "none: neither compiler applies (see framework and instance)"}
    version = profile.framework_version
    family = instance_family(profile.instance_type)
    tc_family = family in TRAINING_COMPILER_FAMILIES
    families = ", ".join(TRAINING_COMPILER_FAMILIES)
    releases = ", ".join(_releases(profile.framework))
    if version is None:
        if tc_family and model_category(profile.model_family)[0] == "transformer":
            return CompilerKind.TRAINING_COMPILER, reasons | {"compiler": (
                "Training Compiler: framework_version not given, so one of its releases is "
                f"assumed ({releases}); it has published transformer gains on {family}")}
        why = (f"{family} is not a Training Compiler family ({families})" if not tc_family
               else "Training Compiler has published gains for transformers only")
        return CompilerKind.TORCH_COMPILE, reasons | {"compiler": (
            f"torch.compile: framework_version not given, so PyTorch 2.x is assumed; {why}")}
    if int(version.split(".")[0]) >= 2:
        return CompilerKind.TORCH_COMPILE, reasons | {"compiler": (
            f"torch.compile: PyTorch {version} has it; Training Compiler is frozen at {releases}")}
    release = _training_compiler_release(profile.framework, version)
    if release and tc_family:
        return CompilerKind.TRAINING_COMPILER, reasons | {"compiler": (
            f"Training Compiler: its {release} release runs on {family}")}
    missing = (f"Training Compiler's {release} release does not run on {family} ({families} only)"
               if release else f"Training Compiler has no release for PyTorch {version} "
                               f"({releases})")
    return CompilerKind.NONE, reasons | {"compiler": (
        f"none: {missing}, and torch.compile needs PyTorch 2.0 or later: upgrade the job")}


def _pytorch_on_nvidia(profile: WorkloadProfile) -> tuple[bool, bool]:
    """Whether the job is PyTorch, and whether its instance has NVIDIA GPUs: both compilers
    need both."""
    return profile.framework in PYTORCH_FRAMEWORKS, accelerator(profile.instance_type) == "nvidia"


def _framework_reason(profile: WorkloadProfile) -> str:
    if profile.framework in PYTORCH_FRAMEWORKS:
        version = (f"PyTorch {profile.framework_version}" if profile.framework_version
                   else "version not given")
        return f"{profile.framework} ({version}) builds a deep-learning graph"
    if profile.framework == "tensorflow":
        return ("tensorflow builds a deep-learning graph, but this library's compilers are for "
                "PyTorch jobs; TensorFlow's own XLA (jit_compile) is outside it")
    return (f"{profile.framework} is not a GPU deep-learning graph; a deep-learning compiler "
            "has nothing to compile")


def _instance_reason(profile: WorkloadProfile) -> str:
    instance, family = profile.instance_type, instance_family(profile.instance_type)
    return {
        "nvidia": f"{instance}: an NVIDIA GPU instance ({family}), what both compilers target",
        "amd": f"{instance}: AMD GPUs, which no CUDA image and neither compiler runs on",
        "trainium": f"{instance}: Trainium compiles through the Neuron SDK, not these compilers",
        "inferentia": f"{instance}: Inferentia is for inference, not these compilers",
        "cpu": f"{instance} is a CPU instance; both compilers target NVIDIA GPUs",
    }[accelerator(instance)]


def _releases(framework: str) -> list[str]:
    """Training Compiler's releases for a framework, from the SDK's support matrix."""
    prefix = "Hugging Face" if framework == "huggingface" else "PyTorch"
    return [r for r in training_compiler_releases() if r.startswith(prefix)]


def _training_compiler_release(framework: str, version: str) -> str | None:
    """The release for a PyTorch version, matched on major.minor (1.13 and 1.13.0 run on
    1.13.1's image); None where Training Compiler has none."""
    minor = ".".join(version.split(".")[:2])
    return next((r for r in _releases(framework)
                 if r.rpartition("PyTorch ")[2].startswith(minor + ".")), None)


def _prior(compiler: CompilerKind, category: str) -> Prior | None:
    return PRIORS.get((compiler, category)) or PRIORS.get((compiler, "other"))


def assess_workload(profile: WorkloadProfile, *,
                    prices: Mapping[str, float] | None = None) -> Assessment:
    """Which compiler, and whether to enable it for this workload: ENABLE, BENCHMARK or SKIP.

    ``prices`` (USD per instance-hour by instance type) come before the built-in table; an
    instance type neither knows still gets its verdict, with the money marked unknown.
    """
    compiler, reasons = choose_compiler(profile)
    category, known = model_category(profile.model_family)
    prior = _prior(compiler, category)
    speedup = _speedup(profile, prior)
    break_even = _break_even_minutes(speedup)
    pytorch, nvidia = _pytorch_on_nvidia(profile)
    limits = {"framework": _allows(pytorch), "instance": _allows(nvidia),
              "compiler": _allows(compiler is not CompilerKind.NONE)}
    for factor, (limit, reason) in {
        "model": _model(profile.model_family, category, known, compiler, prior),
        "precision": _precision(profile, compiler),
        "shapes": _shapes(profile, compiler, category),
        "bottleneck": _bottleneck(profile),
        "duration": _duration(profile, compiler, speedup, break_even),
    }.items():
        limits[factor], reasons[factor] = limit, reason
    money = _money(profile, compiler, speedup, prices)
    reasons["money"] = money.reason
    limits["money"] = Verdict.ENABLE
    verdict = min(limits.values(), key=lambda v: v.rank)
    if verdict is Verdict.BENCHMARK and money.at_stake < MIN_SAVING_FOR_A_BENCHMARK_USD:
        verdict = limits["money"] = Verdict.SKIP
        reasons["money"] += (f": under the ${MIN_SAVING_FOR_A_BENCHMARK_USD:,.0f} a year that "
                             "pays for a benchmarking sprint")

    batch = lr = None
    tc_enabled = verdict is Verdict.ENABLE and compiler is CompilerKind.TRAINING_COMPILER
    if tc_enabled and profile.batch_size:
        batch = int(profile.batch_size * TC_BATCH_GROWTH)
        if profile.learning_rate:
            # The runtime's own rule: a job given base_batch_size trains at this rate.
            lr = contract.scaled_learning_rate(profile.learning_rate, profile.batch_size, batch)
    return Assessment(
        profile=profile, compiler=compiler, verdict=verdict, reasons=reasons, limits=limits,
        speedup=speedup, compile_minutes=COMPILE_MINUTES, break_even_minutes=break_even,
        dollars_per_run=money.per_run, dollars_per_year=money.per_year,
        saving_per_year=money.saving, recommended_batch_size=batch, recommended_learning_rate=lr,
        notes=_notes(profile, compiler, category, verdict, batch),
    )


def _allows(applies: bool) -> Verdict:
    return Verdict.ENABLE if applies else Verdict.SKIP


def _speedup(profile: WorkloadProfile, prior: Prior | None) -> tuple[float, float]:
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


def _break_even_minutes(speedup: tuple[float, float]) -> float:
    """From the expected (middle) gain against the worst compile time, and never below the
    half hour under which compilation is not worth its risk."""
    expected_saving = 1 - 2 / sum(speedup)
    if expected_saving <= 0:
        return math.inf
    return max(COMPILE_MINUTES[1] / expected_saving, MIN_MINUTES_PER_RUN)


_Judged = tuple[Verdict, str]


def _model(model_family: str, category: str, known: bool, compiler: CompilerKind,
           prior: Prior | None) -> _Judged:
    said = (f"{model_family}: {category}" if known else
            f"{model_family}: not a family this advisor knows, treated as custom")
    if category == "tabular":
        return Verdict.SKIP, f"{said} (gradient-boosted trees build no deep-learning graph)"
    if prior is None:
        return Verdict.ENABLE, said
    if prior.published:
        return Verdict.ENABLE, (f"{said}, with published {compiler_name(compiler)} gains "
                                f"({prior.source})")
    return Verdict.BENCHMARK, (f"{said}, without a published {compiler_name(compiler)} figure "
                               f"of its own ({prior.source}); measure before shipping")


def _precision(profile: WorkloadProfile, compiler: CompilerKind) -> _Judged:
    if profile.precision != "fp32":
        return Verdict.ENABLE, (f"{profile.precision} mixed precision suits "
                                f"{compiler_name(compiler)}")
    if compiler is CompilerKind.TORCH_COMPILE:
        return Verdict.BENCHMARK, ("fp32 only: torch.compile works without mixed precision but "
                                   "gains less (PyTorch 2.0: 21 % in fp32, 51 % in AMP on average)")
    return Verdict.BENCHMARK, "fp32 only: most of a compiler's gain comes with fp16/bf16"


_SHAPE_FIXES = {
    "transformer": "pad sequences to a fixed length or bucket them into a few lengths",
    "vision": "resize or crop images to fixed sizes",
    "diffusion": "resize or crop images to a few fixed resolutions",
}
_ANY_SHAPE_FIX = "pad or bucket sequences, resize images to fixed crops"


def _shapes(profile: WorkloadProfile, compiler: CompilerKind, category: str) -> _Judged:
    if profile.static_shapes:
        return Verdict.ENABLE, "static shapes: one graph, compiled once"
    fix = _SHAPE_FIXES.get(category, _ANY_SHAPE_FIX)
    if compiler is CompilerKind.TORCH_COMPILE:
        return Verdict.BENCHMARK, ("dynamic shapes: torch.compile handles them (automatic "
                                   "dynamic shapes, dynamic=True) at a cost, a recompile per new "
                                   "shape and less specialised kernels; fixing them first "
                                   f"({fix}) recovers the static gain")
    return Verdict.BENCHMARK, ("dynamic shapes: XLA recompiles for every new shape, so the fix "
                               f"comes first ({fix})")


def _bottleneck(profile: WorkloadProfile) -> _Judged:
    if profile.bottleneck in ("data-loading", "communication"):
        return Verdict.BENCHMARK, (f"bound by {profile.bottleneck}: a faster graph does not "
                                   "shorten that")
    if profile.bottleneck == "compute":
        return Verdict.ENABLE, "compute-bound: what a compiler speeds up"
    return Verdict.ENABLE, ("not stated: where data loading or communication bound the job, a "
                            "faster graph shortens it less")


def _duration(profile: WorkloadProfile, compiler: CompilerKind, speedup: tuple[float, float],
              break_even: float) -> _Judged:
    minutes = profile.hours_per_run * 60
    compile_range = f"{COMPILE_MINUTES[0]:.0f}-{COMPILE_MINUTES[1]:.0f} min"
    if compiler is CompilerKind.NONE:
        return Verdict.ENABLE, "no compiler: no compile time to amortise"
    if minutes < break_even:
        low, high = (minutes * (1 - 1 / s) for s in speedup)
        return Verdict.SKIP, (f"{minutes:.0f}-minute runs: compile overhead ({compile_range}) "
                              f"exceeds or eats the saving ({low:.1f}-{high:.1f} min); "
                              f"break-even is {break_even:.0f} min")
    return Verdict.ENABLE, f"{profile.hours_per_run:g} h runs amortise the {compile_range} compile"


@dataclass(frozen=True)
class _Money:
    reason: str
    per_run: float | None = None
    per_year: float | None = None
    saving: tuple[float, float] | None = None
    at_stake: float = math.inf
    """The most the compiler could save a year; unknown counts as enough (never blocks)."""


def _money(profile: WorkloadProfile, compiler: CompilerKind, speedup: tuple[float, float],
           prices: Mapping[str, float] | None) -> _Money:
    price = price_per_hour(profile.instance_type, prices)
    if price is None:
        return _Money(f"price unknown for {profile.instance_type}: dollars not counted; supply "
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
    return _Money(reason, per_run, per_run * runs, (low, high), high)


def _notes(profile: WorkloadProfile, compiler: CompilerKind, category: str, verdict: Verdict,
           batch: int | None) -> list[str]:
    """What to do next."""
    notes = []
    if verdict is Verdict.BENCHMARK:
        if not profile.static_shapes:
            notes.append("first step: make the shapes static "
                         f"({_SHAPE_FIXES.get(category, _ANY_SHAPE_FIX)})")
        notes.append(f"deploy a CompilerBenchmark (A/B pipeline) of {compiler_name(compiler)} "
                     f"against no compiler and ship only at >= "
                     f"{contract.DEFAULT_SPEEDUP_THRESHOLD:.0%} speedup without quality loss")
    if batch is not None:
        notes.append(f"raise the batch from {profile.batch_size} to {batch} (the compiler frees "
                     "memory: AWS's tested-models table) and scale the learning rate to match")
    if verdict is Verdict.ENABLE and compiler is CompilerKind.TORCH_COMPILE:
        notes.append("enable Compiler.torch_compile() and keep the batch size (no published "
                     "memory saving to grow it on)")
    if compiler is CompilerKind.TRAINING_COMPILER and verdict is not Verdict.SKIP:
        move = _prior(CompilerKind.TORCH_COMPILE, category)
        assert move is not None
        notes.append("Training Compiler is frozen (AWS publishes no new releases): moving the "
                     "job to PyTorch 2.x makes torch.compile its compiler (about "
                     f"{move.speedup[0]:g}-{move.speedup[1]:g}x for {category} in PyTorch 2.0's "
                     "figures) on current DLCs")
    return notes


# --- Live prices (only when asked) -----------------------------------------------------------

_LIVE_PRICES: dict[tuple[str, str], float] = {}


def live_prices(instance_types: Iterable[str], region: str, *,
                client: Any = None) -> tuple[dict[str, float], list[str]]:
    """On-demand SageMaker training prices from the AWS Price List API, cached for the process.

    Only when asked (``advise --live-prices``): it needs credentials and the network, and synth
    never calls it. Returns the prices found and one line per instance type it could not price.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    found: dict[str, float] = {}
    problems: list[str] = []
    for instance_type in sorted(set(instance_types)):
        key = (region, instance_type)
        if key not in _LIVE_PRICES:
            try:
                client = client or _pricing_client()
                price = _price_list_price(client, instance_type, region)
            except (BotoCoreError, ClientError) as error:
                problems.append(f"{instance_type} in {region}: {error}")
                continue
            if price is None:
                problems.append(f"{instance_type} in {region}: no on-demand training price listed")
                continue
            _LIVE_PRICES[key] = price
        found[instance_type] = _LIVE_PRICES[key]
    return found, problems


def _pricing_client() -> Any:
    import botocore.session

    return botocore.session.get_session().create_client("pricing", region_name=PRICE_LIST_REGION)


def _price_list_price(client: Any, instance_type: str, region: str) -> float | None:
    """The first positive on-demand USD price of a training usage type (``USE1-Train:ml...``,
    not hosting, notebooks or spot) for the instance type in the region."""
    arguments: dict[str, Any] = {
        "ServiceCode": "AmazonSageMaker", "FormatVersion": "aws_v1", "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type}]}
    while True:
        page = client.get_products(**arguments)
        for item in page.get("PriceList", []):
            product = json.loads(item)
            attributes = product.get("product", {}).get("attributes", {})
            if not attributes.get("usagetype", "").partition(":")[0].endswith("Train"):
                continue
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dimension in term.get("priceDimensions", {}).values():
                    usd = float(dimension.get("pricePerUnit", {}).get("USD", 0))
                    if usd > 0:
                        return usd
        if not page.get("NextToken"):
            return None
        arguments["NextToken"] = page["NextToken"]
