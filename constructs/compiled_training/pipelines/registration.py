"""Retraining that ends in a model version: a quality gate, then a Model Registry entry.

`ModelRegistration` is what a team asks for; `Registration` is the same resolved to plain
data (strings, possibly CDK tokens), from which `add_registration` builds the gate and the
``RegisterModel`` step purely, as the SageMaker SDK v2's ``RegisterModel`` (a ``ModelStep``)
writes them. `bind_registration` does the construct side: the Model Package Group, the
inference image, the pipeline role's permission.

Deliberate differences from the SDK's output, each for a reason:

- the step is named ``RegisterModel``; the SDK appends ``-RegisterModel`` to its collection name;
- ``ModelMetrics`` holds the model-quality report only; the SDK adds empty ``Bias`` and
  ``Explainability`` objects.

Before the gate, a ``ModelMetrics`` Lambda step writes the run's held-out metrics (and the gate
metric) to S3 as a model-quality report, which the version references as its ``ModelMetrics``;
with ``max_regression`` it also compares the gate metric with the latest approved version's,
and a second condition after the gate registers only a run no worse than that by more than
the allowed amount. The gate's metric, value and threshold also go into
``CustomerMetadataProperties``, which the registry shows and the notification reads.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aws_cdk import Annotations, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training._internal.api_shapes import api_shape, is_token
from compiled_training._internal.definition import parameter_declarations
from compiled_training._internal.dlc import DlcImage, resolve_dlc
from compiled_training._internal.dlc_uri import dlc_image_uri
from compiled_training._internal.handlers import step_function
from compiled_training._internal.instances import accelerator
from compiled_training._internal.policy import InlinePolicy
from compiled_training._internal.stack_reads import aws_partition, format_arn, stack_of
from compiled_training.pipelines.job import Parameter, TrainingJob
from compiled_training_runtime import contract
from constructs import Construct

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_  # only a registration's metrics step loads it

    # The benchmark's module imports the pipelines' base, which imports this one.
    from compiled_training.pipelines.compiler_benchmark import CompilerBenchmark

APPROVAL_STATUSES = ("PendingManualApproval", "Approved")
GATE_STEP = "QualityGate"
FAIL_STEP = "QualityGateFailed"
REGISTER_STEP = "RegisterModel"
METRICS_STEP = "ModelMetrics"
REGRESSION_STEP = "NoWorseThanApproved"
REGRESSION_FAIL_STEP = "WorseThanApproved"
REGRESSION_PARAMETER = "MaxRegressionFromApproved"
REPORT_FILE = "statistics.json"
REPORT_FOLDER = "model-metrics"
# CreateModelPackageGroup's pattern for ModelPackageGroupName.
_GROUP_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# CustomerMetadataProperties values may hold letters, digits, spaces and _.:/=+-@ only.
_METADATA_UNSAFE = re.compile(r"[^\w .:/=+@-]")
_GPU_DEFAULTS = ("ml.g5.xlarge", "ml.g5.2xlarge")
_CPU_DEFAULTS = ("ml.m5.large", "ml.m5.xlarge")
# XGBoost's eval_metric values where higher is better (its documentation); the rest are errors.
_XGBOOST_MAXIMIZED = ("auc", "aucpr", "map", "ndcg", "pre")
_MINIMIZED_WORDS = ("loss", "error", "rmse", "mae", "mape", "mse")
# The channel held-out metrics are computed on, by the runtime and by built-in XGBoost; their
# metrics are named validation_* and validation:* respectively.
_VALIDATION = contract.CHANNEL_VALIDATION
_HELD_OUT = re.compile(rf"^{_VALIDATION}[_:]")


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
    benchmark: CompilerBenchmark | None = None
    """A `CompilerBenchmark` of this pipeline's framework: each version then records the
    benchmark's verdict as it stood when the run finished (``compiler_benchmark`` metadata:
    verdict, arm, speedup, quality lost, comparison in S3); when omitted, none."""
    max_regression: float | None = None
    """When given, a run is registered only if its gate metric is no worse than the group's
    latest approved version's by more than this (the default of a Float pipeline parameter,
    ``MaxRegressionFromApproved``, overridable per run), read at run time; when omitted, no
    comparison with approved versions."""


@dataclass(frozen=True)
class Gate:
    metric: str
    higher_is_better: bool
    threshold: Parameter


@dataclass(frozen=True)
class Registration:
    """The registration resolved to plain data: what the definition builder reads."""

    group_name: str
    approval_status: str
    image_uri: str
    realtime_instance_types: Sequence[str]
    transform_instance_types: Sequence[str]
    content_types: Sequence[str]
    response_types: Sequence[str]
    gate: Gate | None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    metrics: Sequence[tuple[str, str]] = ()
    """The metrics of the model-quality report: (the job's name, the report's name) pairs;
    empty: no report and no ``ModelMetrics``."""
    problem_type: str = "binary_classification"
    """The report's kind, as SageMaker's model-quality reports name it."""
    report_bucket: str = ""
    report_prefix: str = ""
    """The reports' key prefix in ``report_bucket``: one report per execution below it."""
    metrics_function_arn: str = ""
    regression: Parameter | None = None
    """Most the gate metric may be worse than the latest approved version's; None: no check."""
    benchmark_parameter: str = ""
    """The SSM parameter of a benchmark's verdict, recorded with each version; "": none."""

    @property
    def reports_uri(self) -> str:
        return f"s3://{self.report_bucket}/{self.report_prefix}/"


