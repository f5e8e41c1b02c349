"""The decision for a job already on Trainium, where every graph compiles through the Neuron SDK:
which Neuron path fits its family and PyTorch version, how its precision, shapes and run length
fare under Neuron's compiler (and its compile cache), what a run costs, and the GPU alternative
AWS's own claims compare the instance with. Nothing here tells a Trainium job to try Trainium.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiled_training.advice import cost
from compiled_training.advice.assessment import Decision, Factor, Judged, Option
from compiled_training.advice.judge import Judge
from compiled_training.advice.priors import (
    MIN_RUN_OVER_COMPILE,
    TRAINIUM_CATEGORIES,
    TRAINIUM_CLAIMS,
    WEEKS_PER_YEAR,
    TrainiumClaim,
)
from compiled_training.advice.workload import PYTORCH_FRAMEWORKS, Verdict, WorkloadProfile
from compiled_training.catalog import neuron
from compiled_training.catalog.instances import instance_family
from compiled_training.catalog.prices import PRICES_SOURCE, price_per_hour
from compiled_training.compilers import no_compiler, trainium_compiler

NO_GAIN = (1.0, 1.0)
"""Throughput over eager: on Trainium there is no eager run to compare with."""


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


class OnTrainium(Judge):
    """The Neuron path on the job's own Trainium instance: judged as any compiled job is, with
    Neuron's compile time and cache; the GPU alternative costed from AWS's claim where it has a
    price, said to be uncosted where it has none."""

    def __init__(self, profile: WorkloadProfile, prices: Mapping[str, float] | None) -> None:
        self.path = neuron_path(profile)
        super().__init__(profile, prices)

    def choose(self) -> tuple[str, str]:
        return self.path.compiler, self.path.reason

    def gain(self) -> tuple[tuple[float, float], float]:
        return NO_GAIN, self.compile.per_run[1] * MIN_RUN_OVER_COMPILE

    def costed(self) -> cost.Money:
        profile = self.profile
        price = price_per_hour(profile.instance_type, self.prices)
        if price is None:
            return cost.Money(cost.price_unknown(profile.instance_type))
        hourly = price * profile.instance_count
        per_run, runs = hourly * profile.hours_per_run, profile.runs_per_week * WEEKS_PER_YEAR
        compiling = hourly / 60 * self.compile.per_run[1]
        return cost.Money(f"{_usd(per_run)} a run, {_usd(per_run * runs)} a year, up to "
                          f"{_usd(compiling)} a run of it compiling", per_run, per_run * runs)

    def compiler_fit(self) -> Judged:
        # A version without an image on the family cannot be built: it must move first.
        if not self.module.enabled:
            return Judged(Verdict.SKIP, self.compiler_reason)
        return Judged(Verdict.ENABLE if self.path.has_image else Verdict.BENCHMARK,
                      self.compiler_reason)

    def model_fit(self, said: str) -> Judged:
        if self.category in TRAINIUM_CATEGORIES:
            return Judged(Verdict.ENABLE, f"{said}, what Neuron's training tutorials (BERT, GPT, "
                                          f"Llama) and AWS's Trainium figures are for")
        return Judged(Verdict.BENCHMARK, f"{said}: no published Neuron training figure for "
                                         f"{self.category} models (Neuron's tutorials and AWS's "
                                         f"claims are for transformers); measure the job's own "
                                         f"throughput")

    def precision(self) -> Judged:
        precision = self.profile.precision
        if precision == "bf16":
            return Judged(Verdict.ENABLE, "bf16: what Trainium trains in, natively (no loss "
                                          "scaler)")
        if precision == "fp16":
            return Judged(Verdict.BENCHMARK, (
                "fp16: the library refuses it on Trainium (the pipeline does not synthesize), as "
                "fp16 needs a loss scaler that torch-xla 2.9 (the newest Neuron images) no "
                "longer has, and Trainium computes in bf16 natively; switch to bf16 "
                "(hyperparameters['precision'] = 'bf16') first, then check the quality"))
        return Judged(Verdict.BENCHMARK, "fp32 only: Neuron's training guides train in bf16 "
                                         "(autocast); what fp32 costs on Trainium is not "
                                         "published: measure it")

    def shapes(self) -> Judged:
        if self.profile.static_shapes:
            return Judged(Verdict.ENABLE, "static shapes: one graph a step, compiled once and "
                                          "then cached")
        low, high = self.compile.first
        return Judged(Verdict.BENCHMARK, (
            f"dynamic shapes: each new shape is a new Neuron compilation ({low:g}-{high:g} min "
            f"for a BERT-Large step), and every shape's graphs fill the cache; "
            f"{self.shape_fix()} first"))

    def duration(self) -> Judged:
        minutes, compile = self.profile.hours_per_run * 60, self.compile
        if minutes < self.break_even:
            ways = ("lengthen the runs or train them on a GPU, where compiling is optional"
                    if compile.warm else
                    "precompile (Compiler.neuron_xla(precompile=True)), lengthen the runs, or "
                    "train them on a GPU, where compiling is optional")
            return Judged(Verdict.SKIP, (
                f"{minutes:.0f}-minute runs: the {compile.describe()} takes too much of each; "
                f"Neuron pays from about {self.break_even:.0f}-minute runs: {ways}"))
        return Judged(Verdict.ENABLE, f"{self.profile.hours_per_run:g} h runs amortise the "
                                      f"{compile.describe()}")

    def options(self, verdict: Verdict, limits: Mapping[Factor, Verdict]) -> tuple[Option, ...]:
        """The run on Trainium, and on each GPU AWS's claim compares it with that has a price."""
        claim, per_run = _claim(self.profile.instance_type), self.money.per_run
        if claim is None or per_run is None:
            return ()
        options = [Option(self.profile.instance_type, trainium_compiler().name,
                          (per_run, per_run), f"on-demand price ({PRICES_SOURCE})")]
        # AWS's claim: Trainium's cost to train is cost_factor of the GPU's (best, worst), so a
        # GPU's run is costed from the claim, and only where its SageMaker price is known.
        options += [Option(gpu, no_compiler().name,
                           (per_run / claim.cost_factor[1], per_run / claim.cost_factor[0]),
                           f"{claim.source}, against its eager run", claimed=True)
                    for gpu in claim.compared_with
                    if price_per_hour(gpu, self.prices) is not None]
        return tuple(options)

    def decide(self, verdict: Verdict, limits: Mapping[Factor, Verdict],
               options: tuple[Option, ...]) -> Decision:
        """The job stays on its instance; the reason says what AWS's claim makes of the GPUs."""
        reason = self._gpu_alternative(options)
        if limits[Factor.DURATION] is Verdict.SKIP:
            reason = f"runs this short cost less where compiling is optional, on a GPU: {reason}"
        return Decision(verdict, self.profile.instance_type, self.compiler, reason)

    def _gpu_alternative(self, options: tuple[Option, ...]) -> str:
        instance = self.profile.instance_type
        claim = _claim(instance)
        if claim is None:
            return f"no AWS claim compares {instance} with a GPU"
        head = (f"the GPU alternative AWS compares {instance_family(instance)} with "
                f"({claim.source}): ")
        give_price = "no recorded price (give one with prices= or --live-prices)"
        if self.money.per_run is None:
            return head + (f"{', '.join(claim.compared_with)}, uncosted: {instance} has "
                           f"{give_price}")
        costed = ", ".join(f"{o.instance_type} {_usd(o.dollars_per_run[0])}-"
                           f"{_usd(o.dollars_per_run[1])}" for o in options[1:])
        said = [f"{costed} a run against {_usd(self.money.per_run)} here, by AWS's claim "
                f"alone; a BenchmarkArm on it measures the job's own"] if costed else []
        priced = {o.instance_type for o in options}
        if uncosted := [gpu for gpu in claim.compared_with if gpu not in priced]:
            said.append(f"{', '.join(uncosted)} uncosted: {give_price}")
        return head + "; ".join(said)

    def notes(self, verdict: Verdict, limits: Mapping[Factor, Verdict], decision: Decision,
              options: tuple[Option, ...], batch: int | None) -> list[str]:
        if not self.module.enabled:
            return []
        notes = [self.path.move] if self.path.move else []
        if limits[Factor.PRECISION] is not Verdict.ENABLE:
            notes.append("set hyperparameters['precision'] to 'bf16': what Trainium trains in")
        if not self.profile.static_shapes:
            notes.append(f"first step: make the shapes static ({self.shape_fix()}); each new "
                         f"shape is a new Neuron compilation")
        cache = ("its runs after the first load their graphs from it" if self.compile.warm else
                 f"{self.compile.source}")
        notes.append(f"the pipeline keeps Neuron's compile cache under its S3 prefix "
                     f"(NEURON_COMPILE_CACHE_URL): {cache}; Compiler.neuron_xla(precompile=True) "
                     f"compiles ahead in parallel (neuron_parallel_compile)")
        return notes


def _usd(dollars: float) -> str:
    """Whole dollars, cents under ten: a small instance's run is not '$0'."""
    return f"${dollars:,.2f}" if dollars < 10 else f"${dollars:,.0f}"


def _claim(instance_type: str) -> TrainiumClaim | None:
    family = instance_family(instance_type)
    return next((claim for claim in TRAINIUM_CLAIMS if family in claim.families), None)
