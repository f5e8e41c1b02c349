"""What compiles the training graph: SageMaker Training Compiler, torch.compile (on GPUs, and on
Trainium through the native TorchNeuron backend), the Neuron SDK's PyTorch/XLA path, nothing,
or a compiler a package registers (`compiled_training.compilers`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from compiled_training.advice.advisor import assess_workload
from compiled_training.advice.workload import Verdict, WorkloadProfile
from compiled_training.compilers import CompilerKind, CompilerModule, compiler_module
from compiled_training.typecheck import check_arguments, known_keywords

__all__ = ["Compiler", "CompilerKind"]


@dataclass(frozen=True)
class Compiler:
    """The compiler a training job uses. Build one with the static methods."""

    kind: str
    """A `CompilerKind` for the built-in compilers; a registered compiler's name otherwise."""
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
    options: tuple[tuple[str, str | int | float | bool], ...] = ()
    """A registered compiler's own options, as `Compiler.named` was given them (sorted by
    name); the built-in compilers keep theirs in the fields above."""

    def option(self, name: str, default: Any = None) -> Any:
        """A registered compiler's option by name (`options`); ``default`` where not given."""
        return dict(self.options).get(name, default)

    @staticmethod
    @known_keywords
    def training_compiler(*, debug: bool = False) -> Compiler:
        """SageMaker Training Compiler (XLA), on its own Deep Learning Containers.

        Frozen by AWS: the last releases are PyTorch 1.12.0 / 1.13.1 and Hugging Face
        PyTorch 1.9-1.11. ``debug`` dumps compiler logs and slows training down.
        """
        check_arguments(Compiler.training_compiler, locals())
        return Compiler.named(CompilerKind.TRAINING_COMPILER, debug=debug)

    @staticmethod
    @known_keywords
    def torch_compile(*, mode: str = "default") -> Compiler:
        """``torch.compile`` on a current PyTorch 2.x Deep Learning Container."""
        check_arguments(Compiler.torch_compile, locals())
        return Compiler.named(CompilerKind.TORCH_COMPILE, mode=mode)

    @staticmethod
    @known_keywords
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
        return Compiler.named(CompilerKind.NEURON_XLA, model_type=model_type,
                              precompile=precompile, precompile_steps=precompile_steps)

    @staticmethod
    def none() -> Compiler:
        """No compiler: eager execution."""
        return Compiler.named(CompilerKind.NONE)

    @staticmethod
    def named(name: str, **options: Any) -> Compiler:
        """The compiler of a name as cdk.json writes it (``torch-compile``, or a registered
        compiler's), with its options (``mode=`` for torch.compile)."""
        check_arguments(Compiler.named, {"name": name})
        return Compiler(**compiler_module(name).options(**options))

    @staticmethod
    def auto(profile: WorkloadProfile) -> Compiler:
        """The compiler the advisor picks for the workload, as its verdict calls for it.

        ENABLE gives the picked compiler with its defaults: Training Compiler, or
        ``torch_compile()`` (a PyTorch 2.x job, or a workload Training Compiler does not fit),
        or on Trainium ``neuron_xla()``. BENCHMARK gives no
        compiler in production plus a warning pointing to `CompilerBenchmark`; SKIP gives no
        compiler. Set ``framework_version`` on the profile to the pipeline's PyTorch version:
        without it, Training Compiler is assumed where it fits.
        """
        check_arguments(Compiler.auto, locals())
        assessment = assess_workload(profile)
        if assessment.verdict is Verdict.ENABLE:
            return replace(Compiler.named(assessment.compiler), profile=profile)
        if assessment.verdict is Verdict.BENCHMARK:
            unsure = [assessment.reasons[f] for f, limit in assessment.limits.items()
                      if limit is Verdict.BENCHMARK]
            title = compiler_module(assessment.compiler).title
            return replace(Compiler.none(), profile=profile, advice=(
                f"workload {profile.name!r} needs a benchmark of {title} before it ships "
                f"({'; '.join(unsure)}); "
                "production runs without it. Deploy a CompilerBenchmark to measure it."))
        return replace(Compiler.none(), profile=profile)

    @property
    def name(self) -> str:
        """The compiler's name as cdk.json and the run summary write it (``torch-compile``)."""
        return str(getattr(self.kind, "value", self.kind))

    @property
    def module(self) -> CompilerModule:
        """What the library knows of this compiler (`compiled_training.compilers`)."""
        return compiler_module(self.kind)

    @property
    def is_enabled(self) -> bool:
        return self.module.enabled

    def hyperparameters(self) -> dict[str, bool | str]:
        """The hyperparameters that switch the compiler on in the training container: SageMaker's
        own (``sagemaker_*``), which the toolkit keeps from the script's arguments.

        Values are Python values; the definition builder JSON-encodes them as the SDK does.
        """
        return self.module.hyperparameters(self)

    def environment(self) -> dict[str, str]:
        """The environment the compiler reads in the training container: the library's own
        switches (``COMPILED_TRAINING_*``, which a script may ignore), and Neuron's flags."""
        return self.module.switches(self)

    def describe(self) -> str:
        return self.module.describe(self)
