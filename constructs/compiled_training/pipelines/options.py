"""A training job's props, defined once (aws-cdk's Options/Props pattern).

`TrainingJobOptions` holds the props every pipeline of this library takes for its training
jobs; `TrainingPipelineProps` and `CompilerBenchmarkProps` extend it with their own. The
constructs take them as keyword arguments (``TrainingPipeline(scope, id, framework=...,
...)``, typed through ``Unpack``); the boundary type check (`typecheck.py`) and a
team's ``cdk.json`` keys (`reference/platform.py`) read the same definitions, so a new prop is
added here and nowhere else.

Every optional prop defaults to None; what happens then is said on the prop. Where that is a
value, it is named here once (`OMITTED`), the constructs read the constant, and a test holds
each prop's doc to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from typing_extensions import Required, TypedDict  # typing's from Python 3.11

from compiled_training.pipelines.registration import ModelRegistration
from compiled_training.pipelines.training_image import TrainingImage
from compiled_training.typecheck import prop_names, prop_type
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.values.job import (
    BenchmarkArm,
    Distribution,
    HyperparameterValue,
    InputChannel,
    MetricDefinition,
)
from compiled_training.values.team_scope import TeamScope
from compiled_training_runtime import contract

if TYPE_CHECKING:
    # For type checkers only: the boundary check imports it when a VPC prop is given, and
    # a synth without one need not load it (a fifth of a second).
    from aws_cdk import aws_ec2 as ec2
DEFERRED_IMPORTS = {"ec2": "aws_cdk.aws_ec2"}
"""The imports above, made by the boundary check when it reads a prop naming one."""


DEFAULT_VOLUME_SIZE_GIB = 30
DEFAULT_MAX_RUNTIME_HOURS = 24
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_COMPARISON_INSTANCE_TYPE = "ml.m5.large"
OMITTED: Mapping[str, str] = {
    "volume_size_gib": f"{DEFAULT_VOLUME_SIZE_GIB} GiB",
    "max_runtime": f"{DEFAULT_MAX_RUNTIME_HOURS} hours",
    "max_attempts": f"{DEFAULT_MAX_ATTEMPTS} attempts",
    "comparison_instance_type": f"``{DEFAULT_COMPARISON_INSTANCE_TYPE}``",
    "quality_metric": f"``{contract.DEFAULT_QUALITY_METRIC}``",
    "speedup_threshold": f"{contract.DEFAULT_SPEEDUP_THRESHOLD:g}",
    "quality_tolerance": f"{contract.DEFAULT_QUALITY_TOLERANCE:g} points",
}
"""What each prop whose default is a value is when omitted, as its doc says it."""

class TrainingJobOptions(TypedDict, total=False):
    """The props of a training job, shared by `TrainingPipeline` and `CompilerBenchmark`."""

    framework: Required[Framework]
    """The framework and version, e.g. ``Framework.pytorch("1.13.1")``."""
    instance_type: Required[str]
    """A SageMaker training instance type, e.g. ``ml.g5.48xlarge``."""
    compiler: Compiler | None
    """When omitted: for a `TrainingPipeline`, no compiler (eager); for a `CompilerBenchmark`,
    the compiler on trial is Training Compiler."""
    instance_count: int | None
    """When omitted, one instance (per arm, in a benchmark)."""
    role: iam.IRole | None
    """The execution role its jobs run as; when omitted, one is created, least privilege.
    Given, as aws-cdk-lib's constructs take one: a role made in this app gets the grants
    (in its default policy, scoped to this pipeline's resources, so one role may serve many
    pipelines); an imported, immutable one (``Role.from_role_arn(..., mutable=False)``) gets
    nothing, and a warning lists the statements to grant it. It must trust
    sagemaker.amazonaws.com."""
    pipeline_role: iam.IRole | None
    """The role SageMaker Pipelines runs the pipeline as; when omitted, one is created. Given:
    as ``role``."""
    handler_role: iam.IRole | None
    """The role its Lambda steps run as (a benchmark's ``RecordDecision``; with
    ``registration``, the ``ModelMetrics`` report); when omitted, each function gets one of
    its own. Given: as ``role``; it must trust lambda.amazonaws.com."""
    team_scope: TeamScope | None
    """With ``role`` and ``pipeline_role`` given to a team's pipelines: the team those roles
    serve (its pipeline-name prefix and data URIs), so that they take the team's statements
    once instead of each pipeline's (one pair serves hundreds of pipelines). The pipeline's
    name must begin with the prefix and its channels read under the data URIs. When omitted,
    each pipeline's statements name it alone (a pipeline's roles reach no teammate's jobs)."""
    tags: Mapping[str, str] | None
    """Tags for the construct's resources and, with those set by ``Tags.of(scope)`` at any
    level above it, for every job the pipeline creates (cost allocation reads them there).
    SageMaker's limits hold: 50 a job with the library's own, keys of 1-128 and values of
    0-256 characters, no ``aws:`` prefix."""
    source_dir: str | Path | None
    """Folder uploaded as a deterministic ``sourcedir.tar.gz``; required for framework images
    (and by a benchmark), omitted for built-in algorithms."""
    entry_point: str | None
    """The script in ``source_dir`` that SageMaker runs; required by a benchmark, whose script
    must write the compiled-training runtime's run summary (the runtime's ``train.py`` does)."""
    hyperparameters: Mapping[str, HyperparameterValue] | None
    """Values or ``Parameter``s a schedule can override; the same for every arm of a benchmark
    (its large-batch arm overrides ``batch_size``)."""
    channels: Sequence[InputChannel] | None
    """Input channels; when omitted, the job reads no input. A benchmark requires them, with a
    ``validation`` channel (quality is compared on it)."""
    distribution: Distribution | None
    """When omitted, ``pytorchxla`` for a Training Compiler job on more than one GPU where the
    version has it (PyTorch 1.12+, Hugging Face PyTorch 1.11+); in a benchmark's compiler arms,
    ``torch_distributed`` for torch.compile on more than one GPU; none otherwise."""
    pipeline_name: str | None
    """Names the pipeline and its S3 prefix of models, outputs and checkpoints. When omitted,
    derived from the construct path, with a warning: renaming or moving the construct would
    then move the prefix and strand the data."""
    description: str | None
    """When omitted, a description of what the pipeline trains with."""
    output_bucket: s3.IBucket | None
    """When omitted, the stack's shared `TrainingOutputBucket` (one per KMS key): encrypted
    (with ``kms_key`` or S3-managed), versioned, SSL only, public access blocked,
    access-logged, retained when the stack is deleted. Each pipeline writes under its own
    prefix only."""
    volume_size_gib: int | None
    """When omitted, 30 GiB per instance."""
    max_runtime: Duration | None
    """When omitted, 24 hours."""
    spot: bool | None
    """When omitted, on-demand. Spot jobs checkpoint to S3 and resume; spot interruptions
    distort a benchmark's wall-clock comparison, so spot arms draw a warning."""
    max_wait: Duration | None
    """Spot only; when omitted, twice ``max_runtime``."""
    max_attempts: int | None
    """When omitted, 3 attempts per step on capacity, internal and throttling errors."""
    kms_key: kms.IKey | None
    """When omitted, AWS-managed encryption for volumes and outputs."""
    vpc: ec2.IVpc | None
    """When omitted, the job runs outside a VPC."""
    vpc_subnets: ec2.SubnetSelection | None
    """When omitted with a VPC, its private subnets."""
    security_groups: Sequence[ec2.ISecurityGroup] | None
    """When omitted with a VPC, a new group with no inbound rules."""
    network_isolation: bool | None
    """When omitted, off (the container may reach the network)."""
    inter_container_encryption: bool | None
    """When omitted, on for multi-instance jobs."""
    compile_cache: bool | None
    """torch.compile's warm start: when omitted, on for PyTorch 2.4 and later. Each run's job
    restores what the last run compiled from ``<prefix>/compile-cache/<step>/`` before its first
    step and saves it back after training, so a scheduled run compiles only what changed; the
    library's bucket expires a cache no run has saved for 30 days. False: every run compiles
    from nothing (a scheduled pipeline draws the rule pack's CT15)."""


