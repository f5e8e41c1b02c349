"""The decision: which compiler on which accelerator, whether it pays, how much, and what to
change to get it.

A compiler helps only where the workload fits: a GPU deep-learning graph, static shapes,
mixed precision, jobs long enough to amortise compilation, and enough money at stake. Each
factor sets the best verdict it allows; the verdict is the lowest of them. Then the same run
is costed on Trainium from AWS's published claims: where Trainium's expected cost per run is
the lowest, the decision is to benchmark it there (vendor claims never ENABLE on their own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from compiled_training.advice import cost
from compiled_training.advice.assessment import (
    Assessment,
    Decision,
    Judged,
    Option,
    allows,
    bottleneck,
    comparison,
    framework_reason,
    lowest,
)
from compiled_training.advice.priors import (
    MIN_MINUTES_PER_RUN,
    MIN_SAVING_FOR_A_BENCHMARK_USD,
    TRAINIUM_CATEGORIES,
    TRAINIUM_CLAIMS,
    WEEKS_PER_YEAR,
)
from compiled_training.advice.trainium import assess_on_trainium, neuron_path
from compiled_training.advice.workload import (
    PYTORCH_FRAMEWORKS,
    Verdict,
    WorkloadProfile,
    model_category,
)
from compiled_training.catalog.instances import (
    accelerator,
    gpus_left_idle,
    instance_family,
    is_gpu,
)
from compiled_training.catalog.neuron import is_trainium
from compiled_training.catalog.prices import PRICES_SOURCE
from compiled_training.compilers import (
    CompilerModule,
    Prior,
    compiler_module,
    gpu_compilers,
    no_compiler,
)
from compiled_training_runtime import contract


def choose_compiler(profile: WorkloadProfile) -> tuple[str, dict[str, str]]:
    """The compiler for the job's framework, version and instance, with the reasons for it.

    On Trainium, its Neuron path. On NVIDIA GPUs, each compiler in its order of preference says
    whether it fits (Training Compiler where its support matrix, the SageMaker SDK's, has a
    release for the version on the instance family; torch.compile for PyTorch 2.x): the first
    that fits, with why those before it did not; nothing otherwise.
    """
    reasons = {"framework": framework_reason(profile), "instance": _instance_reason(profile)}
    if is_trainium(profile.instance_type):
        path = neuron_path(profile)
        return path.compiler, reasons | {"compiler": path.reason}
    if not all(_pytorch_on_nvidia(profile)):
        return no_compiler().name, reasons | {
            "compiler": "none: neither compiler applies (see framework and instance)"}
    category = model_category(profile.model_family)[0]
    refusals: list[str] = []
    for module in gpu_compilers():
        pick = module.choose_on_gpu(profile, category)
        if pick and pick.fits:
            return module.name, reasons | {"compiler": "; ".join([pick.reason, *refusals])}
        if pick:
            refusals.append(pick.reason)
    return no_compiler().name, reasons | {"compiler": f"none: {', and '.join(refusals)}"}


def _pytorch_on_nvidia(profile: WorkloadProfile) -> tuple[bool, bool]:
    """Whether the job is PyTorch, and whether its instance has NVIDIA GPUs: both compilers
    need both."""
    return profile.framework in PYTORCH_FRAMEWORKS, accelerator(profile.instance_type) == "nvidia"


def _instance_reason(profile: WorkloadProfile) -> str:
    instance, family = profile.instance_type, instance_family(profile.instance_type)
    return {
        "nvidia": f"{instance}: an NVIDIA GPU instance ({family}), what both compilers target",
        "amd": f"{instance}: AMD GPUs, which no CUDA image and neither compiler runs on",
        "trainium": f"{instance}: Trainium, where every graph compiles through the Neuron SDK",
        "inferentia": f"{instance}: Inferentia is for inference, not these compilers",
        "cpu": f"{instance} is a CPU instance; both compilers target NVIDIA GPUs",
    }[accelerator(instance)]


def assess_workload(profile: WorkloadProfile, *,
                    prices: Mapping[str, float] | None = None) -> Assessment:
    """Which compiler, and whether to enable it for this workload: ENABLE, BENCHMARK or SKIP.

    ``prices`` (USD per instance-hour by instance type) come before the built-in table; an
    instance type neither knows still gets its verdict, with the money marked unknown.
    """
    if is_trainium(profile.instance_type):
        return assess_on_trainium(profile, prices)
    compiler, reasons = choose_compiler(profile)
    module = compiler_module(compiler)
    category, known = model_category(profile.model_family)
    prior = module.prior(category)
    speedup = cost.speedup(profile, prior)
    compile = cost.compile_minutes(profile, compiler)
    break_even = cost.break_even_minutes(speedup, compile)
    pytorch, nvidia = _pytorch_on_nvidia(profile)
    limits = {"framework": allows(pytorch), "instance": allows(nvidia),
              "compiler": allows(module.enabled)}
    for factor, (limit, reason) in {
        "model": _model(profile.model_family, category, known, module, prior),
        "precision": _precision(profile, module),
        "shapes": _shapes(profile, module, category),
        "bottleneck": bottleneck(profile),
        "duration": _duration(profile, module, speedup, break_even, compile),
    }.items():
        limits[factor], reasons[factor] = limit, reason
    money = cost.money(profile, compiler, speedup, prices, compile)
    reasons["money"] = money.reason
    limits["money"] = Verdict.ENABLE
    verdict = min(limits.values(), key=lambda v: v.rank)
    if verdict is Verdict.BENCHMARK and money.at_stake < MIN_SAVING_FOR_A_BENCHMARK_USD:
        verdict = limits["money"] = Verdict.SKIP
        reasons["money"] += (f": under the ${MIN_SAVING_FOR_A_BENCHMARK_USD:,.0f} a year that "
                             "pays for a benchmarking sprint")

    unfit = _trainium_fits(profile, category, limits)
    options = _options(profile, module, verdict, speedup, money.per_run, category, unfit)
    decision = _decide(profile, compiler, verdict, options, unfit)
    batch = lr = None
    if verdict is Verdict.ENABLE and module.batch_growth and profile.batch_size:
        batch = int(profile.batch_size * module.batch_growth)
        if profile.learning_rate:
            # The runtime's own rule: a job given base_batch_size trains at this rate.
            lr = contract.scaled_learning_rate(profile.learning_rate, profile.batch_size, batch)
    return Assessment(
        profile=profile, compiler=compiler, verdict=verdict, reasons=reasons, limits=limits,
        speedup=speedup, compile_minutes=compile.per_run, break_even_minutes=break_even,
        dollars_per_run=money.per_run, dollars_per_year=money.per_year,
        saving_per_year=money.saving, recommended_batch_size=batch, recommended_learning_rate=lr,
        notes=_notes(profile, module, category, verdict, batch) + _trainium_notes(
            profile, decision, options),
        options=options, decision=decision,
    )


def _trainium_fits(profile: WorkloadProfile, category: str,
                   limits: Mapping[str, Verdict]) -> str | None:
    """Why Trainium is not costed for this workload, or None where it is."""
    if profile.framework not in PYTORCH_FRAMEWORKS:
        return f"{profile.framework} does not run on the Neuron SDK's PyTorch"
    if accelerator(profile.instance_type) != "nvidia":
        return f"{profile.instance_type} is not a GPU job to compare Trainium with"
    if category not in TRAINIUM_CATEGORIES:
        return (f"no published Trainium figure for {category} models (AWS's claims and Neuron's "
                f"training tutorials are for {', '.join(TRAINIUM_CATEGORIES)}s)")
    if not profile.static_shapes:
        return ("dynamic shapes: neuronx-cc compiles per shape, for minutes each; make them "
                "static first")
    if limits["duration"] is Verdict.SKIP or profile.hours_per_run * 60 < MIN_MINUTES_PER_RUN:
        return "runs too short to amortise a compiler, Neuron's included"
    return None


def _options(profile: WorkloadProfile, compiler: CompilerModule, verdict: Verdict,
             speedup: tuple[float, float], per_run: float | None, category: str,
             unfit: str | None) -> tuple[Option, ...]:
    """The run costed each way: on the job's GPU from the price list and the compiler's
    prior, on Trainium from AWS's claims against the GPU's eager run."""
    if per_run is None:
        return ()
    options = [Option(profile.instance_type, no_compiler().name, (per_run, per_run),
                      f"on-demand price ({PRICES_SOURCE})")]
    if compiler.enabled and verdict is not Verdict.SKIP:
        prior = compiler.prior(category)
        options.append(Option(profile.instance_type, compiler.name,
                              (per_run / speedup[1], per_run / speedup[0]),
                              prior.source if prior else "no prior"))
    if unfit is None:
        options += [Option(claim.instance_type, claim.compiler,
                           (per_run * claim.cost_factor[0], per_run * claim.cost_factor[1]),
                           claim.source + ("" if claim.public_image else
                                           ", no public SageMaker image yet"), claimed=True)
                    for claim in TRAINIUM_CLAIMS]
    return tuple(options)


def _decide(profile: WorkloadProfile, compiler: str, verdict: Verdict,
            options: tuple[Option, ...], unfit: str | None) -> Decision:
    """Trainium where its expected cost per run is the lowest and the most it could save
    pays for a benchmark; the job's own GPU otherwise."""
    on_gpu = Decision(verdict, profile.instance_type, compiler, "")
    if unfit is not None or not options:
        return replace(on_gpu, reason=f"Trainium not costed: {unfit or 'price unknown'}")
    runs = profile.runs_per_week * WEEKS_PER_YEAR
    gpu = min((o for o in options if o.instance_type == profile.instance_type),
              key=lambda o: o.expected)
    public = {claim.instance_type for claim in TRAINIUM_CLAIMS if claim.public_image}
    reason = (f"expected cost a run: {', '.join(o.describe() for o in options)}: "
              f"{comparison(options)}")
    near = lowest(options)
    benchmarkable = [o for o in near if o.instance_type in public]
    if benchmarkable and not any(o.instance_type == profile.instance_type for o in near):
        trainium = benchmarkable[0]  # the cheapest Trainium SageMaker has an image for
        if (gpu.expected - trainium.dollars_per_run[0]) * runs >= MIN_SAVING_FOR_A_BENCHMARK_USD:
            return Decision(Verdict.BENCHMARK, trainium.instance_type, trainium.compiler,
                            f"{reason}; measure {trainium.instance_type} before moving")
    return replace(on_gpu, reason=reason)


