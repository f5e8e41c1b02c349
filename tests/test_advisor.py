"""The advisor: the reference platform's verdicts and the seed benchmark's arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiled_training.advisor import (
    ON_DEMAND_PRICES_USD,
    Verdict,
    WorkloadProfile,
    assess_workload,
    scaled_learning_rate,
)
from compiled_training.cli import load_workloads
from tests.helpers import ROOT

WORKLOADS = {p.name: p for p in load_workloads(ROOT / "workloads.yaml")}


def test_reference_platform_verdicts():
    verdicts = {name: assess_workload(p).verdict for name, p in WORKLOADS.items()}
    assert verdicts == {
        "document-classification": Verdict.ENABLE,
        "creative": Verdict.BENCHMARK,
        "tabular": Verdict.SKIP,
        "document-classification-debug": Verdict.SKIP,
    }


def test_enable_states_savings_and_the_larger_batch_with_scaled_learning_rate():
    assessment = assess_workload(WORKLOADS["document-classification"])
    # 8 x ml.g5.48xlarge at $20.36/h for 6.2 h, three times a week.
    assert assessment.dollars_per_run == pytest.approx(8 * 20.36 * 6.2)
    assert assessment.dollars_per_year == pytest.approx(8 * 20.36 * 6.2 * 3 * 52)
    low, high = assessment.saving_per_year
    assert 30_000 < low < high < 50_000
    assert assessment.recommended_batch_size == 48
    assert assessment.recommended_learning_rate == pytest.approx(5e-5 * 48 / 32)
    assert "save $" in assessment.reasons["money"]


def test_debug_run_is_skipped_because_compile_overhead_exceeds_the_saving():
    assessment = assess_workload(WORKLOADS["document-classification-debug"])
    assert "exceeds or eats the saving" in assessment.reasons["duration"]
    assert assessment.break_even_minutes > 15


def test_tabular_is_not_a_deep_learning_graph():
    assessment = assess_workload(WORKLOADS["tabular"])
    assert "not a GPU deep-learning graph" in assessment.reasons["framework"]
    assert assessment.saving_per_year == (0.0, 0.0)


def test_benchmark_points_to_the_ab_pipeline():
    assessment = assess_workload(WORKLOADS["creative"])
    assert any("CompilerBenchmark" in note for note in assessment.notes)


@pytest.mark.parametrize(("compiled", "expected_hours"), [
    (1140, 4.5),        # batch 32: 6 h 12 m -> 4 h 30 m
    (1260, 3 + 58 / 60),  # batch 48: -> about 4 h (3 h 58 m measured)
])
def test_seed_benchmark_wall_clock_within_5_percent(compiled, expected_hours):
    assessment = assess_workload(WORKLOADS["document-classification"])
    predicted = assessment.predicted_hours(baseline=820, compiled=compiled, compile_minutes=3)
    assert predicted == pytest.approx(expected_hours, rel=0.05)
    assert pytest.approx(1.39, abs=0.01) == 1140 / 820  # the seed's +39 %, inside the range
    low, high = assessment.speedup
    assert low <= 1140 / 820 <= high


@pytest.mark.parametrize(("rule", "expected"), [("linear", 7.5e-5), ("sqrt", 5e-5 * 1.5 ** 0.5)])
def test_learning_rate_scaling(rule, expected):
    assert scaled_learning_rate(5e-5, 32, 48, rule=rule) == pytest.approx(expected)


@pytest.mark.parametrize(("changes", "verdict", "factor"), [
    ({"static_shapes": False}, Verdict.SKIP, "shapes"),
    ({"precision": "fp32"}, Verdict.BENCHMARK, "precision"),
    ({"bottleneck": "data-loading"}, Verdict.BENCHMARK, "bottleneck"),
    ({"instance_type": "ml.g6.48xlarge"}, Verdict.BENCHMARK, "instance"),  # no Training Compiler
])
def test_each_factor_moves_the_verdict(changes, verdict, factor):
    profile = WorkloadProfile(**(WORKLOADS["document-classification"].__dict__ | changes))
    assessment = assess_workload(profile, prices={**ON_DEMAND_PRICES_USD, "ml.g6.48xlarge": 16.0})
    assert assessment.verdict is verdict
    assert factor in assessment.reasons


def test_fails_on_an_instance_type_without_a_price():
    profile = WorkloadProfile(**(WORKLOADS["document-classification"].__dict__
                                 | {"instance_type": "ml.g6.48xlarge"}))
    with pytest.raises(ValueError, match=r"'ml.g6.48xlarge' has no price in the table .*pass prices="):
        assess_workload(profile)


def test_fails_on_bad_profile_values():
    base = WORKLOADS["document-classification"].__dict__
    with pytest.raises(ValueError, match=r"workload 'document-classification': hours_per_run must be positive, got -1"):
        WorkloadProfile(**(base | {"hours_per_run": -1}))
    with pytest.raises(ValueError, match=r"precision must be one of fp32, fp16, bf16, got 'int8'"):
        WorkloadProfile(**(base | {"precision": "int8"}))


def test_workloads_file_is_the_reference_platform():
    assert Path(ROOT / "workloads.yaml").exists()
    assert WORKLOADS["document-classification"].instance_count == 8
