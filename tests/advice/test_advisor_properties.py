"""Properties of the advisor over any valid workload, not just the reference platform's."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from compiled_training.advice.advisor import Verdict, WorkloadProfile, assess_workload
from compiled_training.advice.assessment import FACTORS
from compiled_training.advice.priors import MIN_SAVING_FOR_A_BENCHMARK_USD, WEEKS_PER_YEAR
from compiled_training.advice.workload import BOTTLENECKS, MODEL_CATEGORIES
from compiled_training.catalog.dlc import has_training_image
from compiled_training.catalog.instances import training_instance_types
from compiled_training.catalog.prices import ON_DEMAND_PRICES_USD
from compiled_training.values.compiler import CompilerKind

GPU_TYPES = [t for t in ON_DEMAND_PRICES_USD if t.split(".")[1][0] in "gp"]
# Every type a workload may name: SageMaker's training types (priced or not; the price list
# also holds types SageMaker only serves or processes on, which a workload is refused).
OTHER_TYPES = [t for t in [*ON_DEMAND_PRICES_USD, "ml.p5en.48xlarge", "ml.trn2.48xlarge"]
               if t in training_instance_types()]
VERSIONS = ["1.9", "1.10.2", "1.11", "1.12.0", "1.13", "1.13.1", "2.0", "2.3", "2.5.1"]


def workloads(versions: list[str], instance_types: list[str] = GPU_TYPES
              ) -> st.SearchStrategy[WorkloadProfile]:
    """Workloads a compiler applies to, where the verdict has room to move either way: each
    framework with the versions some image has for it (the advisor refuses the others)."""
    pairs = [(framework, version) for framework in ("pytorch", "huggingface")
             for version in (None, *versions)
             if version is None or has_training_image(framework, version)]
    return st.sampled_from(pairs).flatmap(lambda pair: st.builds(
        WorkloadProfile,
        name=st.just("w"),
        framework=st.just(pair[0]),
        model_family=st.sampled_from(sorted(MODEL_CATEGORIES)),
        instance_type=st.sampled_from(instance_types),
        instance_count=st.integers(1, 64),
        hours_per_run=st.floats(0.05, 2) | st.floats(2, 200),
        runs_per_week=st.floats(0, 30),
        static_shapes=st.booleans(),
        precision=st.sampled_from(["fp32", "fp16", "bf16"]),
        batch_size=st.none() | st.integers(1, 1024),
        learning_rate=st.none() | st.floats(1e-6, 1e-1),
        bottleneck=st.none() | st.sampled_from(BOTTLENECKS),
        framework_version=st.just(pair[1]),
    ))


candidates = workloads(VERSIONS)
# Any valid workload: other frameworks, CPUs, Trainium, AMD, unknown words, unpriced types.
profiles = candidates | st.builds(
    dataclasses.replace, candidates,
    framework=st.sampled_from(["pytorch", "tensorflow", "xgboost", "sklearn"]),
    model_family=st.text(min_size=1, max_size=12),
    instance_type=st.sampled_from(OTHER_TYPES),
)
# Half the table's prices to ten times them: "more money" without changing the instance.
price_scales = st.floats(0.5, 10)


def _verdict(profile: WorkloadProfile, scale: float = 1.0) -> Verdict:
    prices = {k: v * scale for k, v in ON_DEMAND_PRICES_USD.items()}
    return assess_workload(profile, prices=prices).verdict


@settings(deadline=None)
@given(profiles)
def test_every_valid_profile_gets_a_verdict_a_compiler_and_a_reason_per_factor(profile):
    assessment = assess_workload(profile)
    assert list(assessment.reasons) == list(FACTORS)
    assert all(reason.strip() for reason in assessment.reasons.values())
    assert assessment.verdict is min(assessment.limits.values(), key=lambda v: v.rank)
    if assessment.compiler is CompilerKind.NONE:
        assert assessment.verdict is Verdict.SKIP
    low, high = assessment.speedup
    assert 1.0 <= low <= high
    # The decision names an accelerator: the job's own with its verdict, or Trainium on
    # AWS's claim alone, which can only ever be benchmarked, where its expected run is the
    # cheapest and the most it could save a year pays for the benchmark.
    decision = assessment.decision
    assert decision is not None and decision.reason
    if decision.instance_type == profile.instance_type:
        assert (decision.verdict, decision.compiler) == (assessment.verdict, assessment.compiler)
    else:
        assert decision.instance_type.startswith("ml.trn1.")
        assert (decision.verdict, decision.compiler) == (Verdict.BENCHMARK,
                                                         CompilerKind.NEURON_XLA)
        (trainium,) = [o for o in assessment.options if o.instance_type == decision.instance_type]
        gpu = min(o.expected for o in assessment.options
                  if o.instance_type == profile.instance_type)
        assert trainium.expected < gpu
        runs = profile.runs_per_week * WEEKS_PER_YEAR
        assert (gpu - trainium.dollars_per_run[0]) * runs >= MIN_SAVING_FOR_A_BENCHMARK_USD


@settings(deadline=None)
@given(candidates, st.floats(0.05, 1.5), st.floats(1.0, 20.0))
def test_longer_runs_never_make_the_verdict_worse(profile, hours, factor):
    # Short runs, lengthened across the break-even, where the duration has its say.
    profile = dataclasses.replace(profile, hours_per_run=hours)
    longer = dataclasses.replace(profile, hours_per_run=hours * factor)
    assert _verdict(longer).rank >= _verdict(profile).rank


@settings(deadline=None)
@given(candidates, price_scales, st.floats(1.0, 10.0), st.integers(1, 8))
def test_more_money_never_makes_the_verdict_worse(profile, scale, more, runs):
    richer = dataclasses.replace(profile, runs_per_week=profile.runs_per_week * runs)
    assert _verdict(profile, scale * more).rank >= _verdict(profile, scale).rank
    assert _verdict(richer, scale).rank >= _verdict(profile, scale).rank


@settings(deadline=None)
@given(candidates)
def test_static_shapes_never_make_the_verdict_worse(profile):
    static = dataclasses.replace(profile, static_shapes=True)
    dynamic = dataclasses.replace(profile, static_shapes=False)
    assert _verdict(static).rank >= _verdict(dynamic).rank


@settings(deadline=None)
@given(candidates, st.sampled_from(["fp16", "bf16"]))
def test_mixed_precision_never_makes_the_verdict_worse(profile, mixed):
    fp32 = dataclasses.replace(profile, precision="fp32")
    amp = dataclasses.replace(profile, precision=mixed)
    assert _verdict(amp).rank >= _verdict(fp32).rank
