"""What the advisor expects of a compiler, with where each figure comes from: the speedups
published per compiler and model category, compile time, batch growth, what a benchmark costs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiled_training.compilers import CompilerKind


@dataclass(frozen=True)
class Prior:
    """Expected throughput with a compiler over without, at the same batch: mixed precision,
    static shapes, compute-bound (low, high), and where the figure comes from."""

    speedup: tuple[float, float]
    source: str
    """The citation a reason shows; the comments above ``PRIORS`` give the figures."""
    published: bool
    """Whether the source measured this category: only then can the verdict be ENABLE."""


# AWS, "Amazon SageMaker Training Compiler" launch (re:Invent, 2021-12): "up to 50 % faster"
# training on Hugging Face transformer models. An upper bound only: the low end is this
# library's conservative floor. AWS's tested models for PyTorch are transformers; elsewhere it
# may not help at all.
TC_SOURCE = "AWS's Training Compiler launch, 2021-12: up to 50 % on transformers"
# PyTorch 2.0 announcement (pytorch.org, 2022-12): 163 open-source models from Hugging Face
# Transformers, TIMM and TorchBench on an A100, 43 % faster training on average (51 % in AMP,
# 21 % in fp32); per-suite geomeans in AMP approximately 1.5x (HF), 1.3-1.4x (TIMM) and
# 1.2-1.3x (TorchBench). Each range below sits at or below its suite's geomean: models vary.
TORCH_COMPILE_SOURCE = "PyTorch 2.0 announcement, 2022-12"
PRIORS: Mapping[tuple[CompilerKind, str], Prior] = {
    (CompilerKind.TRAINING_COMPILER, "transformer"): Prior((1.1, 1.5), TC_SOURCE, True),
    (CompilerKind.TRAINING_COMPILER, "other"): Prior(
        (1.0, 1.3), "assumed no better than torch.compile on the TorchBench mix", False),
    (CompilerKind.TORCH_COMPILE, "transformer"): Prior(
        (1.2, 1.5), f"{TORCH_COMPILE_SOURCE}: about 1.5x on Hugging Face models", True),
    (CompilerKind.TORCH_COMPILE, "vision"): Prior(
        (1.1, 1.4), f"{TORCH_COMPILE_SOURCE}: about 1.3-1.4x on TIMM models", True),
    (CompilerKind.TORCH_COMPILE, "other"): Prior(
        (1.0, 1.3), f"{TORCH_COMPILE_SOURCE}: about 1.2-1.3x on the TorchBench mix, the "
                    "nearest", False),
}
# fp32 gains are smaller for both (PyTorch 2.0: 21 % in fp32 against 51 % in AMP on average).
FP32_SPEEDUP_CAP = (1.0, 1.2)


@dataclass(frozen=True)
class CompileOverhead:
    """Minutes a run compiles before it trains (low, high): a first run's, and where the
    compiled graphs persist between runs, a warm run's; where the figures come from."""

    first: tuple[float, float]
    warm: tuple[float, float] | None
    """None: nothing persists, every run pays ``first``."""
    source: str


