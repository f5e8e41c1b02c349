"""Writes a run's model-quality report and compares it with the latest approved version.

Pipelines invokes it as the ``ModelMetrics`` Lambda step of a `TrainingPipeline` with a
registration, after the training step, with the job's final metrics. It writes them to S3 in
the format of SageMaker's model-quality reports (``{"<problem>_metrics": {name: {"value": v,
"standard_deviation": "NaN"}}}``), which the ``RegisterModel`` step references as the
version's ``ModelMetrics``, and returns the report's URI.

With ``max_regression`` (a pipeline parameter) it also finds the group's latest approved
version, reads its report, and says whether this run's gate metric is worse than that one's by
more than ``max_regression``. A group with no approved version, or whose latest approved
version has no report of this pipeline's (under ``reports``) holding the metric, has nothing
to compare with: the run passes and the reason says so.

With ``benchmark_decision`` (a `CompilerBenchmark`'s SSM parameter) it returns the verdict
recorded there, for the version's metadata.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import urlparse

import boto3

REPORT_CONTENT_TYPE = "application/json"
# Copies (the asset holds this module alone), held equal to the originals by test_contract:
# the decision function's FIELDS (what it records) and registration.metadata_value.
BENCHMARK_FIELDS = ("verdict", "arm", "speedup", "quality_drop", "comparison")


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    metrics = parse_metrics(event["metrics"])
    report = {"version": 0.0, f"{event['problem_type']}_metrics": {
        name: {"value": value, "standard_deviation": "NaN"} for name, value in metrics.items()}}
    s3 = boto3.client("s3")
    s3.put_object(Bucket=event["bucket"], Key=event["key"], ContentType=REPORT_CONTENT_TYPE,
                  Body=json.dumps(report, indent=2, sort_keys=True).encode())
    result: dict[str, Any] = {"statistics": f"s3://{event['bucket']}/{event['key']}"}
    if "max_regression" in event:
        result.update(compare_with_approved(event, metrics, s3))
    if "benchmark_decision" in event:
        value = boto3.client("ssm").get_parameter(Name=event["benchmark_decision"])
        result["compiler_benchmark"] = benchmark_summary(value["Parameter"]["Value"])
    return result


def benchmark_summary(value: str) -> str:
    """A `CompilerBenchmark`'s recorded verdict, as one line of metadata."""
    decision = json.loads(value)
    return metadata_text(" ".join(f"{name} {decision[name]}" for name in BENCHMARK_FIELDS
                                  if name in decision))


def parse_metrics(text: str) -> dict[str, float]:
    """``name=value,name=value`` (what the step's arguments join) to numbers."""
    metrics = {}
    for pair in text.split(","):
        name, _, value = pair.partition("=")
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"metric {name} is {value}: no report for a model that diverged")
        metrics[name] = number
    return metrics


def compare_with_approved(event: dict[str, Any], metrics: dict[str, float],
                          s3: Any) -> dict[str, Any]:
    metric, higher = event["gate_metric"], bool(event["higher_is_better"])
    allowed = float(event["max_regression"])
    value = metrics[metric]
    sagemaker = boto3.client("sagemaker")
    approved = sagemaker.list_model_packages(
        ModelPackageGroupName=event["group"], ModelApprovalStatus="Approved",
        SortBy="CreationTime", SortOrder="Descending", MaxResults=1)["ModelPackageSummaryList"]
    if not approved:
        return _outcome(True, "", f"no approved version in group {event['group']} yet")
    arn = approved[0]["ModelPackageArn"]
    baseline = _approved_value(sagemaker.describe_model_package(ModelPackageName=arn),
                               metric, event["reports"], s3)
    if baseline is None:
        return _outcome(True, arn, f"approved version {arn} has no report of {metric} under "
                                   f"{event['reports']}")
    regression = baseline - value if higher else value - baseline
    worse = "below" if higher else "above"
    return _outcome(regression <= allowed, arn, (
        f"{metric} {value:g} is {abs(regression):g} {worse if regression > 0 else 'better than'}"
        f" approved version {arn} at {baseline:g} and at most {allowed:g} worse is allowed"))


def _approved_value(package: dict[str, Any], metric: str, reports: str,
                    s3: Any) -> float | None:
    """The metric in a version's model-quality report, when this pipeline wrote one (under
    ``reports``, the only place this function may read) holding it."""
    statistics = package.get("ModelMetrics", {}).get("ModelQuality", {}).get("Statistics")
    if not statistics or not statistics["S3Uri"].startswith(reports):
        return None
    location = urlparse(statistics["S3Uri"])
    body = s3.get_object(Bucket=location.netloc, Key=location.path.lstrip("/"))["Body"].read()
    for name, values in json.loads(body).items():
        if name.endswith("_metrics") and metric in values:
            return float(values[metric]["value"])
    return None


def _outcome(within: bool, version: str, reason: str) -> dict[str, Any]:
    return {"within_tolerance": within, "approved_version": version or "none",
            "comparison": metadata_text(reason)}


def metadata_text(text: str) -> str:
    """Text as a version's customer metadata value: letters, digits, spaces and _.:/=+@-
    only, at most 256 characters."""
    return re.sub(r"[^\w .:/=+@-]", " ", text)[:256]