# --- the pure definition builder ---------------------------------------------------------

def add_registration(definition: dict[str, Any], job: TrainingJob,
                     registration: Registration) -> dict[str, Any]:
    """``definition`` with the gate and the registration after ``job``'s training step."""
    register = register_step(job, registration)
    steps = [*definition["Steps"]]
    if registration.metrics:
        steps.append(metrics_step(job, registration))
    added = [p for p in (registration.gate.threshold if registration.gate else None,
                         registration.regression) if p is not None]
    declared = {p["Name"] for p in definition["Parameters"]}
    parameters = [*definition["Parameters"],
                  *parameter_declarations(p for p in added if p.name not in declared)]
    if registration.gate is None:
        steps.append(register)
    else:
        if registration.regression is not None:
            register = regression_step(register)
        steps.append(gate_step(job, registration.gate, register))
    return {**definition, "Parameters": parameters, "Steps": steps}


def metric_value(job: TrainingJob, metric: str) -> dict[str, str]:
    """The final value of a metric the training job reports."""
    return {"Get": f"Steps.{job.step_name}.FinalMetricDataList['{metric}'].Value"}


def metrics_output(name: str) -> dict[str, str]:
    """An output of the ``ModelMetrics`` step."""
    return {"Get": f"Steps.{METRICS_STEP}.OutputParameters['{name}']"}


def metrics_step(job: TrainingJob, registration: Registration) -> dict[str, Any]:
    """The Lambda step that writes the model-quality report (and compares with the latest
    approved version, with ``regression``)."""
    values: list[Any] = []
    for index, (metric, name) in enumerate(registration.metrics):
        values += [("," if index else "") + f"{name}=", metric_value(job, metric)]
    arguments: dict[str, Any] = {
        "metrics": {"Std:Join": {"On": "", "Values": values}},
        "problem_type": registration.problem_type,
        "bucket": registration.report_bucket,
        "key": {"Std:Join": {"On": "/", "Values": [
            registration.report_prefix, {"Get": "Execution.PipelineExecutionId"},
            REPORT_FILE]}},
    }
    outputs = [("statistics", "String")]
    gate = registration.gate
    if registration.regression is not None and gate is not None:
        arguments.update({
            "group": registration.group_name,
            "gate_metric": dict(registration.metrics)[gate.metric],
            "higher_is_better": gate.higher_is_better,
            "max_regression": registration.regression.ref(),
            "reports": registration.reports_uri,
        })
        outputs += [("within_tolerance", "Boolean"), ("approved_version", "String"),
                    ("comparison", "String")]
    if registration.benchmark_parameter:
        arguments["benchmark_decision"] = registration.benchmark_parameter
        outputs.append(("compiler_benchmark", "String"))
    return {
        "Name": METRICS_STEP,
        "Type": "Lambda",
        "Arguments": arguments,
        "FunctionArn": registration.metrics_function_arn,
        "OutputParameters": [{"OutputName": n, "OutputType": t} for n, t in outputs],
    }


