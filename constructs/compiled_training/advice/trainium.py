"""The decision for a job already on Trainium, where every graph compiles through the Neuron SDK:
which Neuron path fits its family and PyTorch version, how its precision, shapes and run length
fare under Neuron's compiler (and its compile cache), what a run costs, and the GPU alternative
AWS's own claims compare the instance with. Nothing here tells a Trainium job to try Trainium.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiled_training.advice import cost
from compiled_training.advice.assessment import (
    FACTORS,
    Assessment,
    Decision,
    Judged,
    Option,
    allows,
    bottleneck,
    framework_reason,
)
from compiled_training.advice.priors import (
    MIN_RUN_OVER_COMPILE,
    TRAINIUM_CATEGORIES,
    TRAINIUM_CLAIMS,
    WEEKS_PER_YEAR,
    TrainiumClaim,
)
from compiled_training.advice.workload import (
    PYTORCH_FRAMEWORKS,
    Verdict,
    WorkloadProfile,
    model_category,
)
from compiled_training.catalog import neuron
from compiled_training.catalog.instances import instance_family
from compiled_training.catalog.prices import PRICES_SOURCE, price_per_hour
from compiled_training.compilers import compiler_module, no_compiler, trainium_compiler

NO_GAIN = (1.0, 1.0)
"""Throughput over eager: on Trainium there is no eager run to compare with."""
_SHAPE_FIX = "pad or bucket inputs into a few fixed shapes (sequence lengths, image sizes)"


# Neuron's containers release notes: images of Neuron SDK releases before 2.21 are past AWS's
# support (the catalog's rows cite it); PyTorch 1.11.0's legacy image is Neuron SDK 2.4.0's.
SUPPORTED_SINCE_SDK = (2, 21)


@dataclass(frozen=True)
class NeuronPath:
    """The Neuron path for a job: the compiler, why, whether its version has an image on the
    family, and what to move to where its image is missing or past support."""

    compiler: str
    reason: str
    has_image: bool = True
    move: str | None = None


def neuron_path(profile: WorkloadProfile) -> NeuronPath:
    """The Neuron path for the job's family and PyTorch version, and why."""
    family = instance_family(profile.instance_type)
    if profile.framework not in PYTORCH_FRAMEWORKS:
        return NeuronPath(no_compiler().name, f"none: {profile.framework} does not run on the "
                                              f"Neuron SDK's training images (PyTorch and "
                                              f"Hugging Face only)", False)
    has_image, image, move = _image(profile, family)
    path = trainium_compiler()
    return NeuronPath(path.name, path.choose_on_trainium(profile, family, image).reason,
                      has_image, move)


def _image(profile: WorkloadProfile, family: str) -> tuple[bool, str, str | None]:
    """Whether the job's version has a Neuron training image on the family, which, or why
    not; and what to move to where it has none or only one past AWS's support."""
    version = profile.framework_version
    line = neuron.HUGGINGFACE if profile.framework == "huggingface" else neuron.PYTORCH
    images = [image for image in neuron.neuron_images(line) if family in image.families]
    newest = (f"{images[0].describe()} (Neuron SDK {images[0].neuron_sdk})" if images
              else None)
    if version in ("1.11", "1.11.0") and line == neuron.PYTORCH:
        problem = neuron.legacy_problem(profile.instance_type)
        move = (f"PyTorch 1.11.0's image is Neuron SDK 2.4.0's (2022), long past AWS's support: "
                f"move to {newest}")
        if problem:
            return False, problem, move
        return True, ("PyTorch 1.11.0 trains on the legacy pytorch-training-neuron image "
                      "(Neuron SDK 2.4.0), as both SageMaker SDKs resolve it"), move
    if not images:
        return False, (f"AWS publishes no {neuron.repository(line)} image for {family}"), None
    if version is None:
        return True, f"{neuron.repository(line)} images run on {family} (newest: {newest})", None
    found = [image for image in images
             if image.pytorch == version or image.pytorch.startswith(version + ".")]
    if not found:
        return False, (f"PyTorch {version} has no {neuron.repository(line)} image on {family} "
                       f"(the newest is {newest}): train on one that has"), f"move to {newest}"
    image = found[0]
    past = (f"PyTorch {version}'s newest Neuron image is Neuron SDK {image.neuron_sdk}'s, past "
            f"AWS's support (releases before 2.21): move to {newest}"
            if cost.minor(image.neuron_sdk) < SUPPORTED_SINCE_SDK else None)
    return True, f"PyTorch {version} trains on {neuron.repository(line)}:{image.tag}", past


