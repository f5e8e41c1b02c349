"""A job on a GPU (or any instance but Trainium): the compiler that fits it, its published gain
against its compile time, and the same run costed on Trainium from AWS's claims. Where
Trainium's expected cost a run is the lowest, the decision is to benchmark it there: vendor
claims never ENABLE on their own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from compiled_training.advice import cost
from compiled_training.advice.assessment import (
    Decision,
    Factor,
    Judged,
    Option,
    comparison,
    lowest,
)
from compiled_training.advice.judge import Judge, allows
from compiled_training.advice.priors import (
    MIN_MINUTES_PER_RUN,
    MIN_SAVING_FOR_A_BENCHMARK_USD,
    TRAINIUM_CATEGORIES,
    TRAINIUM_CLAIMS,
    WEEKS_PER_YEAR,
)
from compiled_training.advice.workload import PYTORCH_FRAMEWORKS, Verdict
from compiled_training.catalog.instances import accelerator, gpus_left_idle, is_gpu
from compiled_training.catalog.neuron import is_trainium
from compiled_training.catalog.prices import PRICES_SOURCE
from compiled_training.compilers import compiler_module, gpu_compilers, no_compiler
from compiled_training_runtime import contract


class OnGpu(Judge):
    def choose(self) -> tuple[str, str]:
        """Each compiler, in its order of preference, says whether it fits a PyTorch job on
        NVIDIA GPUs: the first that fits, with why those before it did not; none otherwise."""
        if not self._pytorch_on_nvidia():
            return no_compiler().name, "none: neither compiler applies (see framework and instance)"
        refusals: list[str] = []
        for module in gpu_compilers():
            pick = module.choose_on_gpu(self.profile, self.category)
            if pick and pick.fits:
                return module.name, "; ".join([pick.reason, *refusals])
            if pick:
                refusals.append(pick.reason)
        return no_compiler().name, f"none: {', and '.join(refusals)}"

    def _pytorch_on_nvidia(self) -> bool:
        return (self.profile.framework in PYTORCH_FRAMEWORKS
                and accelerator(self.profile.instance_type) == "nvidia")

    def gain(self) -> tuple[tuple[float, float], float]:
        speedup = cost.speedup(self.profile, self.module.prior(self.category))
        return speedup, cost.break_even_minutes(speedup, self.compile)

    def costed(self) -> cost.Money:
        return cost.money(self.profile, self.compiler, self.speedup, self.prices, self.compile)

    def compiler_fit(self) -> Judged:
        return Judged(allows(self.module.enabled), self.compiler_reason)

    def model_fit(self, said: str) -> Judged:
        prior, title = self.module.prior(self.category), self.module.title
        if prior is None:
            return Judged(Verdict.ENABLE, said)
        if prior.published:
            return Judged(Verdict.ENABLE, f"{said}, with published {title} gains ({prior.source})")
        return Judged(Verdict.BENCHMARK, f"{said}, without a published {title} figure of its "
                                         f"own ({prior.source}); measure before shipping")

    def precision(self) -> Judged:
        if self.profile.precision != "fp32":
            return Judged(Verdict.ENABLE, f"{self.profile.precision} mixed precision suits "
                                          f"{self.module.title}")
        return Judged(Verdict.BENCHMARK, self.module.fp32_reason)

    def shapes(self) -> Judged:
        if self.profile.static_shapes:
            return Judged(Verdict.ENABLE, "static shapes: one graph, compiled once")
        return Judged(Verdict.BENCHMARK, self.module.dynamic_shapes_reason(self.shape_fix()))

    def duration(self) -> Judged:
        minutes, compile = self.profile.hours_per_run * 60, self.compile
        if not self.module.enabled:
            return Judged(Verdict.ENABLE, "no compiler: no compile time to amortise")
        if minutes < self.break_even:
            low, high = (minutes * (1 - 1 / s) for s in self.speedup)
            return Judged(Verdict.SKIP, f"{minutes:.0f}-minute runs: {compile.describe()} exceeds "
                                        f"or eats the saving ({low:.1f}-{high:.1f} min); "
                                        f"break-even is {self.break_even:.0f} min")
        return Judged(Verdict.ENABLE, f"{self.profile.hours_per_run:g} h runs amortise the "
                                      f"{compile.describe()}")

    def _trainium_unfit(self, limits: Mapping[Factor, Verdict]) -> str | None:
        """Why Trainium is not costed for this workload, or None where it is."""
        profile = self.profile
        if profile.framework not in PYTORCH_FRAMEWORKS:
            return f"{profile.framework} does not run on the Neuron SDK's PyTorch"
        if accelerator(profile.instance_type) != "nvidia":
            return f"{profile.instance_type} is not a GPU job to compare Trainium with"
        if self.category not in TRAINIUM_CATEGORIES:
            return (f"no published Trainium figure for {self.category} models (AWS's claims and "
                    f"Neuron's training tutorials are for {', '.join(TRAINIUM_CATEGORIES)}s)")
        if not profile.static_shapes:
            return ("dynamic shapes: neuronx-cc compiles per shape, for minutes each; make them "
                    "static first")
        if (limits[Factor.DURATION] is Verdict.SKIP
                or profile.hours_per_run * 60 < MIN_MINUTES_PER_RUN):
            return "runs too short to amortise a compiler, Neuron's included"
        return None

    def options(self, verdict: Verdict, limits: Mapping[Factor, Verdict]) -> tuple[Option, ...]:
        """On the job's GPU from the price list and the compiler's prior, on Trainium from AWS's
        claims against the GPU's eager run."""
        per_run = self.money.per_run
        if per_run is None:
            return ()
        options = [Option(self.profile.instance_type, no_compiler().name, (per_run, per_run),
                          f"on-demand price ({PRICES_SOURCE})")]
        if self.module.enabled and verdict is not Verdict.SKIP:
            prior = self.module.prior(self.category)
            options.append(Option(self.profile.instance_type, self.compiler,
                                  (per_run / self.speedup[1], per_run / self.speedup[0]),
                                  prior.source if prior else "no prior"))
        if self._trainium_unfit(limits) is None:
            options += [Option(claim.instance_type, claim.compiler,
                               (per_run * claim.cost_factor[0], per_run * claim.cost_factor[1]),
                               claim.source + ("" if claim.public_image else
                                               ", no public SageMaker image yet"), claimed=True)
                        for claim in TRAINIUM_CLAIMS]
        return tuple(options)

    def decide(self, verdict: Verdict, limits: Mapping[Factor, Verdict],
               options: tuple[Option, ...]) -> Decision:
        """Trainium where its expected cost a run is the lowest and the most it could save pays
        for a benchmark; the job's own GPU otherwise."""
        profile = self.profile
        on_gpu = Decision(verdict, profile.instance_type, self.compiler, "")
        unfit = self._trainium_unfit(limits)
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
            saving = (gpu.expected - trainium.dollars_per_run[0]) * runs
            if saving >= MIN_SAVING_FOR_A_BENCHMARK_USD:
                return Decision(Verdict.BENCHMARK, trainium.instance_type, trainium.compiler,
                                f"{reason}; measure {trainium.instance_type} before moving")
        return replace(on_gpu, reason=reason)

    def notes(self, verdict: Verdict, limits: Mapping[Factor, Verdict], decision: Decision,
              options: tuple[Option, ...], batch: int | None) -> list[str]:
        profile, title = self.profile, self.module.title
        notes = []
        if verdict is Verdict.BENCHMARK:
            if not profile.static_shapes:
                notes.append(f"first step: make the shapes static ({self.shape_fix()})")
            notes.append(f"deploy a CompilerBenchmark (A/B pipeline) of {title} against no "
                         f"compiler and ship only at >= "
                         f"{contract.DEFAULT_SPEEDUP_THRESHOLD:.0%} speedup without quality loss")
        if batch is not None:
            notes.append(f"raise the batch from {profile.batch_size} to {batch} (the compiler "
                         "frees memory: AWS's tested-models table) and scale the learning rate "
                         "to match")
        notes += self.module.notes(profile, self.category, verdict is Verdict.ENABLE,
                                   verdict is Verdict.SKIP)
        successor = self.module.successor
        if successor and verdict is not Verdict.SKIP and (
                move := self.module.move_note(compiler_module(successor), self.category)):
            notes.append(move)
        if launcher := self._launcher_note():
            notes.append(launcher)
        return notes + self._trainium_notes(decision, options)

    def _launcher_note(self) -> str | None:
        """What a deep-learning job on several GPUs needs so that each of them trains; nothing
        for a compiler that sets its own launcher (Training Compiler's pytorchxla)."""
        profile = self.profile
        gpus, idle = gpus_left_idle(profile.instance_type, profile.instance_count)
        if (profile.framework not in PYTORCH_FRAMEWORKS or not is_gpu(profile.instance_type)
                or gpus == 1 or self.module.sets_own_launcher):
            return None
        return (f"train on all {gpus} GPUs ({profile.instance_count} x {profile.instance_type}) "
                f"under torchrun (distribution torch_distributed, one process per GPU) if the "
                f"job does not already: with no distribution SageMaker starts one process per "
                f"instance and {idle} GPUs sit idle"
                + (f" while the {profile.instance_count} instances train separate models"
                   if profile.instance_count > 1 else ""))

    @staticmethod
    def _trainium_notes(decision: Decision, options: tuple[Option, ...]) -> list[str]:
        if not is_trainium(decision.instance_type):
            if any(is_trainium(o.instance_type) for o in options):
                return ["Trainium could still cost less (AWS's claims reach below the GPU's "
                        "expected cost), not by the expected margin: a BenchmarkArm on "
                        "ml.trn1.32xlarge with Compiler.neuron_xla() beside the GPU arms "
                        "measures it"]
            return []
        return [f"put Trainium on trial beside the GPU job: CompilerBenchmark(arms=["
                f"BenchmarkArm('trainium', Compiler.neuron_xla(precompile=True), "
                f"'{decision.instance_type}', <instances>, Framework.pytorch('2.9.0'))]); it "
                f"ships at >= {contract.DEFAULT_SPEEDUP_THRESHOLD:.0%} more epochs per dollar "
                f"without quality loss"]
