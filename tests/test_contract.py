"""The runtime's metric lines, read back through the regexes the construct declares."""

from __future__ import annotations

import re

import pytest

from compiled_training_runtime import contract
from tests.helpers import definitions


def test_every_metric_line_field_is_extracted_by_its_regex():
    line = contract.format_metric_line(
        120, {"train_loss": 0.4310, "samples_per_second": 812.5, "validation_accuracy": 0.9125,
              "validation_loss": 1.5e-3})
    extracted = {d["Name"]: float(re.search(d["Regex"], line).group(1))
                 for d in contract.metric_definitions()}
    assert extracted == {"train_loss": 0.431, "samples_per_second": 812.5,
                         "validation_accuracy": 0.9125, "validation_loss": 0.0015}


def test_a_metric_absent_from_a_line_is_not_matched():
    line = contract.format_metric_line(3, {"train_loss": 2.0})
    validation = next(d for d in contract.metric_definitions() if d["Name"] == "validation_loss")
    assert re.search(validation["Regex"], line) is None


def test_construct_declares_the_contract_regexes(reference_assembly):
    template = reference_assembly.get_stack_by_name("DocumentClassification").template
    (definition,) = definitions(template)
    declared = definition["Steps"][0]["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"]
    assert declared == contract.metric_definitions()


def test_fails_on_an_unknown_metric_name():
    with pytest.raises(ValueError, match=r"unknown metric names \['accuracy'\]"):
        contract.format_metric_line(1, {"accuracy": 1.0})