def assess_on_trainium(profile: WorkloadProfile,
                       prices: Mapping[str, float] | None) -> Assessment:
    """The verdict for the Neuron path on the job's own Trainium instance: judged as any
    compiled job is, with Neuron's compile time and cache; the GPU alternative costed from
    AWS's claim where it has a price, said to be uncosted where it has none."""
    path = neuron_path(profile)
    compiler = path.compiler
    category, known = model_category(profile.model_family)
    compile = cost.compile_minutes(profile, compiler)
    break_even = compile.per_run[1] * MIN_RUN_OVER_COMPILE
    neuron_runs = compiler_module(compiler).enabled
    reasons = {"framework": framework_reason(profile),
               "instance": (f"{profile.instance_type}: Trainium, where every graph compiles "
                            f"through the Neuron SDK (neuronx-cc): the compiler is not optional"),
               "compiler": path.reason}
    # A version without an image on the family cannot be built: it must move first.
    limits = {"framework": allows(neuron_runs), "instance": Verdict.ENABLE,
              "compiler": (Verdict.SKIP if not neuron_runs else Verdict.ENABLE
                           if path.has_image else Verdict.BENCHMARK)}
    for factor, (limit, reason) in {
        "model": _model(profile.model_family, category, known),
        "precision": _precision(profile.precision),
        "shapes": _shapes(profile, compile),
        "bottleneck": bottleneck(profile),
        "duration": _duration(profile, compile, break_even),
    }.items():
        limits[factor], reasons[factor] = limit, reason
    per_run, per_year, reasons["money"] = _money(profile, prices, compile)
    limits["money"] = Verdict.ENABLE
    verdict = min(limits.values(), key=lambda v: v.rank)
    options, costed = _options(profile, per_run, prices)
    if limits["duration"] is Verdict.SKIP:
        costed = f"runs this short cost less where compiling is optional, on a GPU: {costed}"
    decision = Decision(verdict, profile.instance_type, compiler, costed)
    assert list(reasons) == list(FACTORS)
    return Assessment(
        profile=profile, compiler=compiler, verdict=verdict, reasons=reasons, limits=limits,
        speedup=NO_GAIN, compile_minutes=compile.per_run, break_even_minutes=break_even,
        dollars_per_run=per_run, dollars_per_year=per_year, saving_per_year=None,
        notes=_notes(profile, limits, compile, path) if neuron_runs else [],
        options=options, decision=decision)


def _model(model_family: str, category: str, known: bool) -> Judged:
    said = (f"{model_family}: {category}" if known else
            f"{model_family}: not a family this advisor knows, treated as custom")
    if category == "tabular":
        return Verdict.SKIP, f"{said} (gradient-boosted trees build no deep-learning graph)"
    if category in TRAINIUM_CATEGORIES:
        return Verdict.ENABLE, (f"{said}, what Neuron's training tutorials (BERT, GPT, Llama) "
                                f"and AWS's Trainium figures are for")
    return Verdict.BENCHMARK, (f"{said}: no published Neuron training figure for {category} "
                               f"models (Neuron's tutorials and AWS's claims are for "
                               f"transformers); measure the job's own throughput")


def _precision(precision: str) -> Judged:
    if precision == "bf16":
        return Verdict.ENABLE, "bf16: what Trainium trains in, natively (no loss scaler)"
    if precision == "fp16":
        return Verdict.BENCHMARK, (
            "fp16: the library refuses it on Trainium (the pipeline does not synthesize), as "
            "fp16 needs a loss scaler that torch-xla 2.9 (the newest Neuron images) no longer "
            "has, and Trainium computes in bf16 natively; switch to bf16 "
            "(hyperparameters['precision'] = 'bf16') first, then check the quality")
    return Verdict.BENCHMARK, ("fp32 only: Neuron's training guides train in bf16 (autocast); "
                               "what fp32 costs on Trainium is not published: measure it")


def _shapes(profile: WorkloadProfile, compile: cost.CompileMinutes) -> Judged:
    if profile.static_shapes:
        return Verdict.ENABLE, "static shapes: one graph a step, compiled once and then cached"
    low, high = compile.first
    return Verdict.BENCHMARK, (
        f"dynamic shapes: each new shape is a new Neuron compilation ({low:g}-{high:g} min "
        f"for a BERT-Large step), and every shape's graphs fill the cache; {_SHAPE_FIX} first")


