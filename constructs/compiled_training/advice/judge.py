"""How the advisor judges a workload on one accelerator: the factors every accelerator judges
alike here, the ones each judges its own way in a subclass (`gpu.OnGpu`, `trainium.OnTrainium`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from compiled_training.advice import cost
from compiled_training.advice.assessment import Decision, Factor, Judged, Option
from compiled_training.advice.workload import (
    PYTORCH_FRAMEWORKS,
    Verdict,
    WorkloadProfile,
    model_category,
)
from compiled_training.catalog.instances import accelerator, instance_family
from compiled_training.compilers import CompilerModule, compiler_module
from compiled_training_runtime import contract

SHAPE_FIXES = {
    "transformer": "pad sequences to a fixed length or bucket them into a few lengths",
    "vision": "resize or crop images to fixed sizes",
    "diffusion": "resize or crop images to a few fixed resolutions",
}
ANY_SHAPE_FIX = "pad or bucket inputs into a few fixed shapes: sequence lengths, image sizes"
BOUND_ELSEWHERE = ("data-loading", "communication")
"""Bottlenecks a faster graph does not shorten."""

# Accelerators a compiler of this library trains on, and what each instance kind means to it.
_COMPILED_ON = ("nvidia", "trainium")
_INSTANCE_REASONS = {
    "nvidia": "{instance}: an NVIDIA GPU instance ({family}), what both compilers target",
    "amd": "{instance}: AMD GPUs, which no CUDA image and neither compiler runs on",
    "trainium": ("{instance}: Trainium, where every graph compiles through the Neuron SDK "
                 "(neuronx-cc): the compiler is not optional"),
    "inferentia": "{instance}: Inferentia is for inference, not these compilers",
    "cpu": "{instance} is a CPU instance; both compilers target NVIDIA GPUs",
}


def allows(applies: bool) -> Verdict:
    return Verdict.ENABLE if applies else Verdict.SKIP


class Judge(ABC):
    """One workload on one kind of accelerator: the compiler it gets, each factor's judgement,
    what a run costs, and the options, decision and notes that follow from the verdict."""

    def __init__(self, profile: WorkloadProfile, prices: Mapping[str, float] | None) -> None:
        self.profile, self.prices = profile, prices
        self.category, self.known = model_category(profile.model_family)
        self.compiler, self.compiler_reason = self.choose()
        self.module: CompilerModule = compiler_module(self.compiler)
        self.compile = cost.compile_minutes(profile, self.compiler)
        self.speedup, self.break_even = self.gain()
        self.money = self.costed()

    def factors(self) -> dict[Factor, Judged]:
        """Every factor's judgement, in `Factor`'s order."""
        return {
            Factor.FRAMEWORK: self.framework(),
            Factor.INSTANCE: self.instance(),
            Factor.COMPILER: self.compiler_fit(),
            Factor.MODEL: self.model(),
            Factor.PRECISION: self.precision(),
            Factor.SHAPES: self.shapes(),
            Factor.BOTTLENECK: self.bottleneck(),
            Factor.DURATION: self.duration(),
            Factor.MONEY: Judged(Verdict.ENABLE, self.money.reason),
        }

    # What each accelerator decides its own way.
    @abstractmethod
    def choose(self) -> tuple[str, str]:
        """The compiler's name, and why."""

    @abstractmethod
    def gain(self) -> tuple[tuple[float, float], float]:
        """The speedup over eager (low, high), and the run length in minutes it pays from."""

    @abstractmethod
    def costed(self) -> cost.Money:
        """What a run and a year cost, and what the compiler saves."""

    @abstractmethod
    def compiler_fit(self) -> Judged: ...

    @abstractmethod
    def model_fit(self, said: str) -> Judged:
        """The model's category against what the compiler's figures cover."""

    @abstractmethod
    def precision(self) -> Judged: ...

    @abstractmethod
    def shapes(self) -> Judged: ...

    @abstractmethod
    def duration(self) -> Judged: ...

    @abstractmethod
    def options(self, verdict: Verdict, limits: Mapping[Factor, Verdict]) -> tuple[Option, ...]:
        """The run costed each way worth comparing."""

    @abstractmethod
    def decide(self, verdict: Verdict, limits: Mapping[Factor, Verdict],
               options: tuple[Option, ...]) -> Decision: ...

    @abstractmethod
    def notes(self, verdict: Verdict, limits: Mapping[Factor, Verdict], decision: Decision,
              options: tuple[Option, ...], batch: int | None) -> list[str]:
        """What to do next."""

    # What every accelerator judges alike.
    def framework(self) -> Judged:
        profile = self.profile
        if profile.framework in PYTORCH_FRAMEWORKS:
            version = (f"PyTorch {profile.framework_version}" if profile.framework_version
                       else "version not given")
            return Judged(Verdict.ENABLE, f"{profile.framework} ({version}) builds a "
                                          f"deep-learning graph")
        if profile.framework == "tensorflow":
            return Judged(Verdict.SKIP, "tensorflow builds a deep-learning graph, but this "
                                        "library's compilers are for PyTorch jobs; TensorFlow's "
                                        "own XLA (jit_compile) is outside it")
        return Judged(Verdict.SKIP, f"{profile.framework} is not a GPU deep-learning graph; a "
                                    "deep-learning compiler has nothing to compile")

    def instance(self) -> Judged:
        instance = self.profile.instance_type
        kind = accelerator(instance)
        return Judged(allows(kind in _COMPILED_ON), _INSTANCE_REASONS[kind].format(
            instance=instance, family=instance_family(instance)))

    def model(self) -> Judged:
        family = self.profile.model_family
        said = (f"{family}: {self.category}" if self.known else
                f"{family}: not a family this advisor knows, treated as custom")
        if self.category == "tabular":
            return Judged(Verdict.SKIP, f"{said} (gradient-boosted trees build no "
                                        "deep-learning graph)")
        return self.model_fit(said)

    def bottleneck(self) -> Judged:
        bound = self.profile.bottleneck
        if bound in BOUND_ELSEWHERE:
            return Judged(Verdict.BENCHMARK, f"bound by {bound}: a faster graph does not "
                                             "shorten that")
        if bound == "compute":
            return Judged(Verdict.ENABLE, "compute-bound: what a compiler speeds up")
        return Judged(Verdict.ENABLE, "not stated: where data loading or communication bound "
                                      "the job, a faster graph shortens it less")

    def shape_fix(self) -> str:
        return SHAPE_FIXES.get(self.category, ANY_SHAPE_FIX)

    def batch(self, verdict: Verdict) -> tuple[int | None, float | None]:
        """The larger batch the compiler frees memory for, and its learning rate."""
        growth, batch_size = self.module.batch_growth, self.profile.batch_size
        if verdict is not Verdict.ENABLE or not growth or not batch_size:
            return None, None
        batch = int(batch_size * growth)
        rate = self.profile.learning_rate
        # The runtime's own rule: a job given base_batch_size trains at this rate.
        return batch, (contract.scaled_learning_rate(rate, batch_size, batch) if rate else None)