def _trainium_notes(profile: WorkloadProfile, decision: Decision,
                    options: tuple[Option, ...]) -> list[str]:
    if not is_trainium(decision.instance_type):
        if any(is_trainium(o.instance_type) for o in options):
            return ["Trainium could still cost less (AWS's claims reach below the GPU's "
                    "expected cost), not by the expected margin: a BenchmarkArm on "
                    "ml.trn1.32xlarge with Compiler.neuron_xla() beside the GPU arms measures it"]
        return []
    return [f"put Trainium on trial beside the GPU job: CompilerBenchmark(arms=[BenchmarkArm("
            f"'trainium', Compiler.neuron_xla(precompile=True), '{decision.instance_type}', "
            f"<instances>, Framework.pytorch('2.9.0'))]); it ships at "
            f">= {contract.DEFAULT_SPEEDUP_THRESHOLD:.0%} more epochs per dollar without "
            f"quality loss"]


def _model(model_family: str, category: str, known: bool, compiler: CompilerModule,
           prior: Prior | None) -> Judged:
    said = (f"{model_family}: {category}" if known else
            f"{model_family}: not a family this advisor knows, treated as custom")
    if category == "tabular":
        return Verdict.SKIP, f"{said} (gradient-boosted trees build no deep-learning graph)"
    if prior is None:
        return Verdict.ENABLE, said
    title = compiler.title
    if prior.published:
        return Verdict.ENABLE, f"{said}, with published {title} gains ({prior.source})"
    return Verdict.BENCHMARK, (f"{said}, without a published {title} figure of its own "
                               f"({prior.source}); measure before shipping")