# The use case's figure: compilation costs 2-5 minutes a run; under ~30 min it does not pay
# (a run at least 6 times its worst compile: the rule below keeps that ratio for warm runs).
FIRST_COMPILE_MINUTES = (2.0, 5.0)
MIN_MINUTES_PER_RUN = 30.0
MIN_RUN_OVER_COMPILE = MIN_MINUTES_PER_RUN / FIRST_COMPILE_MINUTES[1]
# torch.compile's warm start (the runtime's `warm_start`, on by default from PyTorch 2.4):
# - this library's compile bench (`make bench-compile`, torch 2.9 on 2 CPU cores, 2026-11-26,
#   benchmarks/RESULTS.md section 4): to the first finished step warm from the job's restored
#   cache, 29.8 % of cold on a 4-layer BERT and 29.5 % on the tiny one; what stays is Dynamo's
#   tracing and loading the kernels;
# - a PyTorch maintainer on a warm recompile with Inductor's on-disk caches: "on the order of
#   30-40 seconds" for an LLM on a GPU (pytorch-labs/gpt-fast issue 43, 2023-12).
# PyTorch's caching recipe (read 2026-11-26) publishes no ratio. Warm: the high end is the
# bench's ratio on the use case's 5 minutes, the low end the maintainer's half minute.
TORCH_COMPILE_WARM_RATIO = 0.30
CACHE_EXPIRY_DAYS = 30
"""The library's bucket expires a compile cache no run saved for this long."""
# Neuron's compiler (neuronx-cc, the PyTorch/XLA path), far longer than a GPU compiler's: AWS's
# BERT-Large pretraining tutorial on trn1.32xlarge, "it takes ~13 minutes to compile the
# BERT-Large model training step using the pre-compilation script (compare to ~40 minute if not
# using the pre-compilation script)" (aws-neuron-sdk frameworks/torch/torch-neuronx/tutorials/
# training/bert.rst at v2.25.0, 2025-07-31; the text since 2022-10; read 2026-11-26). A later
# run "will detect the cached graphs in the persistent cache (on-disk) and reload the compiled
# graphs for execution, avoiding any recompilation time" (the same tutorial): the library keeps
# that cache in S3 (NEURON_COMPILE_CACHE_URL). AWS publishes no time for the reload; the warm
# range is this library's assumption, up to the GPU compilers' first-compile bound. The native
# path (torch.compile(backend="neuron")): "can take several minutes for large models" (Neuron's
# torch.compile guide, 2026-10), no figure to cost.
NEURON_FIRST_COMPILE_MINUTES = (13.0, 40.0)
NEURON_WARM_COMPILE_MINUTES = (1.0, 5.0)
COMPILE_OVERHEAD: Mapping[CompilerKind, CompileOverhead] = {
    CompilerKind.TRAINING_COMPILER: CompileOverhead(
        FIRST_COMPILE_MINUTES, None,
        "Training Compiler's torch-xla 1.x keeps no compile cache between runs"),
    CompilerKind.TORCH_COMPILE: CompileOverhead(
        FIRST_COMPILE_MINUTES, (0.5, round(FIRST_COMPILE_MINUTES[1] * TORCH_COMPILE_WARM_RATIO,
                                           1)),
        "the library's warm-start bench, 2026-11-26: warm 30 % of cold (torch 2.9, CPU); "
        "a PyTorch maintainer's 30-40 s warm recompile (gpt-fast issue 43, 2023-12)"),
    CompilerKind.NEURON_XLA: CompileOverhead(
        NEURON_FIRST_COMPILE_MINUTES, NEURON_WARM_COMPILE_MINUTES,
        "AWS's BERT-Large tutorial on trn1: ~13 min with neuron_parallel_compile, ~40 "
        "without; a cached reload assumed 1-5 min, AWS publishing no time"),
}
# AWS's Training Compiler "tested models" table lists, per model and instance, the largest
# batch with and without the compiler; for its transformer entries the compiler's batch is
# larger, approximately 1.5x to 2x or more. The low end is the step to recommend.
TC_BATCH_GROWTH = 1.5
# A CompilerBenchmark is a pipeline to deploy and read, a couple of engineer-days plus the
# A/B arms' compute (more where shapes must be fixed first): below this much a year at stake
# (the high end of the saving) it costs more than it can save in a year. This library's choice.
MIN_SAVING_FOR_A_BENCHMARK_USD = 2_500.0
WEEKS_PER_YEAR = 52


@dataclass(frozen=True)
class TrainiumClaim:
    """What AWS claims for a Trainium instance: the cost to train on it against a comparable
    GPU instance's eager run, (best, worst), and where the claim comes from."""

    instance_type: str
    compiler: CompilerKind
    cost_factor: tuple[float, float]
    source: str
    public_image: bool
    """Whether SageMaker has a public training image for the path (`catalog.neuron`)."""
    families: tuple[str, ...]
    """The Trainium families the claim speaks for."""
    compared_with: tuple[str, ...]
    """The GPU instances AWS compares it with: a Trainium job's GPU alternative."""


# AWS's own price-performance claims, the only published figures across accelerators:
# - Trn1: "up to 50 % cost-to-train savings over comparable Amazon EC2 instances" (Amazon EC2
#   Trn1 instances page, since general availability in 2022-10); the comparable GPU is P4d:
#   "you should expect between 1.4-5X higher throughput on Trn1 as compared to the latest GPUs
#   instances (P4d)" (Neuron's training FAQ, about-neuron/faq/training/neuron-training.rst,
#   2026-07-23, read 2026-11-26);
# - Trn2: "30-40 % better price performance than the current generation of GPU-based EC2 P5e
#   and P5en instances" (Amazon EC2 Trn2 instances page, 2024-12): cost x 1/1.4 at best.
# Vendor figures, measured on AWS's chosen models (transformers) against AWS's chosen GPUs:
# the worst case here is no saving at all, until a benchmark arm measures the job's own.
TRAINIUM_CLAIMS = (
    TrainiumClaim("ml.trn1.32xlarge", CompilerKind.NEURON_XLA, (0.5, 1.0),
                  "AWS's Trn1 claim: up to 50 % lower cost to train than comparable EC2 "
                  "instances", public_image=True, families=("trn1", "trn1n"),
                  compared_with=("ml.p4d.24xlarge",)),
    TrainiumClaim("ml.trn2.48xlarge", CompilerKind.TORCH_COMPILE, (1 / 1.4, 1.0),
                  "AWS's Trn2 claim: 30-40 % better price performance than P5e/P5en",
                  public_image=False, families=("trn2",),
                  compared_with=("ml.p5e.48xlarge", "ml.p5en.48xlarge")),
)
# TorchNeuron has no SageMaker training image in AWS's tables as of Neuron 2.33 (public beta
# since 2026-10-19; `catalog/neuron-training-images.json`), so the Trn2 row stays unbenchmarkable.
# Where the claims were measured and Neuron's training tutorials live: transformer models.
# Elsewhere (vision, diffusion, custom) no figure says what Trainium does.
TRAINIUM_CATEGORIES = ("transformer",)


def prior_for(compiler: CompilerKind, category: str) -> Prior | None:
    return PRIORS.get((compiler, category)) or PRIORS.get((compiler, "other"))
