"""The decision: which compiler on which accelerator, whether it pays, how much, and what to
change to get it.

A compiler helps only where the workload fits: a deep-learning graph, static shapes, mixed
precision, jobs long enough to amortise compilation, and enough money at stake. Each `Factor`
sets the best verdict it allows; the verdict is the lowest of them. One pipeline judges every
workload; the accelerator's `Judge` (`gpu.OnGpu`, `trainium.OnTrainium`) answers each factor.
"""

from __future__ import annotations

from collections.abc import Mapping

from compiled_training.advice.assessment import Assessment, Factor
from compiled_training.advice.gpu import OnGpu
from compiled_training.advice.judge import Judge
from compiled_training.advice.priors import MIN_SAVING_FOR_A_BENCHMARK_USD, WEEKS_PER_YEAR
from compiled_training.advice.trainium import OnTrainium
from compiled_training.advice.workload import Verdict, WorkloadProfile, model_category
from compiled_training.catalog.neuron import is_trainium

__all__ = ["MIN_SAVING_FOR_A_BENCHMARK_USD", "WEEKS_PER_YEAR", "Assessment", "Verdict",
           "WorkloadProfile", "assess_workload", "judge", "model_category"]


def judge(profile: WorkloadProfile, prices: Mapping[str, float] | None = None) -> Judge:
    """The judge for the accelerator the job is on."""
    return (OnTrainium if is_trainium(profile.instance_type) else OnGpu)(profile, prices)


def assess_workload(profile: WorkloadProfile, *,
                    prices: Mapping[str, float] | None = None) -> Assessment:
    """Which compiler, and whether to enable it for this workload: ENABLE, BENCHMARK or SKIP.

    ``prices`` (USD per instance-hour by instance type) come before the built-in table; an
    instance type neither knows still gets its verdict, with the money marked unknown.
    """
    on = judge(profile, prices)
    judged = on.factors()
    limits = {factor: verdict for factor, (verdict, _) in judged.items()}
    reasons = {factor: reason for factor, (_, reason) in judged.items()}
    verdict = min(limits.values(), key=lambda v: v.rank)
    if verdict is Verdict.BENCHMARK and on.money.at_stake < MIN_SAVING_FOR_A_BENCHMARK_USD:
        verdict = limits[Factor.MONEY] = Verdict.SKIP
        reasons[Factor.MONEY] += (f": under the ${MIN_SAVING_FOR_A_BENCHMARK_USD:,.0f} a year "
                                  "that pays for a benchmarking sprint")
    options = on.options(verdict, limits)
    decision = on.decide(verdict, limits, options)
    batch, learning_rate = on.batch(verdict)
    return Assessment(
        profile=profile, compiler=on.compiler, verdict=verdict, reasons=reasons, limits=limits,
        speedup=on.speedup, compile_minutes=on.compile.per_run,
        break_even_minutes=on.break_even, dollars_per_run=on.money.per_run,
        dollars_per_year=on.money.per_year, saving_per_year=on.money.saving,
        recommended_batch_size=batch, recommended_learning_rate=learning_rate,
        notes=on.notes(verdict, limits, decision, options, batch),
        options=options, decision=decision)
