"""The accelerator comparison says which option costs least only when it does: a property over
prices and AWS's claims, ties included (hypothesis, derandomized)."""

from __future__ import annotations

import dataclasses
import re
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from compiled_training.advice import advisor
from compiled_training.advice import gpu as gpu_judge
from compiled_training.advice.assessment import ABOUT_THE_SAME, Option, comparison, lowest
from compiled_training.advice.priors import TRAINIUM_CLAIMS
from compiled_training.catalog.prices import ON_DEMAND_PRICES_USD
from compiled_training.compilers import CompilerKind
from tests.advice.test_advisor_properties import VERSIONS, workloads

# Few distinct amounts, so that exact ties and near ties come up often.
dollars = st.sampled_from([10.0, 10.2, 10.5, 11.0, 20.0, 21.0, 40.0])
options = st.lists(st.builds(
    Option, instance_type=st.sampled_from(["ml.g5.12xlarge", "ml.trn1.32xlarge", "ml.p5.48xlarge",
                                           "ml.trn2.48xlarge"]),
    compiler=st.sampled_from(list(CompilerKind)),
    dollars_per_run=st.tuples(dollars, dollars).map(lambda pair: tuple(sorted(pair))),
    basis=st.just("a source"), claimed=st.booleans()), min_size=1, max_size=5,
    unique_by=lambda option: option.name).map(tuple)  # as the advisor lists them


def _holds(said: str, costed: tuple[Option, ...]) -> None:
    """What ``said`` claims of the options is true of them."""
    floor = min(o.expected for o in costed)
    if said.endswith("'s is the lowest") or said.endswith("'s is the lowest, by AWS's claim alone"):
        (named,) = [o for o in costed if said.startswith(f"{o.name}'s")]
        assert named.expected == floor, said
        assert all(o.expected > floor * (1 + ABOUT_THE_SAME) for o in costed if o is not named)
    else:
        assert said.endswith(f"are about the same (within {ABOUT_THE_SAME * 100:.0f} %)"), said
        near = [o for o in costed if o.expected <= floor * (1 + ABOUT_THE_SAME)]
        assert len(near) >= 2 and said.startswith(", ".join(o.name for o in lowest(costed)))


@settings(deadline=None)
@given(options)
def test_the_comparison_names_the_lowest_only_when_it_is(costed):
    _holds(comparison(costed), costed)
    assert lowest(costed)[0].expected == min(o.expected for o in costed)


claims = st.tuples(st.floats(0.3, 1.2), st.floats(0.3, 1.2)).map(lambda pair: tuple(sorted(pair)))
# Workloads Trainium is costed for (static transformers, runs long enough), where the line is.
costed_workloads = st.builds(dataclasses.replace, workloads(VERSIONS),
                             model_family=st.sampled_from(["bert", "llama", "t5"]),
                             static_shapes=st.just(True), hours_per_run=st.floats(2, 200))


@settings(deadline=None, max_examples=300)
@given(costed_workloads, st.floats(0.2, 20), claims, claims)
def test_the_decision_follows_what_its_comparison_says(profile, scale, trn1, trn2):
    """Prices of the job's GPU scaled, AWS's two claims redrawn: whatever the figures, the line
    the advisor prints is true of the options it lists, and Trainium is chosen only where its
    option alone is the lowest."""
    prices = {k: v * scale for k, v in ON_DEMAND_PRICES_USD.items()}
    redrawn = (dataclasses.replace(TRAINIUM_CLAIMS[0], cost_factor=trn1),
               dataclasses.replace(TRAINIUM_CLAIMS[1], cost_factor=trn2))
    with mock.patch.object(gpu_judge, "TRAINIUM_CLAIMS", redrawn):
        assessment = advisor.assess_workload(profile, prices=prices)
    decision = assessment.decision
    assert decision is not None
    if not decision.reason.startswith("expected cost a run: "):
        return  # Trainium not costed, which the reason says instead
    costs = ", ".join(o.describe() for o in assessment.options)
    said = re.sub(r"; measure \S+ before moving$", "",
                  decision.reason.removeprefix(f"expected cost a run: {costs}: "))
    _holds(said, assessment.options)  # true of the options, whatever wrote it
    for option in assessment.options:
        assert option.describe() in decision.reason
        assert ("~$" in option.describe()) is option.claimed
    near = lowest(assessment.options)
    on_gpu = any(o.instance_type == profile.instance_type for o in near)
    trn1 = [o for o in near if o.instance_type == "ml.trn1.32xlarge"]  # the one with an image
    if decision.instance_type != profile.instance_type:
        assert not on_gpu and trn1 and (decision.instance_type, decision.compiler) == (
            trn1[0].instance_type, trn1[0].compiler)
    elif trn1 and not on_gpu:  # Trainium is cheaper, by too little to pay for a benchmark
        gpu = min((o for o in assessment.options if o.instance_type == profile.instance_type),
                  key=lambda o: o.expected)
        runs = profile.runs_per_week * advisor.WEEKS_PER_YEAR
        saving = (gpu.expected - trn1[0].dollars_per_run[0]) * runs
        assert saving < advisor.MIN_SAVING_FOR_A_BENCHMARK_USD
