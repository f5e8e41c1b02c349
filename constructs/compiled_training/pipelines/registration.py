"""Retraining that ends in a model version: a team's `ModelRegistration`, resolved and wired.

`resolve` checks a `ModelRegistration` against the job and the API and turns it into the plain
`Registration` the definition builder reads (`definition/registration.py`); `bind_registration`
does the construct side: the Model Package Group, the inference image, the ``ModelMetrics``
step's function, the pipeline role's permission. A deployment account's read of the versions
and their artifacts is `pipelines/deployment_account.py`'s.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training.catalog.api_shapes import api_shape, is_token
from compiled_training.catalog.dlc import (
    AMAZON_LINUX,
    DlcImage,
    amazon_linux_version,
    image_config,
    release_key,
    resolve_dlc,
)
from compiled_training.catalog.instances import accelerator
from compiled_training.definition.registration import (
    REPORT_FOLDER,
    Gate,
    Registration,
    declared_metrics,
    default_gate_metric,
    gate_metric_problem,
    metadata_value,
    problem_type,
    report_metrics,
    threshold_problem,
)
from compiled_training.pipelines.deployment_account import (
    group_policy,
    let_deployment_account_read,
)
from compiled_training.typecheck import check_arguments
from compiled_training.values.framework import Framework
from compiled_training.values.job import Parameter, TrainingJob
from compiled_training.wiring.dlc_uri import dlc_image_uri
from compiled_training.wiring.functions import RoleMaker, step_function
from compiled_training.wiring.policy import InlinePolicy
from compiled_training.wiring.stack_reads import format_arn, stack_of
from compiled_training_runtime import contract
from constructs import Construct

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_  # only a registration's metrics step loads it

APPROVAL_STATUSES = ("PendingManualApproval", "Approved")
REGRESSION_PARAMETER = "MaxRegressionFromApproved"
_GROUP_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_GPU_DEFAULTS = ("ml.g5.xlarge", "ml.g5.2xlarge")
_CPU_DEFAULTS = ("ml.m5.large", "ml.m5.xlarge")


@runtime_checkable
class BenchmarkVerdict(Protocol):
    """What a registration reads of a benchmark: a `CompilerBenchmark` is one. (Named by what
    it offers, not by its class: the benchmark's module builds on this one's.)"""

    @property
    def framework(self) -> Framework: ...
    @property
    def decision_parameter_name(self) -> str: ...
    @property
    def decision_parameter_arn(self) -> str: ...
    def grant_read_decision(self, grantee: iam.IGrantable) -> iam.Grant: ...


DECISION_READ_ACTIONS = ["ssm:DescribeParameters", "ssm:GetParameters", "ssm:GetParameter",
                         "ssm:GetParameterHistory"]
"""What ``grant_read_decision`` grants (``StringParameter.grant_read``'s actions)."""


@dataclass(frozen=True)
class ModelRegistration:
    """Register each run's model as a version in a Model Package Group, after a quality gate.

    Every field but ``model_package_group_name`` may be omitted.
    """

    model_package_group_name: str
    """The group that holds the versions: 1-63 letters, digits and hyphens."""
    existing_group: bool = False
    """When omitted (False), the group is created by the stack and retained on delete; True
    registers into a group that already exists (created elsewhere)."""
    approval_status: str = "PendingManualApproval"
    """The status a new version gets: ``PendingManualApproval`` (a person approves it) or
    ``Approved`` (deployable at once)."""
    gate_metric: str | None = None
    """A metric the training job reports; when omitted, ``validation_accuracy`` (built-in
    XGBoost: ``validation:<first eval_metric>``). Held-out metrics are reported only by a job
    with a ``validation`` channel: without one, name a metric the job reports. Empty string:
    no gate."""
    gate_threshold: float | None = None
    """The threshold's default (a Float pipeline parameter, overridable per run); when
    omitted, 0.0 (for a metric where higher is better) or 1.0."""
    higher_is_better: bool | None = None
    """When omitted: lower is better for losses and errors, higher for the rest."""
    inference_image_uri: str | None = None
    """When omitted, the framework's inference DLC of the same version (built-in XGBoost:
    its algorithm image), from the SageMaker SDK v2's image configuration."""
    realtime_instance_types: Sequence[str] | None = None
    """When omitted, ml.g5.xlarge and ml.g5.2xlarge for a GPU-trained deep-learning model,
    ml.m5.large and ml.m5.xlarge otherwise."""
    transform_instance_types: Sequence[str] | None = None
    """When omitted, the real-time instance types."""
    content_types: Sequence[str] | None = None
    """When omitted, ``application/json`` (``text/csv`` for XGBoost)."""
    response_types: Sequence[str] | None = None
    """When omitted, the content types."""
    git_commit: str | None = None
    """When omitted, versions record no commit."""
    deployment_account: str | None = None
    """An account id that may read the group's versions (a resource policy on a group this
    stack creates) and their artifacts (the output bucket's model archives and metrics reports
    of this pipeline, and the bucket's KMS key for decrypting them); when omitted, none."""
    benchmark: BenchmarkVerdict | None = None
    """A `CompilerBenchmark` of this pipeline's framework: each version then records the
    benchmark's verdict as it stood when the run finished (``compiler_benchmark`` metadata:
    verdict, arm, speedup, quality lost, comparison in S3); when omitted, none."""
    max_regression: float | None = None
    """When given, a run is registered only if its gate metric is no worse than the group's
    latest approved version's by more than this (the default of a Float pipeline parameter,
    ``MaxRegressionFromApproved``, overridable per run), read at run time; when omitted, no
    comparison with approved versions."""

    def __post_init__(self) -> None:
        check_arguments(ModelRegistration, vars(self))


def resolve(where: str, options: ModelRegistration, job: TrainingJob, image_uri: str,
            metadata: Mapping[str, Any]) -> Registration:
    """Checks the options against the job and botocore's enums; every problem in one message."""
    problems = []
    name = options.model_package_group_name
    if not isinstance(name, str) or not _GROUP_NAME.match(name):
        problems.append(f"model_package_group_name must be 1-63 letters, digits and hyphens, "
                        f"starting and ending with a letter or digit, got {name!r}")
    if options.approval_status not in APPROVAL_STATUSES:
        problems.append(contract.not_one_of("approval_status", options.approval_status,
                                            APPROVAL_STATUSES))
    declared = declared_metrics(job)
    gate = None
    metric = options.gate_metric
    if metric is None:
        metric = default_gate_metric(job)
    if metric:
        if metric not in declared:
            problems.append(gate_metric_problem(job, metric, declared,
                                                options.gate_metric is None))
        else:
            higher = declared[metric] if options.higher_is_better is None \
                else options.higher_is_better
            default = options.gate_threshold
            if out_of_range := threshold_problem(metric, default):
                problems.append(out_of_range)
            threshold = Parameter.float(
                ("Min" if higher else "Max") + re.sub(r"[^A-Za-z0-9]", "", metric.title()),
                float((0.0 if higher else 1.0) if default is None else default))
            gate = Gate(metric, higher, threshold)
    regression = None
    if options.max_regression is not None:
        allowed = options.max_regression
        # No gate asked for (gate_metric=""); a gate metric the job does not report is
        # gate_metric's problem alone.
        if not metric or isinstance(allowed, bool) or not isinstance(allowed, (int, float)) \
                or not 0 <= allowed < float("inf"):
            problems.append(f"max_regression must be a number of at least 0 (how much worse "
                            f"than the latest approved version the gate metric may be), with "
                            f"a gate metric, got {allowed!r}"
                            + ("" if metric else " and no gate metric"))
        else:
            regression = Parameter.float(REGRESSION_PARAMETER, float(allowed))
    realtime = list(options.realtime_instance_types or default_instance_types(job))
    transform = list(options.transform_instance_types or realtime)
    problems += instance_type_problems(realtime, transform)
    if options.deployment_account is not None and (
            not re.fullmatch(r"\d{12}", options.deployment_account) or options.existing_group):
        problems.append(f"deployment_account must be a 12-digit account id, on a group this "
                        f"stack creates, got {options.deployment_account!r}")
    if problems:
        raise ValueError(f"{where}: registration: " + "; ".join(problems))
    content = list(options.content_types or
                   (["application/json"] if job.framework.runs_script else ["text/csv"]))
    return Registration(
        group_name=name,
        approval_status=options.approval_status,
        image_uri=image_uri,
        realtime_instance_types=realtime,
        transform_instance_types=transform,
        content_types=content,
        response_types=list(options.response_types or content),
        gate=gate,
        metadata={k: v if not isinstance(v, str) else metadata_value(v)
                  for k, v in metadata.items()},
        description=f"{job.framework.describe()} trained by pipeline {job.pipeline_name}"
                    f" (compiler: {job.compiler.describe()})",
        metrics=report_metrics(job, gate),
        problem_type=problem_type(job),
        report_prefix=f"{job.pipeline_name}/{REPORT_FOLDER}",
        regression=regression,
    )


def default_instance_types(job: TrainingJob) -> tuple[str, ...]:
    gpu = job.framework.is_deep_learning and accelerator(job.instance_type) == "nvidia"
    return _GPU_DEFAULTS if gpu else _CPU_DEFAULTS


def instance_type_problems(realtime: Sequence[str], transform: Sequence[str]) -> list[str]:
    """Each type must be one botocore's CreateModelPackage enums list; one image serves all,
    so they must all be GPU or all CPU."""
    problems = []
    allowed_realtime, allowed_transform = _instance_enums()
    for field_name, types, allowed in (("realtime_instance_types", realtime, allowed_realtime),
                                       ("transform_instance_types", transform, allowed_transform)):
        unknown = [t for t in types if not is_token(t) and t not in allowed]
        if unknown:
            problems.append(f"{field_name} must be SageMaker instance types for this use "
                            f"(such as {', '.join(_GPU_DEFAULTS + _CPU_DEFAULTS)}), got "
                            f"{', '.join(map(repr, unknown))}")
    kinds = {accelerator(t) for t in (*realtime, *transform)}
    if len(kinds) > 1:
        problems.append(f"realtime_instance_types and transform_instance_types must all be "
                        f"GPU or all CPU (one inference image serves them), got "
                        f"{', '.join(sorted(set((*realtime, *transform))))}")
    return problems


@functools.cache
def _instance_enums() -> tuple[frozenset[str], frozenset[str]]:
    shape = api_shape("InferenceSpecification")
    return (frozenset(shape.members["SupportedRealtimeInferenceInstanceTypes"].member.enum),
            frozenset(shape.members["SupportedTransformInstanceTypes"].member.enum))


def inference_dlc(job: TrainingJob, instance_type: str) -> DlcImage:
    """The framework's inference image of the training version (compilers are training-only)."""
    framework = job.framework
    if framework.name == "pytorch" and amazon_linux_version(framework.version):
        last = max(image_config("pytorch", "inference")["versions"], key=release_key)
        first = min(image_config(AMAZON_LINUX)["versions"], key=release_key)
        raise ValueError(f"{framework.describe()} has no SageMaker inference image: AWS's "
                         f"PyTorch inference images end at {last}, and its Amazon Linux 2023 "
                         f"images (PyTorch {first} on) are for training only")
    return resolve_dlc(framework, False, instance_type, scope="inference")


@dataclass(frozen=True)
class BoundRegistration:
    """A registration wired into a stack."""

    registration: Registration
    group_arn: str
    group: sagemaker.CfnModelPackageGroup | None
    """The group resource, when this stack creates it."""
    metrics_function: lambda_.Function | None = None
    """The ``ModelMetrics`` step's function, when the run writes a model-quality report."""

    @property
    def parameters(self) -> list[Parameter]:
        """The pipeline parameters the registration adds: the gate's threshold."""
        gate = self.registration.gate
        return [gate.threshold] if gate else []

    def describe(self) -> str:
        gate = self.registration.gate
        condition = (f"if {gate.metric} {'>=' if gate.higher_is_better else '<='} "
                     f"{gate.threshold.name} (default {gate.threshold.default})"
                     if gate else "without a gate")
        regression = self.registration.regression
        if regression is not None:
            condition += (f" and no worse than the latest approved version by "
                          f"{regression.name} (default {regression.default})")
        return (f"group {self.registration.group_name}, {self.registration.approval_status}, "
                f"{condition}")

    def allow(self, policy: InlinePolicy, scope: Construct) -> None:
        """The pipeline role may create versions in this group, and read the group."""
        stack = stack_of(scope)
        # SageMaker writes model package ARNs in lower case; a name with capitals is listed
        # both ways so the grant holds however the ARN is spelt.
        names = sorted({self.registration.group_name, self.registration.group_name.lower()})
        policy.allow(["sagemaker:CreateModelPackage"],
                     [format_arn(stack, service="sagemaker", resource="model-package",
                                 resource_name=f"{n}/*") for n in names],
                     why="Versions are numbered at run time, inside this one group.")
        policy.allow(["sagemaker:DescribeModelPackageGroup"], [
            format_arn(stack, service="sagemaker", resource="model-package-group",
                       resource_name=n) for n in names])
        if self.metrics_function is not None:
            policy.allow(["lambda:InvokeFunction"], [self.metrics_function.function_arn])


def bind_registration(scope: Construct, where: str, options: ModelRegistration,
                      job: TrainingJob, metadata: Mapping[str, Any],
                      bucket: s3.IBucket, role: RoleMaker | None = None) -> BoundRegistration:
    """Resolves the options in ``scope``'s stack; creates the group unless it exists, the
    ``ModelMetrics`` step's function (its reports go to ``bucket``, the job's output bucket;
    ``role`` gives its role, when omitted one of its own), and the deployment account's read
    of the artifacts."""
    if not isinstance(options, ModelRegistration):
        raise ValueError(f"{where}: registration must be a ModelRegistration, got "
                         f"{type(options).__name__}")
    image_uri = options.inference_image_uri
    if image_uri is None:
        realtime = options.realtime_instance_types or default_instance_types(job)
        try:
            image_uri, _ = dlc_image_uri(scope, inference_dlc(job, realtime[0]))
        except ValueError as error:
            raise ValueError(f"{where}: registration: {error}; give ModelRegistration("
                             f"inference_image_uri=...), an image that serves this model") \
                from None
    registration = resolve(where, options, job, image_uri, metadata)
    benchmark = options.benchmark
    if benchmark is not None:
        given = (benchmark.framework.describe() if isinstance(benchmark, BenchmarkVerdict)
                 else type(benchmark).__name__)
        if not isinstance(benchmark, BenchmarkVerdict) or benchmark.framework != job.framework \
                or not registration.metrics:
            raise ValueError(
                f"{where}: registration: benchmark must be a CompilerBenchmark of this "
                f"pipeline's framework ({job.framework.describe()}) on a pipeline that reports "
                f"a metric for ModelMetrics to record the verdict with, got {given}"
                f"{'' if registration.metrics else ' and no reported metric'}")
        registration = replace(registration,
                               benchmark_parameter=benchmark.decision_parameter_name)
    stack = stack_of(scope)
    function = None
    if registration.metrics:
        function = _metrics_function(scope, registration, bucket, job.pipeline_name, benchmark,
                                     role)
        registration = replace(registration, report_bucket=bucket.bucket_name,
                               metrics_function_arn=function.function_arn)
    if options.deployment_account is not None:
        let_deployment_account_read(scope, bucket, job.pipeline_name,
                                     options.deployment_account)
    group_arn = format_arn(stack, service="sagemaker", resource="model-package-group",
                           resource_name=registration.group_name)
    group = None
    if not options.existing_group:
        group = sagemaker.CfnModelPackageGroup(
            scope, "ModelPackageGroup", model_package_group_name=registration.group_name,
            model_package_group_description=f"Model versions of pipeline {job.pipeline_name}",
            model_package_group_policy=group_policy(stack, group_arn, registration.group_name,
                                                     options.deployment_account))
        # Versions outlive a stack: deleting the group would orphan what is deployed from it.
        group.apply_removal_policy(RemovalPolicy.RETAIN)
    return BoundRegistration(registration, group_arn, group, function)


def _metrics_function(scope: Construct, registration: Registration, bucket: s3.IBucket,
                      pipeline_name: str, benchmark: BenchmarkVerdict | None,
                      role: RoleMaker | None) -> lambda_.Function:
    """Writes this pipeline's reports, and reads its own reports and its group's versions
    where it compares with approved versions; nothing else. A given role takes the key and
    verdict grants as statements of the policy (an immutable one's warning lists them)."""
    stack = stack_of(scope)
    policy = InlinePolicy()
    reports = f"{registration.report_prefix}/"
    policy.allow_prefix(bucket.bucket_name, reports, ["s3:PutObject"],
                        why="One report per execution, named by its id, under this pipeline's "
                            "report prefix only.")
    if registration.regression is not None:
        policy.allow_prefix(bucket.bucket_name, reports, ["s3:GetObject"],
                            why="It reads the latest approved version's report, which this "
                                "pipeline wrote under its report prefix.")
        names = sorted({registration.group_name, registration.group_name.lower()})
        policy.allow(["sagemaker:DescribeModelPackage"], [
            format_arn(stack, service="sagemaker", resource="model-package",
                       resource_name=f"{n}/*") for n in names],
            why="Versions are numbered at run time, inside this one group.")
        policy.allow(["sagemaker:ListModelPackages"], ["*"],
                     why="sagemaker:ListModelPackages supports no resource-level permission; "
                         "it lists metadata only, and reads are limited to this group.")
    # SSE-KMS: a data key to write, decrypt to read.
    key_actions = ["kms:GenerateDataKey", "kms:Decrypt"]
    if role is not None:
        if bucket.encryption_key is not None:
            policy.allow(key_actions, [bucket.encryption_key.key_arn])
        if benchmark is not None:
            policy.allow(DECISION_READ_ACTIONS, [benchmark.decision_parameter_arn])
    function = step_function(
        scope, "ModelMetrics", module="model_metrics", policy=policy,
        description=f"Writes the model-quality report of each run of pipeline {pipeline_name}",
        purpose="It writes one report to S3 per run, from the pipeline's Lambda step",
        timeout=Duration.seconds(60), role=role)
    if role is None:
        if bucket.encryption_key is not None and function.role is not None:
            bucket.encryption_key.grant(function.role, *key_actions)
        if benchmark is not None:
            benchmark.grant_read_decision(function)
    return function
