"""What compiles the training graph: SageMaker Training Compiler, torch.compile (on GPUs, and on
Trainium through the native TorchNeuron backend), the Neuron SDK's PyTorch/XLA path, or
nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace

from compiled_training.advice.advisor import assess_workload
from compiled_training.advice.workload import Verdict, WorkloadProfile
from compiled_training.catalog.compilers import CompilerKind, compiler_name
from compiled_training.spec.typecheck import check_arguments
from compiled_training_runtime import contract

__all__ = ["Compiler", "CompilerKind"]


@dataclass(frozen=True)
class Compiler:
    """The compiler a training job uses. Build one with the static methods."""

    kind: CompilerKind
    debug: bool = False
    mode: str | None = None
    profile: WorkloadProfile | None = None
    """The workload this choice was made for (`Compiler.auto`); the rule pack reads it."""
    advice: str | None = None
    """Why the advisor chose this; a pipeline shows it as an acknowledgeable warning."""
    model_type: str | None = None
    """neuronx-cc's ``--model-type`` (`neuron_xla`)."""
    precompile_steps: int | None = None
    """`neuron_xla`: the steps of the pre-compilation step that runs before training; None:
    no such step."""

    @staticmethod
    def training_compiler(*, debug: bool = False) -> Compiler:
        """SageMaker Training Compiler (XLA), on its own Deep Learning Containers.

        Frozen by AWS: the last releases are PyTorch 1.12.0 / 1.13.1 and Hugging Face
        PyTorch 1.9-1.11. ``debug`` dumps compiler logs and slows training down.
        """
        check_arguments(Compiler.training_compiler, locals())
        return Compiler(CompilerKind.TRAINING_COMPILER, debug=debug)

    @staticmethod
    def torch_compile(*, mode: str = "default") -> Compiler:
        """``torch.compile`` on a current PyTorch 2.x Deep Learning Container."""
        check_arguments(Compiler.torch_compile, locals())
        if mode not in contract.TORCH_COMPILE_MODES:
            raise ValueError(contract.not_one_of("Compiler.torch_compile mode", mode,
                                                 contract.TORCH_COMPILE_MODES))
        return Compiler(CompilerKind.TORCH_COMPILE, mode=mode)

    @staticmethod
    def neuron_xla(*, model_type: str = "transformer", precompile: bool = False,
                   precompile_steps: int = 10) -> Compiler:
        """The Neuron SDK's PyTorch/XLA path on Trainium (``ml.trn1``, ``ml.trn1n``,
        ``ml.trn2``): torchrun with one process per NeuronCore, the ``xla`` process group, and
        neuronx-cc compiling each graph (``NEURON_CC_FLAGS="--model-type=<model_type>"``).

        Compiled graphs persist in S3 under the pipeline's own prefix
        (``NEURON_COMPILE_CACHE_URL``), so a run compiles only what the last one did not.
        ``precompile``: a step before training runs the same job for ``precompile_steps``
        steps under ``neuron_parallel_compile`` (``RUN_NEURON_PARALLEL_COMPILE=1``), filling
        the cache so the training step's instances train instead of compiling (the step
        passes ``--max_steps``: the runtime reads it, an entry point of your own must). The
        cache lives in S3, so ``network_isolation`` is refused with it. AWS keeps this
        path for workloads already on it: its images end with Neuron SDK 2.30 (PyTorch 2.9).
        """
        check_arguments(Compiler.neuron_xla, locals())
        if model_type not in contract.NEURON_MODEL_TYPES:
            raise ValueError(contract.not_one_of("Compiler.neuron_xla model_type", model_type,
                                                 contract.NEURON_MODEL_TYPES))
        if precompile_steps < 1:
            raise ValueError(f"Compiler.neuron_xla precompile_steps must be at least 1, got "
                             f"{precompile_steps}")
        return Compiler(CompilerKind.NEURON_XLA, model_type=model_type,
                        precompile_steps=precompile_steps if precompile else None)

    @staticmethod
    def none() -> Compiler:
        """No compiler: eager execution."""
        return Compiler(CompilerKind.NONE)

    @staticmethod
    def auto(profile: WorkloadProfile) -> Compiler:
        """The compiler the advisor picks for the workload, as its verdict calls for it.

        ENABLE gives the picked compiler: Training Compiler, or ``torch_compile()`` (a
        PyTorch 2.x job, or a workload Training Compiler does not fit). BENCHMARK gives no
        compiler in production plus a warning pointing to `CompilerBenchmark`; SKIP gives no
        compiler. Set ``framework_version`` on the profile to the pipeline's PyTorch version:
        without it, Training Compiler is assumed where it fits.
        """
        check_arguments(Compiler.auto, locals())
        assessment = assess_workload(profile)
        if assessment.verdict is Verdict.ENABLE:
            picked = (Compiler.torch_compile() if assessment.compiler is CompilerKind.TORCH_COMPILE
                      else Compiler.training_compiler())
            return replace(picked, profile=profile)
        if assessment.verdict is Verdict.BENCHMARK:
            unsure = [assessment.reasons[f] for f, limit in assessment.limits.items()
                      if limit is Verdict.BENCHMARK]
            return Compiler(CompilerKind.NONE, profile=profile, advice=(
                f"workload {profile.name!r} needs a benchmark of "
                f"{compiler_name(assessment.compiler)} before it ships ({'; '.join(unsure)}); "
                "production runs without it. Deploy a CompilerBenchmark to measure it."))
        return Compiler(CompilerKind.NONE, profile=profile)

    @property
    def is_training_compiler(self) -> bool:
        return self.kind is CompilerKind.TRAINING_COMPILER

    @property
    def is_enabled(self) -> bool:
        return self.kind is not CompilerKind.NONE

    def hyperparameters(self) -> dict[str, bool | str]:
        """The hyperparameters that switch the compiler on in the training container: SageMaker's
        own (``sagemaker_*``), which the toolkit keeps from the script's arguments.

        Values are Python values; the definition builder JSON-encodes them as the SDK does.
        """
        if self.kind is CompilerKind.TRAINING_COMPILER:
            return {
                contract.HP_TRAINING_COMPILER_ENABLED: True,
                contract.HP_TRAINING_COMPILER_DEBUG: self.debug,
            }
        return {}

    def environment(self) -> dict[str, str]:
        """The environment the compiler reads in the training container: the library's own
        switches (``COMPILED_TRAINING_*``, which a script may ignore), and Neuron's flags."""
        if self.kind is CompilerKind.TORCH_COMPILE:
            return {contract.ENV_TORCH_COMPILE: "true",
                    contract.ENV_TORCH_COMPILE_MODE: str(self.mode)}
        if self.kind is CompilerKind.NEURON_XLA:
            return {contract.ENV_NEURON_XLA: "true",
                    contract.ENV_NEURON_CC_FLAGS: f"--model-type={self.model_type}"}
        return {}

    def describe(self) -> str:
        if self.kind is CompilerKind.TRAINING_COMPILER:
            return "Training Compiler" + (" (debug)" if self.debug else "")
        if self.kind is CompilerKind.TORCH_COMPILE:
            return f"torch.compile (mode={self.mode})"
        if self.kind is CompilerKind.NEURON_XLA:
            precompile = (f", pre-compiled in {self.precompile_steps} steps"
                          if self.precompile_steps else "")
            return f"Neuron PyTorch/XLA (model type {self.model_type}{precompile})"
        return "none"
