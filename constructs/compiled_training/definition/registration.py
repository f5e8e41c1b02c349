"""Retraining that ends in a model version, as pipeline-definition steps: a quality gate, then
a Model Registry entry.

`Registration` is a registration resolved to plain data (strings, possibly CDK tokens), from
which `add_registration` builds the gate and the ``RegisterModel`` step purely, as the SageMaker
SDK v2's ``RegisterModel`` (a ``ModelStep``) writes them; and what a job reports that a gate may
read (`declared_metrics`). The construct side, `pipelines/registration.py`, resolves a team's
`ModelRegistration` into a `Registration`.

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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiled_training.catalog.api_shapes import is_token
from compiled_training.definition.training import parameter_declarations
from compiled_training.values.job import MetricDefinition, Parameter, TrainingJob
from compiled_training_runtime import contract

GATE_STEP = "QualityGate"
FAIL_STEP = "QualityGateFailed"
REGISTER_STEP = "RegisterModel"
METRICS_STEP = "ModelMetrics"
REGRESSION_STEP = "NoWorseThanApproved"
REGRESSION_FAIL_STEP = "WorseThanApproved"
REPORT_FILE = "statistics.json"
REPORT_FOLDER = "model-metrics"
# CreateModelPackageGroup's pattern for ModelPackageGroupName.
# CustomerMetadataProperties values may hold letters, digits, spaces and _.:/=+-@ only.
_METADATA_UNSAFE = re.compile(r"[^\w .:/=+@-]")
# XGBoost's eval_metric values where higher is better (its documentation); the rest are errors.
_XGBOOST_MAXIMIZED = ("auc", "aucpr", "map", "ndcg", "pre")
_MINIMIZED_WORDS = ("loss", "error", "rmse", "mae", "mape", "mse")
# The channel held-out metrics are computed on, by the runtime and by built-in XGBoost; their
# metrics are named validation_* and validation:* respectively.
_VALIDATION = contract.CHANNEL_VALIDATION
_HELD_OUT = re.compile(rf"^{_VALIDATION}[_:]")


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


# --- what the job reports --------------------------------------------------------------------

# Metric names that say their value is a fraction, as whole words: a gate's threshold is in [0, 1].
_FRACTIONS = ("accuracy", "auc", "f1", "precision", "recall")


def metric_definitions_for(framework: Any, given: Sequence[MetricDefinition] | Any
                           ) -> list[dict[str, str]]:
    """``MetricDefinitions``: the team's own, or the runtime's for a script-mode job."""
    if given is not None:
        return [{"Name": m.name, "Regex": m.regex} for m in given
                if isinstance(m, MetricDefinition)]
    return contract.metric_definitions() if framework.runs_script else []


def metric_definition_problems(job: TrainingJob) -> list[str]:
    """What SageMaker would refuse, or never read, in the job's metric definitions: a regex
    that does not compile or has other than one group, a name given twice (the limits on
    their count and lengths are botocore's, checked with the request)."""
    problems, names = [], [m["Name"] for m in job.metric_definitions]
    if names and not job.framework.runs_script:
        return [f"metric_definitions are read from a script's log, and {job.framework.describe()} "
                f"runs its own algorithm, which reports <channel>:<eval_metric>: drop them"]
    for metric in job.metric_definitions:
        name, regex = metric["Name"], metric["Regex"]
        try:
            groups = re.compile(regex).groups
        except re.error as error:
            problems.append(f"metric_definitions {name!r}: regex {regex!r} does not compile "
                            f"({error})")
            continue
        if groups != 1:
            problems.append(f"metric_definitions {name!r}: regex {regex!r} has {groups} "
                            f"groups, where SageMaker reads the value from exactly one: "
                            f"capture the number alone, as in {name}=([0-9.]+)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"metric_definitions name {', '.join(twice)} more than once: each "
                        f"metric once")
    return problems


def threshold_problem(metric: str, threshold: float | None,
                      given_as: str = "gate_threshold") -> str | None:
    """Why a threshold (``given_as``: where it was given) cannot be meant for a metric whose name
    says it is a fraction."""
    words = set(re.split(r"[^a-z0-9]+", metric.lower()))
    if threshold is None or not words & set(_FRACTIONS) or 0 <= threshold <= 1:
        return None
    percent = f": for {threshold:g} % give {threshold / 100:g}" if 10 <= threshold <= 100 \
        else ""
    return (f"{given_as} {threshold!r} is outside [0, 1], the range of {metric!r} (a "
            f"fraction, as its name says){percent}")


def gate_thresholds(definition: Mapping[str, Any]) -> dict[str, str]:
    """The gate metric of each threshold parameter in a pipeline definition this library
    wrote (its ``RegisterModel`` step records both), by parameter name."""
    found: dict[str, str] = {}
    steps = list(definition.get("Steps", []))
    while steps:
        step = steps.pop()
        arguments = step.get("Arguments", {}) if isinstance(step, Mapping) else {}
        steps += [*arguments.get("IfSteps", []), *arguments.get("ElseSteps", [])]
        metadata = arguments.get("CustomerMetadataProperties", {})
        if step.get("Type") == "RegisterModel" and "gate_metric" in metadata:
            for value in metadata.get("gate_threshold", {}).get("Std:Join", {}).get("Values", []):
                reference = value.get("Get", "") if isinstance(value, Mapping) else ""
                if reference.startswith("Parameters."):
                    found[reference.removeprefix("Parameters.")] = metadata["gate_metric"]
    return found


# --- resolving the options ----------------------------------------------------------------

def declared_metrics(job: TrainingJob) -> dict[str, bool]:
    """Metrics the training job reports, each with whether higher is better.

    Script-mode jobs report what their ``MetricDefinitions`` declare, the held-out ones
    (``validation_*``) only with a ``validation`` channel: the runtime evaluates on that channel
    alone. Built-in XGBoost takes no metric definitions: it reports ``<channel>:<eval_metric>``
    for each input channel and each of its ``eval_metric`` hyperparameter's metrics.
    """
    if job.framework.runs_script:
        # The runtime's held-out metrics need the validation channel; a team's own, declared
        # by the team, are taken as reported.
        return {m["Name"]: not any(w in m["Name"] for w in _MINIMIZED_WORDS)
                for m in job.metric_definitions
                if _validated(job) or not _HELD_OUT.match(m["Name"])
                or m["Name"] not in contract.METRIC_NAMES}
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


def metadata_value(value: str) -> str:
    """A customer metadata value: the characters the API refuses become spaces, at most 256."""
    return value if is_token(value) else _METADATA_UNSAFE.sub(" ", value)[:256]