def _duration(profile: WorkloadProfile, compile: cost.CompileMinutes,
              break_even: float) -> Judged:
    minutes = profile.hours_per_run * 60
    if minutes < break_even:
        ways = ("lengthen the runs or train them on a GPU, where compiling is optional"
                if compile.warm else
                "precompile (Compiler.neuron_xla(precompile=True)), lengthen the runs, or train "
                "them on a GPU, where compiling is optional")
        return Verdict.SKIP, (
            f"{minutes:.0f}-minute runs: the {compile.describe()} takes too much of each; "
            f"Neuron pays from about {break_even:.0f}-minute runs: {ways}")
    return Verdict.ENABLE, f"{profile.hours_per_run:g} h runs amortise the {compile.describe()}"


def _money(profile: WorkloadProfile, prices: Mapping[str, float] | None,
           compile: cost.CompileMinutes) -> tuple[float | None, float | None, str]:
    price = price_per_hour(profile.instance_type, prices)
    if price is None:
        return None, None, cost.price_unknown(profile.instance_type)
    hourly = price * profile.instance_count
    per_run, runs = hourly * profile.hours_per_run, profile.runs_per_week * WEEKS_PER_YEAR
    compiling = hourly / 60 * compile.per_run[1]
    return per_run, per_run * runs, (
        f"{_usd(per_run)} a run, {_usd(per_run * runs)} a year, up to {_usd(compiling)} a run "
        f"of it compiling")


def _usd(dollars: float) -> str:
    """Whole dollars, cents under ten: a small instance's run is not '$0'."""
    return f"${dollars:,.2f}" if dollars < 10 else f"${dollars:,.0f}"


def _claim(instance_type: str) -> TrainiumClaim | None:
    family = instance_family(instance_type)
    return next((claim for claim in TRAINIUM_CLAIMS if family in claim.families), None)


def _options(profile: WorkloadProfile, per_run: float | None,
             prices: Mapping[str, float] | None) -> tuple[tuple[Option, ...], str]:
    """The run on Trainium, and on each GPU AWS's claim compares it with: from the claim,
    where that GPU has a price; uncosted where it has none. And the decision's reason."""
    claim = _claim(profile.instance_type)
    if claim is None:
        return (), f"no AWS claim compares {profile.instance_type} with a GPU"
    head = (f"the GPU alternative AWS compares {instance_family(profile.instance_type)} with "
            f"({claim.source}): ")
    if per_run is None:
        return (), head + (f"{', '.join(claim.compared_with)}, uncosted: "
                           f"{profile.instance_type} has no recorded price (give one with "
                           f"prices= or --live-prices)")
    options = [Option(profile.instance_type, trainium_compiler().name, (per_run, per_run),
                      f"on-demand price ({PRICES_SOURCE})")]
    uncosted = []
    for gpu in claim.compared_with:
        if price_per_hour(gpu, prices) is None:
            uncosted.append(gpu)
            continue
        # AWS's claim: Trainium's cost to train is cost_factor of the GPU's (best, worst), so
        # the GPU's run is costed from the claim; the GPU is costed only where SageMaker's
        # price for it is recorded (or given), as the "cited price" asks.
        options.append(Option(gpu, no_compiler().name,
                              (per_run / claim.cost_factor[1], per_run / claim.cost_factor[0]),
                              f"{claim.source}, against its eager run", claimed=True))
    costed = ", ".join(f"{o.instance_type} {_usd(o.dollars_per_run[0])}-"
                       f"{_usd(o.dollars_per_run[1])}" for o in options[1:])
    reason = head + (f"{costed} a run against {_usd(per_run)} here, by AWS's claim alone; a "
               f"BenchmarkArm on it measures the job's own" if costed else "")
    if uncosted:
        reason += ("; " if costed else "") + (
            f"{', '.join(uncosted)} uncosted: no recorded price (give one with prices= or "
            f"--live-prices)")
    return tuple(options), reason


def _notes(profile: WorkloadProfile, limits: Mapping[str, Verdict],
           compile: cost.CompileMinutes, path: NeuronPath) -> list[str]:
    notes = [path.move] if path.move else []
    if limits["precision"] is not Verdict.ENABLE:
        notes.append("set hyperparameters['precision'] to 'bf16': what Trainium trains in")
    if not profile.static_shapes:
        notes.append(f"first step: make the shapes static ({_SHAPE_FIX}); each new shape is "
                     f"a new Neuron compilation")
    cache = ("its runs after the first load their graphs from it" if compile.warm else
             f"{compile.source}")
    notes.append(f"the pipeline keeps Neuron's compile cache under its S3 prefix "
                 f"(NEURON_COMPILE_CACHE_URL): {cache}; Compiler.neuron_xla(precompile=True) "
                 f"compiles ahead in parallel (neuron_parallel_compile)")
    return notes
