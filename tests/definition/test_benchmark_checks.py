"""The benchmark's own checks on plain values: each broken beside its compliant twin (the
constructs' tests synthesize them whole)."""

from __future__ import annotations

import re

import pytest

from compiled_training import BenchmarkArm, Compiler
from compiled_training.definition.benchmark import arm_name_problems, large_batch_problems


def _arm(name: str) -> BenchmarkArm:
    return BenchmarkArm(name, Compiler.neuron_xla(), "ml.trn1.32xlarge")


def test_well_formed_arm_names_of_their_own_pass():
    assert arm_name_problems([_arm("trainium"), _arm("trn2-native")]) == []


@pytest.mark.parametrize(("names", "problem"), [
    (["Trainium"], r"^arms: name must be 1 to 41 characters, .* got 'Trainium'$"),
    (["a" * 42], r"^arms: name must be 1 to 41 characters"),
    (["two--hyphens"], r"got 'two--hyphens'$"),
    (["baseline"], r"^arms: name 'baseline' is taken \(its step .* is arm 'baseline''s; "),
    (["trainium", "trainium"], r"^arms: name 'trainium' is taken"),
])
def test_an_arm_name_malformed_or_taken_is_named(names, problem):
    (found,) = arm_name_problems([_arm(name) for name in names])
    assert re.search(problem, found), found


def test_a_large_batch_above_an_integer_batch_passes():
    assert large_batch_problems(None, {}) == []
    assert large_batch_problems(48, {"batch_size": 32}) == []


@pytest.mark.parametrize(("large", "hyperparameters", "problem"), [
    (48, {}, "large_batch_size needs an integer hyperparameters['batch_size'] to scale the "
             "learning rate from, got None"),
    (48, {"batch_size": True}, "large_batch_size needs an integer hyperparameters['batch_size']"),
    (32, {"batch_size": 32}, "large_batch_size must be an integer above batch_size 32, got 32"),
    (48, {"batch_size": 32, "base_batch_size": 32},
     "hyperparameters['base_batch_size'] is set by the large-batch arm; leave it out"),
])
def test_a_large_batch_the_arm_cannot_scale_from_is_named(large, hyperparameters, problem):
    (found,) = large_batch_problems(large, hyperparameters)
    assert found.startswith(problem), found
