"""A gate on a metric the team's script prints in its own format: ``metric_definitions`` are
the job's ``MetricDefinitions`` (checked at synth: one group, a regex that compiles, each name
once; the count and lengths are botocore's), the gate and the model-quality report read only
them, and a threshold outside a fraction's range is refused where the name says it is one."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from compiled_training import (
    Compiler,
    Framework,
    InputChannel,
    MetricDefinition,
    ModelRegistration,
    TrainingPipeline,
)
from tests.helpers import definitions, new_stack, validate_envelope, validate_job_arguments

F1 = MetricDefinition("f1", r"F1 score: ([0-9.]+)")


def _pipeline(stack: cdk.Stack, source_dir: Path, metrics: list[MetricDefinition] | None,
              **registration: object) -> TrainingPipeline:
    return TrainingPipeline(
        stack, "Classifier", pipeline_name="classifier", framework=Framework.pytorch("2.6.0"),
        compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
        source_dir=source_dir, entry_point="train.py", metric_definitions=metrics,
        channels=[InputChannel("train", "s3://team-data/clf/train/"),
                  InputChannel("validation", "s3://team-data/clf/validation/")],
        registration=ModelRegistration(model_package_group_name="classifier", **registration))


def test_the_gate_and_the_report_read_the_teams_own_metric_alone(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, [F1], gate_metric="f1", gate_threshold=0.8)
    (definition,) = definitions(Template.from_stack(stack).to_json())
    train, metrics, gate = definition["Steps"]
    assert train["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"] == [
        {"Name": "f1", "Regex": r"F1 score: ([0-9.]+)"}]
    # The report asks for f1 only: none of the runtime's metrics, which the script never prints.
    assert metrics["Arguments"]["metrics"]["Std:Join"]["Values"] == [
        "f1=", {"Get": "Steps.Train.FinalMetricDataList['f1'].Value"}]
    condition = gate["Arguments"]["Conditions"][0]
    assert condition["Type"] == "GreaterThanOrEqualTo"
    assert condition["LeftValue"] == {"Get": "Steps.Train.FinalMetricDataList['f1'].Value"}
    assert {"Name": "MinF1", "Type": "Float", "DefaultValue": 0.8} in definition["Parameters"]
    validate_envelope(definition)
    validate_job_arguments(definition)


def test_without_them_the_job_declares_the_runtimes_metrics(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, None)
    (definition,) = definitions(Template.from_stack(stack).to_json())
    names = [m["Name"] for m in
             definition["Steps"][0]["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"]]
    assert names == ["train_loss", "samples_per_second", "validation_loss", "validation_accuracy"]


def test_a_gate_on_a_metric_not_declared_names_the_ones_that_are(source_dir):
    with pytest.raises(ValueError, match=r"registration: gate_metric must be a metric the "
                                         r"training job reports \(f1\), got 'validation_accuracy' "
                                         r"\(the default\): name one of the reported metrics$"):
        _pipeline(new_stack(), source_dir, [F1])


@pytest.mark.parametrize(("metric", "threshold", "message"), [
    ("accuracy", 85, r"gate_threshold 85 is outside \[0, 1\], the range of 'accuracy' \(a "
                     r"fraction, as its name says\): for 85 % give 0.85"),
    ("macro_f1", 1.5, r"gate_threshold 1.5 is outside \[0, 1\], the range of 'macro_f1'"),
    ("val-auc", -0.1, r"gate_threshold -0.1 is outside \[0, 1\], the range of 'val-auc'"),
])
def test_a_threshold_outside_a_fractions_range_is_refused(source_dir, metric, threshold,
                                                           message):
    definition = MetricDefinition(metric, rf"{metric}=([0-9.]+)")
    with pytest.raises(ValueError, match=message):
        _pipeline(new_stack(), source_dir, [definition], gate_metric=metric,
                  gate_threshold=threshold)


@pytest.mark.parametrize(("metric", "threshold"), [
    ("accuracy", 0.85), ("accuracy", 1), ("perplexity", 85), ("f1_loss", 0.2), ("auroc", 3)])
def test_a_threshold_in_range_or_on_a_metric_of_another_kind_is_taken(source_dir, metric,
                                                                      threshold):
    definition = MetricDefinition(metric, rf"{metric}=([0-9.]+)")
    _pipeline(new_stack(), source_dir, [definition], gate_metric=metric,
              gate_threshold=threshold)


def test_bad_definitions_are_named_each_with_the_fix(source_dir):
    with pytest.raises(ValueError) as raised:
        _pipeline(new_stack(), source_dir,
                  [MetricDefinition("f1", r"F1 ([0-9.]+) in (\w+)"),
                   MetricDefinition("auc", r"AUC ([0-9.]+"), MetricDefinition("f1", "f1=(.*)")],
                  gate_metric="")
    message = str(raised.value)
    assert "metric_definitions 'f1': regex 'F1 ([0-9.]+) in (\\\\w+)' has 2 groups, where " \
           "SageMaker reads the value from exactly one" in message
    assert "metric_definitions 'auc': regex 'AUC ([0-9.]+' does not compile" in message
    assert "metric_definitions name f1 more than once: each metric once" in message


def test_botocores_limits_hold_the_count_and_lengths(source_dir):
    many = [MetricDefinition(f"m{i}", rf"m{i}=([0-9.]+)") for i in range(41)]
    with pytest.raises(ValueError, match=r"MetricDefinitions"):
        _pipeline(new_stack(), source_dir, many, gate_metric="")
    with pytest.raises(ValueError, match=r"MetricRegex|Regex"):
        _pipeline(new_stack(), source_dir, [MetricDefinition("f1", "(" + "x" * 500 + ")")],
                  gate_metric="")