class TrainingPipelineProps(TrainingJobOptions, total=False):
    """`TrainingPipeline`'s props: a training job's, and these."""

    image: TrainingImage | None
    """When omitted, ``TrainingImage.dlc()``: the framework's Deep Learning Container for the
    compiler, from the SageMaker SDK v2's image configuration. Or an image in ECR
    (``TrainingImage.from_ecr_repository``), a `RuntimeImage`
    (``TrainingImage.from_runtime_image``), or any URI (``TrainingImage.from_registry``); a
    Training Compiler job may use an image extended from a Training Compiler DLC. The
    execution role may pull the image."""
    debugger: bool | None
    """When omitted, off (it costs performance, especially when compiled)."""
    profiler: bool | None
    """When omitted, off."""
    registration: ModelRegistration | None
    """When omitted, a run ends with its model in S3; with it, a quality gate on a reported
    metric, then a version in a Model Package Group."""
    metric_definitions: Sequence[MetricDefinition] | None
    """The metrics the script prints in its own format, which the job reports and a gate may
    read (``[MetricDefinition("f1", r"F1 score: ([0-9.]+)")]``); when omitted, the runtime's
    (``[metrics] name=value`` lines: train_loss, samples_per_second and, with a ``validation``
    channel, validation_loss and validation_accuracy)."""


