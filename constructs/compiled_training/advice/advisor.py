"""The decision: which compiler, whether it pays, how much, and what to change to get it.

A compiler helps only where the workload fits: a GPU deep-learning graph, static shapes,
mixed precision, jobs long enough to amortise compilation, and enough money at stake. Each
factor sets the best verdict it allows; the verdict is the lowest of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from compiled_training.advice import cost
from compiled_training.advice.priors import (
    COMPILE_MINUTES,
    MIN_SAVING_FOR_A_BENCHMARK_USD,
    TC_BATCH_GROWTH,
    Prior,
    prior_for,
)
from compiled_training.advice.workload import (
    PYTORCH_FRAMEWORKS,
    Verdict,
    WorkloadProfile,
    model_category,
)
from compiled_training.catalog.compilers import CompilerKind, compiler_name
from compiled_training.catalog.dlc import training_compiler_releases
from compiled_training.catalog.instances import (
    TRAINING_COMPILER_FAMILIES,
    accelerator,
    instance_family,
)
from compiled_training_runtime import contract

FACTORS = ("framework", "instance", "compiler", "model", "precision", "shapes", "bottleneck",
           "duration", "money")


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


def assess_workload(profile: WorkloadProfile, *,
                    prices: Mapping[str, float] | None = None) -> Assessment:
    """Which compiler, and whether to enable it for this workload: ENABLE, BENCHMARK or SKIP.

    ``prices`` (USD per instance-hour by instance type) come before the built-in table; an
    instance type neither knows still gets its verdict, with the money marked unknown.
    """
    compiler, reasons = choose_compiler(profile)
    category, known = model_category(profile.model_family)
    prior = prior_for(compiler, category)
    speedup = cost.speedup(profile, prior)
    break_even = cost.break_even_minutes(speedup)
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
    money = cost.money(profile, compiler, speedup, prices)
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
        move = prior_for(CompilerKind.TORCH_COMPILE, category)
        assert move is not None
        notes.append("Training Compiler is frozen (AWS publishes no new releases): moving the "
                     "job to PyTorch 2.x makes torch.compile its compiler (about "
                     f"{move.speedup[0]:g}-{move.speedup[1]:g}x for {category} in PyTorch 2.0's "
                     "figures) on current DLCs")
    return notes