def regression_step(register: dict[str, Any]) -> dict[str, Any]:
    """Registers only a run no worse than the latest approved version by more than allowed;
    otherwise fails with the comparison."""
    return {
        "Name": REGRESSION_STEP,
        "Type": "Condition",
        "Arguments": {
            "Conditions": [{"Type": "Equals", "LeftValue": metrics_output("within_tolerance"),
                            "RightValue": True}],
            "IfSteps": [register],
            "ElseSteps": [{
                "Name": REGRESSION_FAIL_STEP,
                "Type": "Fail",
                "Arguments": {"ErrorMessage": {"Std:Join": {"On": "", "Values": [
                    "Model not registered: ", metrics_output("comparison")]}}},
            }],
        },
    }


def gate_step(job: TrainingJob, gate: Gate, register: dict[str, Any]) -> dict[str, Any]:
    value = metric_value(job, gate.metric)
    comparison = "GreaterThanOrEqualTo" if gate.higher_is_better else "LessThanOrEqualTo"
    below = "below" if gate.higher_is_better else "above"
    return {
        "Name": GATE_STEP,
        "Type": "Condition",
        "Arguments": {
            "Conditions": [{"Type": comparison, "LeftValue": value,
                            "RightValue": gate.threshold.ref()}],
            "IfSteps": [register],
            "ElseSteps": [{
                "Name": FAIL_STEP,
                "Type": "Fail",
                "Arguments": {"ErrorMessage": {"Std:Join": {"On": "", "Values": [
                    f"Model not registered: {gate.metric} ", value, f" is {below} the "
                    f"threshold {gate.threshold.name} ", gate.threshold.ref()]}}},
            }],
        },
    }


def register_step(job: TrainingJob, registration: Registration) -> dict[str, Any]:
    """The ``RegisterModel`` step: ``CreateModelPackage`` arguments, as the SDK v2 writes."""
    container = {"Image": registration.image_uri,
                 "ModelDataUrl": {"Get": f"Steps.{job.step_name}.ModelArtifacts.S3ModelArtifacts"}}
    metadata = dict(registration.metadata)
    if registration.gate is not None:
        gate = registration.gate
        metadata.update({"gate_metric": gate.metric, "gate_value": _text(metric_value(
            job, gate.metric)), "gate_threshold": _text(gate.threshold.ref())})
    if registration.regression is not None:
        metadata["approved_comparison"] = metrics_output("comparison")
    if registration.benchmark_parameter:
        metadata["compiler_benchmark"] = metrics_output("compiler_benchmark")
    arguments: dict[str, Any] = {
        "ModelPackageGroupName": registration.group_name,
        "ModelPackageDescription": registration.description,
        "CustomerMetadataProperties": metadata,
        "InferenceSpecification": {
            "Containers": [container],
            "SupportedContentTypes": list(registration.content_types),
            "SupportedResponseMIMETypes": list(registration.response_types),
            "SupportedRealtimeInferenceInstanceTypes": list(registration.realtime_instance_types),
            "SupportedTransformInstanceTypes": list(registration.transform_instance_types),
        },
        "ModelApprovalStatus": registration.approval_status,
        "SkipModelValidation": "None",
    }
    if registration.metrics:
        arguments["ModelMetrics"] = {"ModelQuality": {"Statistics": {
            "ContentType": "application/json", "S3Uri": metrics_output("statistics")}}}
    return {"Name": REGISTER_STEP, "Type": "RegisterModel", "Arguments": arguments,
            "Description": registration.description}


