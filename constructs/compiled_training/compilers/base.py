"""What the rest of the library asks of a compiler (`CompilerModule`), and the shapes of what
it hands a compiler: the user's choice (`Choice`) and the job (`Job`), read as protocols so that
this layer sits below the values that satisfy them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import DlcImage, FrameworkRelease, resolve_dlc
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
    def option(self, name: str, default: Any = None) -> Any:
        """A registered compiler's option, as `Compiler.named` was given it."""


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


class Workload(Protocol):
    """A workload as a compiler's advice reads it (`WorkloadProfile`)."""

    @property
    def framework(self) -> str: ...
    @property
    def framework_version(self) -> str | None: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def model_family(self) -> str: ...


@dataclass(frozen=True)
class Prior:
    """Expected throughput with a compiler over without, at the same batch: mixed precision,
    static shapes, compute-bound (low, high), and where the figure comes from."""

    speedup: tuple[float, float]
    source: str
    """The citation a reason shows; the compiler's module gives the figures."""
    published: bool
    """Whether the source measured this category: only then can the verdict be ENABLE."""


@dataclass(frozen=True)
class CompileOverhead:
    """Minutes a run compiles before it trains (low, high): a first run's, and where the
    compiled graphs persist between runs, a warm run's; where the figures come from."""

    first: tuple[float, float]
    warm: tuple[float, float] | None
    """None: nothing persists, every run pays ``first``."""
    source: str
    warm_since: str | None = None
    """The PyTorch version from which a run starts warm (None: any)."""
    expires: bool = False
    """Whether the library's bucket expires the cache of a job that stops running."""


@dataclass(frozen=True)
class TrainiumClaim:
    """What AWS claims for a Trainium instance: the cost to train on it against a comparable
    GPU instance's eager run, (best, worst), and where the claim comes from."""

    instance_type: str
    compiler: str
    cost_factor: tuple[float, float]
    source: str
    public_image: bool
    """Whether SageMaker has a public training image for the path (`catalog.neuron`)."""
    families: tuple[str, ...]
    """The Trainium families the claim speaks for."""
    compared_with: tuple[str, ...]
    """The GPU instances AWS compares it with: a Trainium job's GPU alternative."""


@dataclass(frozen=True)
class Pick:
    """A compiler's answer to the advisor for a workload: whether it fits, and why."""

    fits: bool
    reason: str