def _precision(profile: WorkloadProfile, compiler: CompilerModule) -> Judged:
    if profile.precision != "fp32":
        return Verdict.ENABLE, f"{profile.precision} mixed precision suits {compiler.title}"
    return Verdict.BENCHMARK, compiler.fp32_reason


_SHAPE_FIXES = {
    "transformer": "pad sequences to a fixed length or bucket them into a few lengths",
    "vision": "resize or crop images to fixed sizes",
    "diffusion": "resize or crop images to a few fixed resolutions",
}
_ANY_SHAPE_FIX = "pad or bucket sequences, resize images to fixed crops"


def _shapes(profile: WorkloadProfile, compiler: CompilerModule, category: str) -> Judged:
    if profile.static_shapes:
        return Verdict.ENABLE, "static shapes: one graph, compiled once"
    return Verdict.BENCHMARK, compiler.dynamic_shapes_reason(
        _SHAPE_FIXES.get(category, _ANY_SHAPE_FIX))


def _duration(profile: WorkloadProfile, compiler: CompilerModule, speedup: tuple[float, float],
              break_even: float, compile: cost.CompileMinutes) -> Judged:
    minutes = profile.hours_per_run * 60
    if not compiler.enabled:
        return Verdict.ENABLE, "no compiler: no compile time to amortise"
    if minutes < break_even:
        low, high = (minutes * (1 - 1 / s) for s in speedup)
        return Verdict.SKIP, (f"{minutes:.0f}-minute runs: {compile.describe()} exceeds or eats "
                              f"the saving ({low:.1f}-{high:.1f} min); break-even is "
                              f"{break_even:.0f} min")
    return Verdict.ENABLE, f"{profile.hours_per_run:g} h runs amortise the {compile.describe()}"