def _text(value: Any) -> dict[str, Any]:
    return {"Std:Join": {"On": "", "Values": [value]}}


# --- resolving the options ----------------------------------------------------------------

def declared_metrics(job: TrainingJob) -> dict[str, bool]:
    """Metrics the training job reports, each with whether higher is better.

    Script-mode jobs report what their ``MetricDefinitions`` declare, the held-out ones
    (``validation_*``) only with a ``validation`` channel: the runtime evaluates on that channel
    alone. Built-in XGBoost takes no metric definitions: it reports ``<channel>:<eval_metric>``
    for each input channel and each of its ``eval_metric`` hyperparameter's metrics.
    """
    if job.framework.runs_script:
        return {m["Name"]: not any(w in m["Name"] for w in _MINIMIZED_WORDS)
                for m in job.metric_definitions
                if _validated(job) or not _HELD_OUT.match(m["Name"])}
    return {f"{channel.name}:{name}": name.split("@")[0] in _XGBOOST_MAXIMIZED
            for channel in job.channels for name in _eval_metrics(job)}


def _validated(job: TrainingJob) -> bool:
    """Whether the job has the channel held-out metrics are computed on."""
    return any(c.name == _VALIDATION for c in job.channels)


def _eval_metrics(job: TrainingJob) -> list[str]:
    """Built-in XGBoost's ``eval_metric`` hyperparameter, as a list."""
    eval_metric = job.hyperparameters.get("eval_metric")
    return str(eval_metric).split(",") if isinstance(eval_metric, str) else []


def default_gate_metric(job: TrainingJob) -> str:
    """A held-out metric: validation accuracy; built-in XGBoost's first ``eval_metric`` on the
    validation channel."""
    if job.framework.runs_script:
        return contract.DEFAULT_QUALITY_METRIC
    return f"{_VALIDATION}:{next(iter(_eval_metrics(job)), '<first eval_metric>')}"


def gate_metric_problem(job: TrainingJob, metric: str, declared: Mapping[str, bool],
                        defaulted: bool) -> str:
    """Why a gate on ``metric``, which the job does not report, would fail every run (not
    the synth), and the fix."""
    fixes = []
    if _HELD_OUT.match(metric) and not _validated(job):
        fixes.append(f"add a channel named {_VALIDATION!r} (held-out metrics, {_VALIDATION}_* "
                     f"and {_VALIDATION}:*, are reported on it only)")
    if not job.framework.runs_script and not _eval_metrics(job):
        fixes.append("set the eval_metric hyperparameter (built-in XGBoost reports "
                     "<channel>:<eval_metric> for each of its metrics)")
    fix = " and ".join(fixes)
    if declared:
        fix = f"{fix}, or name one of the reported metrics" if fix else \
            "name one of the reported metrics"
    return (f"gate_metric must be a metric the training job reports "
            f"({', '.join(declared) or 'none'}), got {metric!r}"
            f"{' (the default)' if defaulted else ''}{': ' + fix if fix else ''}")


def resolve(where: str, options: ModelRegistration, job: TrainingJob, image_uri: str,
            metadata: Mapping[str, Any]) -> Registration:
    """Checks the options against the job and botocore's enums; every problem in one message."""
    problems = []
    name = options.model_package_group_name
    if not isinstance(name, str) or not _GROUP_NAME.match(name):
        problems.append(f"model_package_group_name must be 1-63 letters, digits and hyphens, "
                        f"starting and ending with a letter or digit, got {name!r}")
    if options.approval_status not in APPROVAL_STATUSES:
        problems.append(f"approval_status must be one of {', '.join(APPROVAL_STATUSES)}, got "
                        f"{options.approval_status!r}")
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


