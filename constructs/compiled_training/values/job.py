"""A training job as plain data: what the pure definition builder and the rules read.

Nothing here holds a CDK object; strings may still be CDK tokens, which the builder passes
through untouched and the rules skip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from compiled_training.typecheck import check_arguments, check_parameter
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework


class Distribution(str, Enum):
    """How a job spreads over GPUs and nodes."""

    NONE = "none"
    PYTORCHXLA = "pytorchxla"
    """Training Compiler's launcher: one XLA worker per GPU."""
    TORCH_DISTRIBUTED = "torch_distributed"
    """``torchrun``: the launcher for the torch.compile path."""
    SMDISTRIBUTED_DATA_PARALLEL = "smdistributed"
    """SageMaker's data-parallel library; not compatible with Training Compiler."""


class ParameterType(str, Enum):
    """A pipeline parameter's type, as SageMaker Pipelines names it."""

    STRING = "String"
    INTEGER = "Integer"
    FLOAT = "Float"
    BOOLEAN = "Boolean"


ParameterValue = str | int | float | bool
_PYTHON_TYPES: dict[Enum, type] = {ParameterType.STRING: str, ParameterType.INTEGER: int,
                                   ParameterType.FLOAT: float, ParameterType.BOOLEAN: bool}


@dataclass(frozen=True)
class Parameter:
    """A pipeline parameter: a value a schedule or a person can override per execution."""

    name: str
    type: ParameterType
    default: ParameterValue

    def __post_init__(self) -> None:
        check_parameter(self.name, self.type, self.default, _PYTHON_TYPES)

    @staticmethod
    def string(name: str, default: str) -> Parameter:
        return Parameter(name, ParameterType.STRING, default)

    @staticmethod
    def integer(name: str, default: int) -> Parameter:
        return Parameter(name, ParameterType.INTEGER, default)

    @staticmethod
    def float(name: str, default: float) -> Parameter:
        return Parameter(name, ParameterType.FLOAT, default)

    @staticmethod
    def boolean(name: str, default: bool) -> Parameter:
        return Parameter(name, ParameterType.BOOLEAN, default)

    def ref(self) -> dict[str, str]:
        """The pipeline-definition expression that reads this parameter at run time."""
        return {"Get": f"Parameters.{self.name}"}


HyperparameterValue = str | int | float | bool | Parameter


@dataclass(frozen=True)
class InputChannel:
    """A training input channel, mounted at ``/opt/ml/input/data/<name>``.

    ``s3_uri`` is an S3 prefix, or a string ``Parameter`` whose default is one, so that a
    schedule can point a run at new data. The execution role may read under that prefix only.
    """

    name: str
    s3_uri: str | Parameter
    sharded: bool = False
    """Split objects across nodes (``ShardedByS3Key``) instead of copying all to each."""
    content_type: str | None = None
    """MIME type, for built-in algorithms that need it (``text/csv`` for XGBoost)."""

    def __post_init__(self) -> None:
        check_arguments(InputChannel, vars(self))

    @property
    def default_uri(self) -> str:
        return str(self.s3_uri.default) if isinstance(self.s3_uri, Parameter) else self.s3_uri


@dataclass(frozen=True)
class MetricDefinition:
    """A metric the training script prints in its own format, as SageMaker's
    ``MetricDefinitions`` read it from the job's log: its ``name``, and a ``regex`` whose one
    group captures the value (``r"F1 score: ([0-9.]+)"``). SageMaker keeps the last match."""

    name: str
    regex: str

    def __post_init__(self) -> None:
        check_arguments(MetricDefinition, vars(self))


@dataclass(frozen=True)
class BenchmarkArm:
    """A `CompilerBenchmark` arm on instances of its own: another accelerator (a Trainium arm
    beside a GPU job), another size or count, another compiler. It trains the benchmark's
    job with its own compiler; on instances other than the baseline's it is judged by cost
    per epoch, not time.

    ``name``: lower-case letters and hyphens (``trainium``), the arm's step ``TrainTrainium``.
    ``framework``: the arm's framework where its image needs another version (a Neuron
    image for a job on a Training Compiler release); when omitted, the benchmark's.
    ``distribution``: when omitted, what a `TrainingPipeline` would choose (torchrun on
    Trainium). ``hyperparameters``: over the benchmark's, for what the arm's accelerator
    needs (``{"precision": "bf16"}`` on Trainium).
    """

    name: str
    compiler: Compiler
    instance_type: str
    instance_count: int = 1
    framework: Framework | None = None
    distribution: Distribution | None = None
    hyperparameters: Mapping[str, HyperparameterValue] | None = None

    def __post_init__(self) -> None:
        check_arguments(BenchmarkArm, vars(self))


@dataclass(frozen=True)
class TrainingJob:
    """Everything the training step needs, resolved to strings (possibly CDK tokens)."""

    pipeline_name: str
    framework: Framework
    compiler: Compiler
    distribution: Distribution
    instance_type: str
    instance_count: int
    volume_size_gib: int
    max_runtime_seconds: int
    image_uri: str
    role_arn: str
    region: str
    output_s3_uri: str
    entry_point: str | None = None
    source_s3_uri: str | None = None
    source_dir: Path | None = None
    """The local folder ``source_s3_uri``'s archive is built from; None when not known here."""
    hyperparameters: Mapping[str, HyperparameterValue] = field(default_factory=dict)
    channels: Sequence[InputChannel] = ()
    metric_definitions: Sequence[Mapping[str, str]] = ()
    spot: bool = False
    max_wait_seconds: int | None = None
    checkpoint_s3_uri: Any = None
    """An S3 URI, or a pipeline expression that renders one."""
    debugger: bool = False
    profiler: bool = False
    kms_key_id: str | None = None
    subnet_ids: Sequence[str] = ()
    security_group_ids: Sequence[str] = ()
    network_isolation: bool = False
    inter_container_encryption: bool = False
    max_attempts: int = 3
    step_name: str = "Train"
    tags: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)
    """Set in the container beside what the compiler and the instances call for."""
    compile_cache_s3_uri: str | None = None
    """Where a Neuron job keeps its compiled graphs from run to run (the pipeline's prefix)."""
    torch_compile_cache_s3_uri: str | None = None
    """Where torch.compile jobs keep Inductor's cache from run to run (the pipeline's prefix,
    ``definition.compile_cache``); None: switched off."""

    @property
    def parameters(self) -> list[Parameter]:
        """The pipeline parameters the job reads, in first-use order."""
        values = [*self.hyperparameters.values(), *(c.s3_uri for c in self.channels)]
        return unique_parameters(v for v in values if isinstance(v, Parameter))


def unique_parameters(parameters: Iterable[Parameter]) -> list[Parameter]:
    """Each parameter once, in first-use order; one name used two ways is an error."""
    found: dict[str, Parameter] = {}
    for parameter in parameters:
        if found.setdefault(parameter.name, parameter) != parameter:
            raise ValueError(
                f"pipeline parameter {parameter.name!r} is declared twice with different "
                f"types or defaults: {found[parameter.name]} and {parameter}"
            )
    return list(found.values())