def _notes(profile: WorkloadProfile, compiler: CompilerModule, category: str, verdict: Verdict,
           batch: int | None) -> list[str]:
    """What to do next."""
    notes = []
    if verdict is Verdict.BENCHMARK:
        if not profile.static_shapes:
            notes.append("first step: make the shapes static "
                         f"({_SHAPE_FIXES.get(category, _ANY_SHAPE_FIX)})")
        notes.append(f"deploy a CompilerBenchmark (A/B pipeline) of "
                     f"{compiler.title} against no compiler and ship only at >= "
                     f"{contract.DEFAULT_SPEEDUP_THRESHOLD:.0%} speedup without quality loss")
    if batch is not None:
        notes.append(f"raise the batch from {profile.batch_size} to {batch} (the compiler frees "
                     "memory: AWS's tested-models table) and scale the learning rate to match")
    notes += compiler.notes(profile, category, verdict is Verdict.ENABLE,
                            verdict is Verdict.SKIP)
    if launcher_needed := _launcher_note(profile, compiler):
        notes.append(launcher_needed)
    return notes


def _launcher_note(profile: WorkloadProfile, compiler: CompilerModule) -> str | None:
    """What a deep-learning job on several GPUs needs so that each of them trains; nothing
    for Training Compiler, whose launcher (pytorchxla) the constructs set by default."""
    gpus, idle = gpus_left_idle(profile.instance_type, profile.instance_count)
    if (profile.framework not in PYTORCH_FRAMEWORKS or not is_gpu(profile.instance_type)
            or gpus == 1 or compiler.sets_own_launcher):
        return None
    return (f"train on all {gpus} GPUs ({profile.instance_count} x {profile.instance_type}) "
            f"under torchrun (distribution torch_distributed, one process per GPU) if the job "
            f"does not already: with no distribution SageMaker starts one process per "
            f"instance and {idle} GPUs sit idle"
            + (f" while the {profile.instance_count} instances train separate models"
               if profile.instance_count > 1 else ""))