def report_metrics(job: TrainingJob, gate: Gate | None) -> list[tuple[str, str]]:
    """The model-quality report's metrics: the held-out ones the job reports (only with a
    validation channel: a metric the job never prints would fail the step that reads it) and
    the gate's; each named as SageMaker's reports name them (``validation_accuracy`` ->
    ``accuracy``, ``validation:auc`` -> ``auc``)."""
    chosen = [m for m in declared_metrics(job)
              if _HELD_OUT.match(m) or (gate and m == gate.metric)]
    return [(m, _HELD_OUT.sub("", m)) for m in chosen]


def problem_type(job: TrainingJob) -> str:
    """The report's kind: from XGBoost's objective, or the runtime's ``num_labels``."""
    if not job.framework.runs_script:
        objective = str(job.hyperparameters.get("objective", ""))
        kinds = {"binary": "binary_classification", "multi": "multiclass_classification"}
        return kinds.get(objective.split(":")[0], "regression")
    labels = job.hyperparameters.get("num_labels", 2)
    multiclass = isinstance(labels, int) and labels > 2
    return "multiclass_classification" if multiclass else "binary_classification"


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


def metadata_value(value: str) -> str:
    """A customer metadata value: the characters the API refuses become spaces, at most 256."""
    return value if is_token(value) else _METADATA_UNSAFE.sub(" ", value)[:256]


def inference_dlc(job: TrainingJob, instance_type: str) -> DlcImage:
    """The framework's inference image of the training version (compilers are training-only)."""
    return resolve_dlc(job.framework, False, instance_type, scope="inference")


# --- the construct side --------------------------------------------------------------------

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
                      bucket: s3.IBucket) -> BoundRegistration:
    """Resolves the options in ``scope``'s stack; creates the group unless it exists, the
    ``ModelMetrics`` step's function (its reports go to ``bucket``, the job's output bucket),
    and the deployment account's read of the artifacts."""
    if not isinstance(options, ModelRegistration):
        raise ValueError(f"{where}: registration must be a ModelRegistration, got "
                         f"{type(options).__name__}")
    image_uri = options.inference_image_uri
    if image_uri is None:
        realtime = options.realtime_instance_types or default_instance_types(job)
        try:
            image_uri, _ = dlc_image_uri(scope, inference_dlc(job, realtime[0]))
        except ValueError as error:
            raise ValueError(f"{where}: registration: {error}; give inference_image_uri") \
                from None
    registration = resolve(where, options, job, image_uri, metadata)
    benchmark = options.benchmark
    if benchmark is not None:
        from compiled_training.pipelines.compiler_benchmark import CompilerBenchmark

        given = (benchmark.framework.describe() if isinstance(benchmark, CompilerBenchmark)
                 else type(benchmark).__name__)
        if not isinstance(benchmark, CompilerBenchmark) or benchmark.framework != job.framework \
                or not registration.metrics:
            raise ValueError(
                f"{where}: registration: benchmark must be a CompilerBenchmark of this "
                f"pipeline's framework ({job.framework.describe()}), on a pipeline whose runs "
                f"report a metric (a gate metric or a validation channel: the verdict is "
                f"recorded by the ModelMetrics step), got {given}"
                f"{'' if registration.metrics else ' and no reported metric'}")
        registration = replace(registration,
                               benchmark_parameter=benchmark.decision_parameter_name)
    stack = stack_of(scope)
    function = None
    if registration.metrics:
        function = _metrics_function(scope, registration, bucket, job.pipeline_name, benchmark)
        registration = replace(registration, report_bucket=bucket.bucket_name,
                               metrics_function_arn=function.function_arn)
    if options.deployment_account is not None:
        _let_deployment_account_read(scope, bucket, job.pipeline_name,
                                     options.deployment_account)
    group_arn = format_arn(stack, service="sagemaker", resource="model-package-group",
                           resource_name=registration.group_name)
    group = None
    if not options.existing_group:
        group = sagemaker.CfnModelPackageGroup(
            scope, "ModelPackageGroup", model_package_group_name=registration.group_name,
            model_package_group_description=f"Model versions of pipeline {job.pipeline_name}",
            model_package_group_policy=_group_policy(stack, group_arn, registration.group_name,
                                                     options.deployment_account))
        # Versions outlive a stack: deleting the group would orphan what is deployed from it.
        group.apply_removal_policy(RemovalPolicy.RETAIN)
    return BoundRegistration(registration, group_arn, group, function)


