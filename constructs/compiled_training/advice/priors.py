"""What the advisor expects: its thresholds (when compiling pays, what a benchmark costs), with
where each comes from, and the built-in compilers' own figures (speedups by model category,
compile time, AWS's Trainium claims) gathered from their modules into one table each."""

from __future__ import annotations

from collections.abc import Mapping

from compiled_training.compilers import (
    BUILT_IN,
    FIRST_COMPILE_MINUTES,
    CompileOverhead,
    Prior,
    TrainiumClaim,
)

# Each compiler's own figures live in its module (`compiled_training.compilers`), with their
# sources; these are the built-in compilers' as one table each.
PRIORS: Mapping[tuple[str, str], Prior] = {
    (module.name, category): prior for module in BUILT_IN
    for category, prior in module.priors.items()}
COMPILE_OVERHEAD: Mapping[str, CompileOverhead] = {
    module.name: module.compile_overhead for module in BUILT_IN if module.compile_overhead}
# AWS's own price-performance claims, the only published figures across accelerators, by
# instance type. Vendor figures, measured on AWS's chosen models (transformers) against AWS's
# chosen GPUs: the worst case here is no saving at all, until a benchmark arm measures the
# job's own.
TRAINIUM_CLAIMS: tuple[TrainiumClaim, ...] = tuple(sorted(
    (claim for module in BUILT_IN for claim in module.trainium_claims),
    key=lambda claim: claim.instance_type))


# fp32 gains are smaller for both (PyTorch 2.0: 21 % in fp32 against 51 % in AMP on average).
FP32_SPEEDUP_CAP = (1.0, 1.2)


# The use case's figure: compilation costs 2-5 minutes a run (FIRST_COMPILE_MINUTES); under
# ~30 min it does not pay (a run at least 6 times its worst compile: the rule below keeps that
# ratio for warm runs).
MIN_MINUTES_PER_RUN = 30.0
MIN_RUN_OVER_COMPILE = MIN_MINUTES_PER_RUN / FIRST_COMPILE_MINUTES[1]
CACHE_EXPIRY_DAYS = 30
"""The library's bucket expires a compile cache no run saved for this long."""
# A CompilerBenchmark is a pipeline to deploy and read, a couple of engineer-days plus the
# A/B arms' compute (more where shapes must be fixed first): below this much a year at stake
# (the high end of the saving) it costs more than it can save in a year. This library's choice.
MIN_SAVING_FOR_A_BENCHMARK_USD = 2_500.0
WEEKS_PER_YEAR = 52


# Where the claims were measured and Neuron's training tutorials live: transformer models.
# Elsewhere (vision, diffusion, custom) no figure says what Trainium does.
TRAINIUM_CATEGORIES = ("transformer",)
