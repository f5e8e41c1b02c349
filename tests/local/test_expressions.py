"""The definition language as the local runner evaluates it, case by case: what SageMaker
Pipelines does with types, paths and conditions (its documentation's semantics, restated)."""

from __future__ import annotations

import pytest

from compiled_training.local.assembly import RunInputError
from compiled_training.local.expressions import (
    Context,
    StepFailed,
    Unsupported,
    condition_holds,
    parameter_values,
    typed,
)

COMPARISON = {"decision": {"gain": 0.35, "verdict": "ship", "f1-score": 0.8},
              "arms": [{"name": "baseline"}]}


def _context() -> Context:
    return Context({"Threshold": 0.2, "Name": "007", "Flag": True},
                   {"PipelineExecutionId": "abc"},
                   {"Train": {"FinalMetricDataList": {"acc": {"MetricName": "acc",
                                                              "Value": 0.9}}},
                    "Compare": {"PropertyFiles": {"Comparison": COMPARISON}}})


def _json_get(path: str) -> dict:
    return {"Std:JsonGet": {"PropertyFile": {"Get": "Steps.Compare.PropertyFiles.Comparison"},
                            "Path": path}}


@pytest.mark.parametrize(("path", "value"), [
    ("decision.gain", 0.35), ("$.decision.verdict", "ship"), ("decision.f1-score", 0.8),
    ("arms[0].name", "baseline"),
])
def test_json_get_reads_property_files_by_path(path, value):
    assert _context().evaluate(_json_get(path), "step X") == value


def test_join_writes_numbers_and_booleans_as_pipelines_does():
    join = {"Std:Join": {"On": "/", "Values": [
        "s3://b", {"Get": "Execution.PipelineExecutionId"}, {"Get": "Parameters.Flag"},
        {"Get": "Steps.Train.FinalMetricDataList['acc'].Value"}]}}
    assert _context().evaluate(join, "step X") == "s3://b/abc/true/0.9"


@pytest.mark.parametrize(("condition", "holds"), [
    ({"Type": "GreaterThanOrEqualTo", "LeftValue": _json_get("decision.gain"),
      "RightValue": {"Get": "Parameters.Threshold"}}, True),
    ({"Type": "LessThan", "LeftValue": {"Get": "Steps.Train.FinalMetricDataList['acc'].Value"},
      "RightValue": 0.5}, False),
    ({"Type": "Equals", "LeftValue": "1.0", "RightValue": "1"}, False),  # strings stay strings
    ({"Type": "Equals", "LeftValue": {"Get": "Parameters.Name"}, "RightValue": "007"}, True),
    ({"Type": "In", "QueryValue": _json_get("decision.verdict"), "Values": ["hold", "ship"]},
     True),
    ({"Type": "In", "QueryValue": 1, "Values": [True]}, False),  # a boolean is no number
    ({"Type": "Not", "Condition": {"Type": "Equals", "LeftValue": 1, "RightValue": 1}}, False),
    ({"Type": "Or", "Conditions": [{"Type": "Equals", "LeftValue": 1, "RightValue": 2},
                                   {"Type": "Equals", "LeftValue": 2, "RightValue": 2}]}, True),
])
def test_conditions_hold_as_pipelines_evaluates_them(condition, holds):
    assert condition_holds(condition, _context(), "step Gate") is holds


def test_fails_on_comparing_a_number_with_a_string():
    with pytest.raises(StepFailed, match=r"^step Gate: cannot compare number 0.9 with string "
                                         r"'0.5'$"):
        condition_holds({"Type": "GreaterThan", "LeftValue": 0.9, "RightValue": "0.5"},
                        _context(), "step Gate")


@pytest.mark.parametrize(("expression", "message"), [
    ({"Get": "Steps.Later.TrainingJobName"}, r"reads step 'Later', which has not run"),
    ({"Get": "Execution.Nope"}, r"execution variable Nope is not implemented"),
    ({"Std:Select": {}}, r"does not implement Std:Select"),
])
def test_refuses_what_it_does_not_implement_naming_where(expression, message):
    with pytest.raises(Unsupported, match=message):
        _context().evaluate(expression, "step X: Arguments")


@pytest.mark.parametrize(("value", "kind", "expected"), [
    ("7", "Integer", 7), ("0.5", "Float", 0.5), ("true", "Boolean", True), (3, "String", "3"),
])
def test_lambda_outputs_are_typed_as_declared(value, kind, expected):
    assert typed(value, kind, "output") == expected


def test_fails_on_a_lambda_output_that_is_not_its_type():
    with pytest.raises(StepFailed, match=r"output 'version': 'two' is not an Integer"):
        typed("two", "Integer", "output 'version'")


def test_parameters_take_typed_overrides_and_refuse_the_rest():
    declared = [{"Name": "Epochs", "Type": "Integer", "DefaultValue": 3},
                {"Name": "Fast", "Type": "Boolean", "DefaultValue": False}]
    assert parameter_values(declared, {"Fast": "true"}) == {"Epochs": 3, "Fast": True}
    with pytest.raises(RunInputError, match=r"--param Fast: 'maybe' is not a Boolean"):
        parameter_values(declared, {"Fast": "maybe"})