class CompilerBenchmarkProps(TrainingJobOptions, total=False):
    """`CompilerBenchmark`'s props: a training job's (``source_dir``, ``entry_point`` and
    ``channels`` required), and these."""

    large_batch_size: int | None
    """When given, a third arm trains with the compiler at this batch size, the learning rate
    scaled linearly from ``hyperparameters["batch_size"]``; when omitted, two arms."""
    arms: Sequence[BenchmarkArm] | None
    """More arms, each on its own instance type and count with its own compiler (a Trainium
    arm beside the GPU job: ``BenchmarkArm("trainium", Compiler.neuron_xla(),
    "ml.trn1.32xlarge", 2, Framework.pytorch("2.9.0"))``). An arm on other instances than the
    baseline's is judged by cost per epoch, so both instance types need a price."""
    prices: Mapping[str, float] | None
    """USD per instance-hour by instance type, before the recorded on-demand list (us-east-1,
    dated in ``catalog/prices.py``): your region's or your discount's. An instance type
    neither knows (``ml.trn2.48xlarge``) must be given here to be compared by cost."""
    quality_metric: str | None
    """When omitted, ``validation_accuracy`` (tolerance in percentage points); or
    ``validation_loss``."""
    speedup_threshold: float | None
    """Least gain to ship, as a fraction: wall-clock speedup on the baseline's instances, more
    epochs per dollar on others; when omitted, 0.2 (20 % faster, or 20 % more per dollar). A
    pipeline parameter, ``SpeedupThreshold``, that an execution may raise (up to 10), never
    lower: the decision function refuses to record a verdict judged by a lower one, and a
    schedule's override is checked at synth."""
    quality_tolerance: float | None
    """Most quality lost to ship; when omitted, 0.1 points. A pipeline parameter,
    ``QualityTolerance``, that an execution may tighten (down to 0), never loosen, enforced
    the same way."""
    baseline_distribution: Distribution | None
    """When omitted, ``torch_distributed`` on more than one GPU (so that both sides use every
    GPU), none otherwise."""
    comparison_instance_type: str | None
    """When omitted, ``ml.m5.large``."""
    decision_parameter_name: str | None
    """When omitted, ``/compiled-training/<pipeline name>/decision`` (with a derived pipeline
    name, a rename of the construct replaces it and deletes the verdict: a warning says so)."""


BENCHMARK_REQUIRED = ("source_dir", "entry_point", "channels")
"""Optional for a training job in general, required by a benchmark (it runs the runtime's
script on validation data)."""


def prop_types(props: type) -> dict[str, Any]:
    """Each prop of a props definition and its type."""
    return {name: prop_type(props, name) for name in prop_names(props)}
