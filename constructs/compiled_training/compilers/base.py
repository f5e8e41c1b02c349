"""What the rest of the library asks of a compiler (`CompilerModule`), and the shapes of what
it hands a compiler: the user's choice (`Choice`) and the job (`Job`), read as protocols so that
this layer sits below the values that satisfy them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import Any, Protocol

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import FrameworkRelease
from compiled_training.catalog.instances import accelerator
from compiled_training_runtime import contract

Finding = tuple[str, str]
"""A rule id and its message."""


class CompilerKind(str, Enum):
    """The built-in compilers' names: the same in cdk.json, the runtime's run summary and the
    CLI. A compiler registered by a package (`compiled_training.compilers`) has a name of its
    own outside this enum."""

    TRAINING_COMPILER = contract.COMPILER_TRAINING_COMPILER
    TORCH_COMPILE = contract.COMPILER_TORCH_COMPILE
    NEURON_XLA = contract.COMPILER_NEURON_XLA
    NONE = contract.COMPILER_NONE


class Choice(Protocol):
    """The user's choice of compiler and its options (`Compiler`)."""

    @property
    def kind(self) -> str: ...
    @property
    def debug(self) -> bool: ...
    @property
    def mode(self) -> str | None: ...
    @property
    def model_type(self) -> str | None: ...
    @property
    def precompile_steps(self) -> int | None: ...


class Framework(FrameworkRelease, Protocol):
    """A framework release (`Framework`), hashable as the image look-ups cache it."""

    @property
    def runs_script(self) -> bool: ...
    def __hash__(self) -> int: ...


class Job(Protocol):
    """A training job as a compiler's checks read it (`TrainingJob`)."""

    @property
    def compiler(self) -> Choice: ...
    @property
    def framework(self) -> Framework: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def instance_count(self) -> int: ...
    @property
    def distribution(self) -> str: ...
    @property
    def network_isolation(self) -> bool: ...
    @property
    def hyperparameters(self) -> Mapping[str, Any]: ...
    @property
    def debugger(self) -> bool: ...
    @property
    def profiler(self) -> bool: ...
    @property
    def compile_cache_s3_uri(self) -> str | None: ...
    @property
    def image_uri(self) -> str | None: ...


class CompilerModule:
    """A compiler, as synthesis, the checks, the images, the rule pack and the local runner see
    it. The defaults are those of no compiler; a compiler overrides what it changes."""

    name: str = ""
    """Its name in cdk.json, the run summary and the CLI: the registry's key."""
    title: str = ""
    """Its name in prose ("torch.compile")."""
    enabled: bool = True
    """Whether it compiles anything (False only for no compiler)."""
    training_compiler_images: bool = False
    """Whether its jobs run on SageMaker Training Compiler's own images."""
    inductor: bool = False
    """Whether it compiles with Inductor on GPUs, whose caches the runtime's warm start
    carries between runs."""
    through_xla: bool = False
    """Whether its graphs run through torch-xla (the local runner then needs torch-xla)."""
    neuron_sdk: bool = False
    """Whether it compiles through the Neuron SDK's PyTorch/XLA (neuronx-cc), whose cache
    lives in S3 and which a pre-compilation step can fill."""
    dockerfile: str = "torch-compile"
    """`RuntimeImage`'s Dockerfile folder (``images/<dockerfile>``)."""
    default_instance_type: str = "ml.g5.xlarge"
    """The instance a `RuntimeImage` resolves its base image for when given none."""
    distributions_checked: frozenset[str] = frozenset()
    """The distributions whose rules its own `checks` hold (the generic ones are skipped)."""
    settings: tuple[str, ...] = ()
    """The options `options` takes (``Compiler.named(name, **options)``)."""

    def options(self, **given: Any) -> dict[str, Any]:
        """The fields of a `Compiler` of this kind, from the options given (checked); a
        subclass reads its `settings` and passes on the rest."""
        unknown = sorted(set(given) - set(self.settings))
        if unknown:
            raise TypeError(f"compiler {value_of(self.name)!r} takes the options "
                            f"{', '.join(self.settings) or 'none'}, got {', '.join(unknown)}")
        return {"kind": self.name}

    def hyperparameters(self, choice: Choice) -> dict[str, bool | str]:
        """SageMaker's own switches (``sagemaker_*``), which the toolkit keeps from the script."""
        return {}

    def switches(self, choice: Choice) -> dict[str, str]:
        """The environment that switches it on in the container, on any instance."""
        return {}

    def environment(self, job: Job) -> dict[str, str]:
        """The job's environment for it: its switches and what the job's instance adds."""
        return self.switches(job.compiler)

    def describe(self, choice: Choice) -> str:
        return self.title

    def default_distribution(self, framework: Framework, instance_type: str,
                             count: int) -> str | None:
        """The launcher it needs when the job names none, or None to leave it to the job."""
        return None

    def launcher_hint(self, framework: Framework) -> str | None:
        """The launcher to name where a job leaves GPUs idle, or None for torchrun."""
        return None

    def compiles_with_inductor(self, instance_type: str | None) -> bool:
        """Whether a job on ``instance_type`` (None: any) compiles with Inductor."""
        return False

    def image_problem(self, instance_type: str) -> str | None:
        """Why no SageMaker image can be resolved for it on ``instance_type``, or None."""
        return None

    def runtime_image_problem(self, instance_type: str) -> str | None:
        """Why `RuntimeImage` cannot build it for ``instance_type``, or None."""
        return None

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        """What SageMaker would refuse of a job with it (errors), and what would waste the
        job's money (warnings)."""
        return [], []

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        """Whether a step of a template (possibly not the library's) uses it, from the
        switches in its hyperparameters (as text) and environment, and its image's URI."""
        return False


def trainium(instance_type: str | None) -> bool:
    """Whether a literal instance type is AWS Trainium (a token or None is not known to be)."""
    return (instance_type is not None and not is_token(instance_type)
            and accelerator(instance_type) == "trainium")


def value_of(setting: Any) -> str:
    """An enum setting's value (a `Distribution`), or the text given."""
    return str(getattr(setting, "value", setting))


def minor(version: str) -> tuple[int, int]:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
    return parts[0], parts[1]


def switched_on(variable: str, hyperparameters: Mapping[str, Any],
                environment: Mapping[str, Any]) -> bool:
    """Whether one of the library's switches is on in a step (its variable, or the
    hyperparameter a 0.2.0 template gave it)."""
    return contract.switch(variable, environment, hyperparameters) == "true"