class Step(Protocol):
    """A training step of a pipeline definition, as a rule-pack rule reads it (the rule pack's
    ``TrainingStep``): from a template the library may not have built."""

    @property
    def arguments(self) -> dict[str, Any]: ...
    @property
    def metadata(self) -> dict[str, Any]:
        """What the library's own pipelines record of the step; empty for another's."""
    @property
    def precompiled(self) -> bool:
        """Whether it waits for a Neuron pre-compilation step."""
    @property
    def scheduled(self) -> bool: ...
    @property
    def hyperparameters(self) -> dict[str, Any]: ...
    @property
    def environment(self) -> dict[str, Any]: ...
    @property
    def image(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def instance_count(self) -> int: ...
    @property
    def precompiles(self) -> bool:
        """Whether it is itself a pre-compilation step."""
    def flag(self, name: str) -> bool: ...


STEP_RULE_LEVELS = ("error", "warning", "info")


StepT = TypeVar("StepT", bound=Step, contravariant=True)


@dataclass(frozen=True)
class StepRule(Generic[StepT]):
    """A rule of the rule pack: a compiler's (asked only of the steps that use it) or the
    pack's own (which read the pack's richer step)."""

    id: str
    """``CT<n>`` for the built-in compilers; a package's compiler its own prefix."""
    level: str
    """``error`` (fails the synth), ``warning`` or ``info``."""
    info: str
    explanation: str
    check: Callable[[StepT], bool | None]
    """True when compliant, False when not, None when the rule does not apply."""

    def __post_init__(self) -> None:
        if self.level not in STEP_RULE_LEVELS:
            raise ValueError(f"StepRule {self.id}: level must be one of "
                             f"{', '.join(STEP_RULE_LEVELS)}, got {self.level!r}")


@dataclass(frozen=True)
class Notice:
    """What the rule pack tells of every step that uses a compiler (an informational finding,
    acknowledged by its id): a fact about the compiler, not a check of the step."""

    id: str
    info: str
    explanation: str


SETTING_TYPES = (str, int, float, bool)
"""What a registered compiler's option may be: what a job's environment can carry as text."""
FIRST_COMPILE_MINUTES = (2.0, 5.0)
"""A GPU compiler's first compile, a run (the use case's figure; docs/guides/decision.md)."""
FP32_REASON = "fp32 only: most of a compiler's gain comes with fp16/bf16"
"""What a compiler without figures of its own says of an fp32 job."""


class CompilerModule:
    """A compiler, as synthesis, the checks, the images, the rule pack and the local runner see
    it. The defaults are those of no compiler; a compiler overrides what it changes."""

    name: str = ""
    """Its name in cdk.json, the run summary and the CLI: the registry's key."""
    title: str = ""
    """Its name in prose ("torch.compile")."""
    enabled: bool = True
    """Whether it compiles anything (False only for no compiler)."""
    through_xla: bool = False
    """Whether its graphs run through torch-xla (the local runner then needs torch-xla)."""
    dockerfile: str = "torch-compile"
    """`RuntimeImage`'s Dockerfile folder (``images/<dockerfile>``)."""
    accelerators: frozenset[str] = frozenset({"nvidia"})
    """The accelerators its jobs train on (`catalog.instances.accelerator`'s names); the local
    runner and ``bench`` stand in for NVIDIA's on CPU."""
    default_instance_type: str = "ml.g5.xlarge"
    """The instance a `RuntimeImage` resolves its base image for when given none."""
    distributions_checked: frozenset[str] = frozenset()
    """The distributions whose rules its own `checks` hold (the generic ones are skipped)."""
    settings: tuple[str, ...] = ()
    """The options `options` takes (``Compiler.named(name, **options)``)."""
    options_as_fields: bool = False
    """Whether its options are `Compiler` fields of their own (the built-in compilers'), not
    `Compiler.options`."""
    priors: Mapping[str, Prior] = MappingProxyType({})
    """The advisor's expected speedup by model category (``other`` for the rest)."""
    compile_overhead: CompileOverhead | None = None
    """What a run compiles before it trains; None: nothing."""
    trainium_claims: tuple[TrainiumClaim, ...] = ()
    """AWS's claims for Trainium instances on this compiler's path."""
    trains_on_trainium: bool = False
    """Whether the advisor puts a job already on Trainium on this compiler's path."""
    preference: int = 100
    """The order in which the advisor asks compilers about a GPU job (lowest first)."""
    sets_own_launcher: bool = False
    """Whether the constructs give its jobs its own launcher by default (no idle-GPU note)."""
    batch_growth: float | None = None
    """How much larger a batch it lets a job train (None: no published saving)."""
    fp32_reason: str = FP32_REASON
    warning_ids: tuple[str, ...] = ()
    """The ids of the warnings its `checks` raise, which an app acknowledges."""
    image_checked: bool = False
    """Whether its `checks` refuse a job whose image cannot be resolved (the generic image
    check then leaves the job to them)."""
    config_keys: Mapping[str, str] = MappingProxyType({})
    """The cdk.json keys of a team's pipeline or benchmark arm that set one of its options
    (``torch_compile_mode``), beside ``compiler_options``."""
    step_rules: tuple[StepRule[Step], ...] = ()
    """Its rules in the rule pack (`CompiledTrainingChecks`), for templates of any origin."""
    notices: tuple[Notice, ...] = ()
    """What the rule pack tells of each of its steps."""
    successor: str | None = None
    """The compiler a job moves to when it leaves this one (AWS froze it), or None."""
    acknowledged_when_chosen: Mapping[str, str] = MappingProxyType({})
    """Its rules that a team choosing it acknowledges (the reference platform does), and why,
    after "Team <name> "."""

    def options(self, **given: Any) -> dict[str, Any]:
        """The fields of a `Compiler` of this kind, from the options given (checked): its
        `settings`, kept as given in `Compiler.options`, which `Choice.option` reads back. A
        built-in compiler keeps its options in fields of their own (`fields`)."""
        fields = self.fields(**given)
        if self.options_as_fields:
            return {**fields, "options": ()}
        for name, value in given.items():
            if not isinstance(value, SETTING_TYPES):
                raise TypeError(f"compiler option {name} must be a str, int, float or bool, "
                                f"got {value!r}")
        return {**fields, "options": tuple(sorted(given.items()))}

    def fields(self, **given: Any) -> dict[str, Any]:
        """The kind, once every option given is one of its `settings`."""
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
        """The choice in prose, its options included."""
        return self.title

    def default_distribution(self, framework: Framework, instance_type: str,
                             count: int) -> str | None:
        """The launcher it needs when the job names none, or None to leave it to the job."""
        return None

    def launcher_hint(self, framework: Framework) -> str | None:
        """The launcher to name where a job leaves GPUs idle, or None for torchrun."""
        return None

    def compiles_with_inductor(self, instance_type: str | None) -> bool:
        """Whether a job on ``instance_type`` (None: any) compiles with Inductor, whose caches
        the runtime's warm start carries between runs."""
        return False

    def image_problem(self, instance_type: str) -> str | None:
        """Why no SageMaker image can be resolved for it on ``instance_type``, or None."""
        return None

    def runtime_image_problem(self, instance_type: str) -> str | None:
        """Why `RuntimeImage` cannot build it for ``instance_type``, or None."""
        return None

    def image(self, framework: Framework, instance_type: str) -> DlcImage:
        """The AWS Deep Learning Container its jobs run on: the framework's own by default."""
        return resolve_dlc(framework, False, instance_type)

    def precompile_step_count(self, choice: Choice) -> int | None:
        """How many training steps a pre-compilation step runs before the training step (a
        job of its own), or None for no such step."""
        return None

    def trainer_arguments(self, choice: Choice) -> dict[str, bool | str]:
        """Its switches as a Hugging Face ``TrainingArguments`` parses them from the command
        line, for a Trainer script that does not read the environment."""
        return {}

    def workload_rules_apply(self) -> bool:
        """Whether the rule pack's workload and framework rules (CT5-CT7, CT10) judge its
        steps: those of any compiler that compiles, unless it says otherwise."""
        return self.enabled

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        """What SageMaker would refuse of a job with it (errors), and what would waste the
        job's money (warnings)."""
        return [], []

    def prior(self, category: str) -> Prior | None:
        """The expected speedup for a model category, or for the rest (``other``)."""
        return self.priors.get(category) or self.priors.get("other")

    def choose_on_gpu(self, workload: Workload, category: str) -> Pick | None:
        """Whether it fits a PyTorch job on NVIDIA GPUs, and why; None: no opinion."""
        return None

    def choose_on_trainium(self, workload: Workload, family: str, image: str) -> Pick:
        """Why a job already on Trainium runs this path (`trains_on_trainium`)."""
        return Pick(False, f"{self.title} does not train on {family}")

    def dynamic_shapes_reason(self, fix: str) -> str:
        """What dynamic shapes cost under it, and ``fix``."""
        return f"dynamic shapes: XLA recompiles for every new shape, so the fix comes first ({fix})"

    def notes(self, workload: Workload, category: str, enabled: bool, skipped: bool) -> list[str]:
        """What to do next, given the advisor's verdict (ENABLE, or SKIP, or neither)."""
        return []

    def move_note(self, successor: CompilerModule, category: str) -> str | None:
        """What moving a job to its `successor` brings, for the advisor's notes, or None."""
        return None

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        """Whether a step of a template (possibly not the library's) uses it, from the
        switches in its hyperparameters (as text) and environment, and its image's URI."""
        return False


def trainium(instance_type: str | None) -> bool:
    """Whether a literal instance type is AWS Trainium (a token or None is not known to be)."""
    return (instance_type is not None and not is_token(instance_type)
            and accelerator(instance_type) == "trainium")


def option(given: Mapping[str, Any], name: str, default: Any, kind: type) -> Any:
    """An option of `CompilerModule.options`, its type checked (a bool is no int here)."""
    value = given.get(name, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"compiler option {name} must be {kind.__name__}, got {value!r}")
    return value


def value_of(setting: Any) -> str:
    """An enum setting's value (a `Distribution`), or the text given."""
    return str(getattr(setting, "value", setting))


def minor(version: str) -> tuple[int, int]:
    """``2.9.0`` as ``(2, 9)``."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
    return parts[0], parts[1]


def switched_on(variable: str, hyperparameters: Mapping[str, Any],
                environment: Mapping[str, Any]) -> bool:
    """Whether one of the library's switches is on in a step (its variable, or the
    hyperparameter a 0.2.0 template gave it)."""
    return contract.switch(variable, environment, hyperparameters) == "true"