def _group_policy(stack: Stack, group_arn: str, name: str,
                  account: str | None) -> dict[str, Any] | None:
    if account is None:
        return None
    packages = format_arn(stack, service="sagemaker", resource="model-package",
                          resource_name=f"{name.lower()}/*")
    principal = iam.AccountPrincipal(account).arn
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DeploymentAccountReadsGroup", "Effect": "Allow",
         "Principal": {"AWS": principal},
         "Action": ["sagemaker:DescribeModelPackageGroup"], "Resource": group_arn},
        {"Sid": "DeploymentAccountReadsVersions", "Effect": "Allow",
         "Principal": {"AWS": principal},
         "Action": ["sagemaker:DescribeModelPackage", "sagemaker:ListModelPackages"],
         "Resource": packages},
    ]}


def _metrics_function(scope: Construct, registration: Registration, bucket: s3.IBucket,
                      pipeline_name: str, benchmark: CompilerBenchmark | None
                      ) -> lambda_.Function:
    """Writes this pipeline's reports, and reads its own reports and its group's versions
    where it compares with approved versions; nothing else."""
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
    function = step_function(
        scope, "ModelMetrics", module="model_metrics", policy=policy,
        description=f"Writes the model-quality report of each run of pipeline {pipeline_name}",
        purpose="It writes one report to S3 per run, from the pipeline's Lambda step",
        timeout=Duration.seconds(60))
    if bucket.encryption_key is not None and function.role is not None:
        # SSE-KMS: a data key to write, decrypt to read.
        bucket.encryption_key.grant(function.role, "kms:GenerateDataKey", "kms:Decrypt")
    if benchmark is not None:
        benchmark.grant_read_decision(function)
    return function


def _let_deployment_account_read(scope: Construct, bucket: s3.IBucket, pipeline_name: str,
                                 account: str) -> None:
    """The deployment account may read this pipeline's model archives and reports (the bucket
    policy), and decrypt them through S3 (the key policy); nothing else of the bucket."""
    principal = iam.AccountPrincipal(account)
    objects = [bucket.arn_for_objects(f"{pipeline_name}/output/*/output/model.tar.gz"),
               bucket.arn_for_objects(f"{pipeline_name}/{REPORT_FOLDER}/*")]
    added = bucket.add_to_resource_policy(iam.PolicyStatement(
        principals=[principal], actions=["s3:GetObject"],
        resources=objects)).statement_added
    key = bucket.encryption_key
    if key is not None:
        added = key.add_to_resource_policy(iam.PolicyStatement(
            principals=[principal], actions=["kms:Decrypt"], resources=["*"],
            # Only as S3 decrypts an object for it (which the bucket policy limits to these
            # objects). The bucket's own ARN cannot be named here: the bucket names this key,
            # so the key naming the bucket would be a dependency cycle.
            conditions={
                "StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"},
                "StringLike": {"kms:EncryptionContext:aws:s3:arn": f"arn:{aws_partition()}:s3:::*"},
            })).statement_added and added
    if not added:
        Annotations.of(scope).add_warning_v2(
            "compiled-training:ModelRegistration:DeploymentAccountRead",
            f"deployment_account {account} may read the group's versions but not their "
            f"artifacts: the output bucket (or its KMS key) is imported, so this stack cannot "
            f"add to its policy; grant s3:GetObject on {pipeline_name}/output/*/output/"
            f"model.tar.gz and {pipeline_name}/{REPORT_FOLDER}/* (and kms:Decrypt) there")
