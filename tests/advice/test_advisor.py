"""The advisor: which compiler, the reference platform's verdicts, the seed benchmark as a check."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from compiled_training.advice import advisor
from compiled_training.advice.advisor import (
    MIN_SAVING_FOR_A_BENCHMARK_USD,
    Verdict,
    WorkloadProfile,
    assess_workload,
    model_category,
)
from compiled_training.advice.assessment import FACTORS, Factor
from compiled_training.advice.gpu import OnGpu
from compiled_training.advice.priors import PRIORS
from compiled_training.advice.trainium import OnTrainium
from compiled_training.advice.workload import CATEGORIES
from compiled_training.catalog.dlc import training_compiler_releases
from compiled_training.catalog.prices import ON_DEMAND_PRICES_USD
from compiled_training.compilers import training_compiler
from compiled_training.tools.cli import load_workloads
from compiled_training.values.compiler import Compiler, CompilerKind
from tests.helpers import ROOT

WORKLOADS = {p.name: p for p in load_workloads(ROOT / "workloads.yaml")}
DOCUMENTS = WORKLOADS["document-classification"]


def _with(profile: WorkloadProfile, **changes) -> WorkloadProfile:
    return dataclasses.replace(profile, **changes)


def test_reference_platform_verdicts_and_compilers():
    assessments = {name: assess_workload(p) for name, p in WORKLOADS.items()}
    assert {name: (a.verdict, a.compiler) for name, a in assessments.items()} == {
        "document-classification": (Verdict.ENABLE, CompilerKind.TRAINING_COMPILER),
        "creative": (Verdict.BENCHMARK, CompilerKind.TORCH_COMPILE),
        "tabular": (Verdict.SKIP, CompilerKind.NONE),
        "document-classification-debug": (Verdict.SKIP, CompilerKind.TRAINING_COMPILER),
        "llm-fine-tune": (Verdict.ENABLE, CompilerKind.TORCH_COMPILE),
        "product-images": (Verdict.BENCHMARK, CompilerKind.TORCH_COMPILE),
    }


def test_enable_states_money_and_the_larger_batch_with_scaled_learning_rate():
    assessment = assess_workload(DOCUMENTS)
    hourly = ON_DEMAND_PRICES_USD["ml.g5.48xlarge"] * 8
    assert assessment.dollars_per_run == pytest.approx(hourly * 6.2)
    assert assessment.dollars_per_year == pytest.approx(hourly * 6.2 * 3 * 52)
    low, high = assessment.saving_per_year
    assert 0 < low < high < assessment.dollars_per_year
    assert assessment.recommended_batch_size == 48  # the use case's 32 -> 48
    assert assessment.recommended_learning_rate == pytest.approx(5e-5 * 48 / 32)
    assert "Training Compiler would save $" in assessment.reasons["money"]


def test_seed_benchmark_lies_inside_the_published_prior():
    # DESIGN.md's BERT benchmark: 820 -> 1,140 samples/s/GPU at the same batch of 32. The prior
    # comes from AWS's published figure, not from this benchmark: the benchmark checks it.
    low, high = assess_workload(DOCUMENTS).speedup
    assert low <= 1140 / 820 <= high


def test_seed_benchmark_wall_clock_lies_inside_the_predicted_range():
    # The same benchmark at batch 32: 6 h 12 m -> 4 h 30 m, compile warm-up included. The
    # advisor's range: the run at its high and low speedup, plus its least and most compile time.
    assessment = assess_workload(DOCUMENTS)
    (low, high), (compile_least, compile_most) = assessment.speedup, assessment.compile_minutes
    hours = DOCUMENTS.hours_per_run
    assert hours / high + compile_least / 60 <= 4.5 <= hours / low + compile_most / 60


def test_debug_run_is_skipped_because_compile_overhead_exceeds_the_saving():
    assessment = assess_workload(WORKLOADS["document-classification-debug"])
    assert assessment.deciding_factor == "duration"
    assert "exceeds or eats the saving" in assessment.reasons["duration"]
    assert assessment.break_even_minutes > 15


def test_tabular_is_not_a_deep_learning_graph():
    assessment = assess_workload(WORKLOADS["tabular"])
    assert assessment.deciding_factor == "framework"
    assert "not a GPU deep-learning graph" in assessment.reasons["framework"]
    assert "tabular" in assessment.reasons["model"]


def test_benchmark_points_to_the_ab_pipeline_for_the_picked_compiler():
    assessment = assess_workload(WORKLOADS["creative"])
    assert any(note.startswith("deploy a CompilerBenchmark (A/B pipeline) of torch.compile "
                               "against no compiler") for note in assessment.notes)


# --- Vocabulary ------------------------------------------------------------------------------

@pytest.mark.parametrize(("word", "category"), [
    ("bert", "transformer"), ("GPT2", "transformer"), ("t5", "transformer"),
    ("vit", "vision"), ("resnet", "vision"), ("unet", "diffusion"),
    ("Stable Diffusion", "diffusion"), ("stable_diffusion", "diffusion"),
    ("gradient-boosted-trees", "tabular"), ("xgboost", "tabular"),
    *((c, c) for c in CATEGORIES),
])
def test_model_family_names_and_categories(word, category):
    assert model_category(word) == (category, True)


def test_an_unknown_model_family_is_custom_and_the_reason_says_so():
    assessment = assess_workload(_with(DOCUMENTS, model_family="my-graph-net"))
    assert model_category("my-graph-net") == ("custom", False)
    assert "not a family this advisor knows, treated as custom" in assessment.reasons["model"]
    assert assessment.verdict is Verdict.BENCHMARK


@pytest.mark.parametrize(("family", "verdict"), [
    ("transformer", Verdict.ENABLE), ("vision", Verdict.ENABLE),
    ("diffusion", Verdict.BENCHMARK), ("custom", Verdict.BENCHMARK), ("tabular", Verdict.SKIP),
])
def test_torch_compile_enables_the_families_its_published_suites_measured(family, verdict):
    profile = _with(WORKLOADS["llm-fine-tune"], model_family=family)
    assert assess_workload(profile).verdict is verdict


# --- Which compiler --------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "compiler", "said"), [
    ({"framework_version": "1.13.1"}, CompilerKind.TRAINING_COMPILER,
     "its PyTorch 1.13.1 release runs on g5"),
    ({"framework_version": "1.13"}, CompilerKind.TRAINING_COMPILER, "PyTorch 1.13.1 release"),
    ({"framework": "huggingface", "framework_version": "1.11"}, CompilerKind.TRAINING_COMPILER,
     "Hugging Face Transformers 4.21.1 with PyTorch 1.11.0"),
    ({"framework_version": "2.1"}, CompilerKind.TORCH_COMPILE,
     "PyTorch 2.1 has it; Training Compiler is frozen at PyTorch 1.12.0, PyTorch 1.13.1"),
    ({"framework_version": "1.10"}, CompilerKind.NONE,
     "Training Compiler has no release for PyTorch 1.10"),
    ({"framework_version": "1.13.1", "instance_type": "ml.p5.48xlarge"}, CompilerKind.NONE,
     "release does not run on p5"),
    ({"instance_type": "ml.g6e.12xlarge"}, CompilerKind.TORCH_COMPILE,
     "PyTorch 2.x is assumed; g6e is not a Training Compiler family"),
    ({"model_family": "resnet"}, CompilerKind.TORCH_COMPILE,
     "Training Compiler has published gains for transformers only"),
])
def test_the_compiler_follows_framework_version_and_instance(changes, compiler, said):
    assessment = assess_workload(_with(DOCUMENTS, **changes))
    assert assessment.compiler is compiler
    assert said in assessment.reasons["compiler"]


@pytest.mark.parametrize(("instance_type", "said"), [
    ("ml.c5.18xlarge", "CPU instance"), ("ml.m5.xlarge", "CPU instance"),
])
def test_no_compiler_off_nvidia_gpus_and_trainium(instance_type, said):
    assessment = assess_workload(_with(DOCUMENTS, instance_type=instance_type))
    assert (assessment.compiler, assessment.verdict) == (CompilerKind.NONE, Verdict.SKIP)
    assert said in assessment.reasons["instance"]


def test_tensorflow_gets_no_compiler_from_this_library():
    assessment = assess_workload(_with(DOCUMENTS, framework="tensorflow"))
    assert (assessment.compiler, assessment.verdict) == (CompilerKind.NONE, Verdict.SKIP)
    assert "TensorFlow's own XLA" in assessment.reasons["framework"]


def test_the_training_compiler_releases_come_from_the_support_matrix(monkeypatch):
    monkeypatch.setattr(training_compiler, "training_compiler_releases",
                        lambda: [*training_compiler_releases(), "PyTorch 1.11.0"])
    assessment = assess_workload(_with(DOCUMENTS, framework_version="1.11"))
    assert assessment.compiler is CompilerKind.TRAINING_COMPILER


def test_where_training_compiler_fits_the_advisor_says_it_is_frozen():
    assessment = assess_workload(_with(DOCUMENTS, framework_version="1.13.1"))
    (frozen,) = [n for n in assessment.notes if "frozen" in n]
    assert "moving the job to PyTorch 2.x makes torch.compile its compiler" in frozen


def test_compiler_auto_returns_the_picked_compiler():
    assert Compiler.auto(DOCUMENTS).kind is CompilerKind.TRAINING_COMPILER
    on_p5 = Compiler.auto(WORKLOADS["llm-fine-tune"])
    assert dataclasses.replace(on_p5, profile=None) == Compiler.torch_compile()
    assert on_p5.profile == WORKLOADS["llm-fine-tune"]
    assert Compiler.auto(WORKLOADS["tabular"]).kind is CompilerKind.NONE


def test_compiler_auto_on_benchmark_runs_without_and_names_the_compiler_to_measure():
    compiler = Compiler.auto(WORKLOADS["product-images"])
    assert compiler.kind is CompilerKind.NONE
    assert "needs a benchmark of torch.compile before it ships (dynamic shapes" in compiler.advice


# --- Shapes, precision, bottleneck, money ----------------------------------------------------

@pytest.mark.parametrize(("framework_version", "said"), [
    ("1.13.1", "XLA recompiles for every new shape"),
    ("2.3", "torch.compile handles them (automatic dynamic shapes, dynamic=True) at a cost"),
])
def test_dynamic_shapes_are_weighed_by_compiler(framework_version, said):
    static = assess_workload(_with(DOCUMENTS, framework_version=framework_version))
    dynamic = assess_workload(_with(DOCUMENTS, framework_version=framework_version,
                                    static_shapes=False))
    assert dynamic.verdict is Verdict.BENCHMARK
    assert said in dynamic.reasons["shapes"]
    assert dynamic.speedup[0] < static.speedup[0]  # no gain promised until the fix is measured


def test_dynamic_shapes_with_little_money_at_stake_are_skipped():
    small = _with(DOCUMENTS, static_shapes=False, instance_type="ml.g5.2xlarge",
                  instance_count=1, runs_per_week=1)
    assessment = assess_workload(small)
    assert assessment.saving_per_year[1] < MIN_SAVING_FOR_A_BENCHMARK_USD
    assert (assessment.verdict, assessment.deciding_factor) == (Verdict.SKIP, "money")
    assert "pays for a benchmarking sprint" in assessment.reasons["money"]


@pytest.mark.parametrize(("changes", "factor"), [
    ({"precision": "fp32"}, "precision"),
    ({"bottleneck": "data-loading"}, "bottleneck"),
    ({"static_shapes": False}, "shapes"),
])
def test_each_factor_moves_the_verdict_to_benchmark(changes, factor):
    assessment = assess_workload(_with(DOCUMENTS, **changes))
    assert assessment.verdict is Verdict.BENCHMARK
    assert assessment.limits[factor] is Verdict.BENCHMARK


def test_fp32_under_torch_compile_is_measured_at_a_smaller_gain():
    amp = assess_workload(WORKLOADS["llm-fine-tune"])
    fp32 = assess_workload(_with(WORKLOADS["llm-fine-tune"], precision="fp32"))
    assert fp32.verdict is Verdict.BENCHMARK
    assert "torch.compile works without mixed precision but gains less" in fp32.reasons["precision"]
    assert fp32.speedup[1] < amp.speedup[1]


def test_a_price_unknown_instance_gets_its_verdict_and_how_to_supply_one():
    profile = _with(WORKLOADS["llm-fine-tune"], instance_type="ml.p5en.48xlarge")
    assessment = assess_workload(profile)
    assert assessment.verdict is Verdict.ENABLE
    assert assessment.dollars_per_year is None and assessment.saving_per_year is None
    assert assessment.reasons["money"].startswith("price unknown for ml.p5en.48xlarge")
    assert "prices={'ml.p5en.48xlarge': USD per hour}" in assessment.reasons["money"]
    priced = assess_workload(profile, prices={"ml.p5en.48xlarge": 60.0})
    assert priced.dollars_per_run == pytest.approx(60.0 * 2 * 10)


@pytest.mark.parametrize("instance_type", [
    "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.g6.xlarge", "ml.g6.48xlarge", "ml.g6e.12xlarge",
    "ml.trn1.32xlarge", "ml.m5.large", "ml.m6i.32xlarge", "ml.c5.18xlarge", "ml.c6i.8xlarge",
])
def test_the_price_table_covers_current_training_families(instance_type):
    assert assess_workload(_with(DOCUMENTS, instance_type=instance_type)).dollars_per_run > 0


def test_given_prices_come_before_the_table():
    table = assess_workload(DOCUMENTS)
    given = assess_workload(DOCUMENTS, prices={"ml.g5.48xlarge": 10.18})
    assert given.dollars_per_run == pytest.approx(table.dollars_per_run / 2)


def test_another_region_is_priced_at_the_us_east_1_list_and_says_so():
    assessment = assess_workload(_with(DOCUMENTS, region="eu-west-1"))
    assert "(us-east-1 price; eu-west-1 may differ)" in assessment.reasons["money"]
    # Its twin: a price given for the job (or read live for its region) is not called us-east-1's.
    given = assess_workload(_with(DOCUMENTS, region="eu-west-1"), prices={"ml.g5.48xlarge": 22.0})
    assert "us-east-1" not in given.reasons["money"]


def test_every_prior_cites_its_source_and_only_measured_families_can_enable():
    for (compiler, family), prior in PRIORS.items():
        assert prior.source
        assert 1.0 <= prior.speedup[0] < prior.speedup[1]
        assert prior.published is (family != "other"), (compiler, family)


def test_every_factor_has_a_reason_for_the_reference_platform():
    for profile in WORKLOADS.values():
        assessment = assess_workload(profile)
        assert list(assessment.reasons) == list(FACTORS) == list(assessment.limits)


@pytest.mark.parametrize("instance_type, judge", [
    ("ml.g5.48xlarge", OnGpu), ("ml.trn1.32xlarge", OnTrainium), ("ml.trn2.48xlarge", OnTrainium),
    ("ml.m5.xlarge", OnGpu)])
def test_one_pipeline_asks_the_accelerator_s_judge_every_typed_factor(instance_type, judge):
    profile = _with(DOCUMENTS, instance_type=instance_type, instance_count=1)
    assert type(advisor.judge(profile)) is judge
    assessment = assess_workload(profile)
    assert [type(factor) for factor in assessment.reasons] == [Factor] * len(Factor)
    assert assessment.reasons[Factor.MODEL] == assessment.reasons["model"]


def test_only_the_advisor_assembles_an_assessment():
    """One advisor: the judges answer factors; no module but `advisor.py` builds the answer.
    The twin: a module that calls ``Assessment(...)`` is named."""
    package = ROOT / "constructs" / "compiled_training"

    def builders(source: str) -> bool:
        return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id == "Assessment" for node in ast.walk(ast.parse(source)))

    found = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                   if builders(path.read_text()))
    assert found == ["advice/advisor.py"]
    assert builders("Assessment(profile=p)") and not builders("Assessment.verdict")


def test_fails_on_bad_profile_values():
    base = DOCUMENTS.__dict__
    with pytest.raises(ValueError, match=r"^workload 'document-classification': hours_per_run must be positive, got -1$"):
        WorkloadProfile(**(base | {"hours_per_run": -1}))
    with pytest.raises(ValueError, match=r"precision must be one of fp32, fp16, bf16, got 'int8'$"):
        WorkloadProfile(**(base | {"precision": "int8"}))
    with pytest.raises(ValueError, match=r"framework_version must be a version such as '2.3' or '1.13.1', got '2.x'$"):
        WorkloadProfile(**(base | {"framework_version": "2.x"}))
    with pytest.raises(ValueError, match=r"instance_type must be a SageMaker training instance type such as 'ml.g5.48xlarge', got 'g5.48xlarge' \(did you mean 'ml.g5.48xlarge'\?\)$"):
        WorkloadProfile(**(base | {"instance_type": "g5.48xlarge"}))
    # Not training instances at all (SageMaker serves on Inferentia; g4ad is AMD's): refused as
    # CreateTrainingJob refuses them, not advised.
    for serving_only in ("ml.inf2.xlarge", "ml.g4ad.8xlarge"):
        with pytest.raises(ValueError, match=f"got '{serving_only}'"):
            WorkloadProfile(**(base | {"instance_type": serving_only}))


# --- the decision across accelerators: the same run costed on Trainium ---------------------

def test_a_training_compiler_job_is_sent_to_benchmark_on_trainium_by_awss_claim():
    assessment = assess_workload(_with(DOCUMENTS, framework_version="1.13.1"))
    assert (assessment.verdict, assessment.compiler) == (Verdict.ENABLE,
                                                         CompilerKind.TRAINING_COMPILER)
    assert str(assessment.decision) == "BENCHMARK on ml.trn1.32xlarge with neuron-xla"
    per_run = assessment.dollars_per_run
    options = {(o.instance_type, o.compiler): o for o in assessment.options}
    # AWS's claims against the GPU's eager run: Trn1 up to 50 % less, Trn2 1/1.4 at best;
    # at worst, no saving at all.
    trn1 = options["ml.trn1.32xlarge", CompilerKind.NEURON_XLA]
    assert trn1.dollars_per_run == pytest.approx((per_run * 0.5, per_run))
    assert options["ml.trn2.48xlarge", CompilerKind.TORCH_COMPILE].dollars_per_run == (
        pytest.approx((per_run / 1.4, per_run)))
    assert "no public SageMaker image" in options["ml.trn2.48xlarge",
                                                  CompilerKind.TORCH_COMPILE].basis
    # Training Compiler's expected run (1.1-1.5x) costs more than Trn1's expected one.
    compiled = options["ml.g5.48xlarge", CompilerKind.TRAINING_COMPILER]
    assert compiled.expected > trn1.expected
    assert "AWS's Trn1 claim: up to 50 %" in assessment.decision.reason
    assert any("BenchmarkArm('trainium', Compiler.neuron_xla(precompile=True), "
               "'ml.trn1.32xlarge'" in note for note in assessment.notes)


def test_torch_compile_at_its_published_gain_keeps_the_job_on_its_gpu():
    assessment = assess_workload(_with(DOCUMENTS, framework_version="2.9.0"))
    assert str(assessment.decision) == "ENABLE on ml.g5.48xlarge with torch-compile"
    # torch.compile's expected 1.33x and Trn1's expected 0.75 of the eager cost: a tie, said as one.
    assert assessment.decision.reason.endswith(
        ": ml.g5.48xlarge torch-compile, ml.trn1.32xlarge neuron-xla are about the same "
        "(within 5 %)")
    # The Trainium figures are AWS's claims applied to this run, labelled so, with the claim.
    assert "ml.trn1.32xlarge neuron-xla ~$757 (from AWS's Trn1 claim: up to 50 % lower cost " \
           "to train than comparable EC2 instances; not a price)" in assessment.decision.reason
    assert "ml.g5.48xlarge torch-compile $757," in assessment.decision.reason
    # Trainium was costed all the same, and a benchmark arm is what would settle it.
    assert any(o.instance_type == "ml.trn1.32xlarge" for o in assessment.options)
    assert any("BenchmarkArm on ml.trn1.32xlarge" in note for note in assessment.notes)


@pytest.mark.parametrize(("changes", "why"), [
    ({"model_family": "resnet"}, "no published Trainium figure for vision models"),
    ({"static_shapes": False}, "dynamic shapes: neuronx-cc compiles per shape"),
    ({"hours_per_run": 0.2}, "runs too short to amortise a compiler"),
    ({"framework": "xgboost", "model_family": "xgboost"}, "xgboost does not run on the Neuron"),
    ({"instance_type": "ml.p5en.48xlarge"}, "price unknown"),
    ({"instance_type": "ml.c5.18xlarge"}, "ml.c5.18xlarge is not a GPU job"),
])
def test_trainium_is_not_costed_where_nothing_says_what_it_would_do(changes, why):
    assessment = assess_workload(_with(DOCUMENTS, **changes))
    assert assessment.decision.instance_type == assessment.profile.instance_type
    assert assessment.decision.reason.startswith("Trainium not costed: ")
    assert why in assessment.decision.reason
    assert {o.instance_type for o in assessment.options} <= {assessment.profile.instance_type}


def test_trainium_is_not_benchmarked_where_the_most_it_could_save_is_small():
    # One run a month on one small GPU: Trn1's best case saves less than a benchmark costs.
    small = _with(DOCUMENTS, framework_version="1.13.1", instance_type="ml.g5.xlarge",
                  instance_count=1, runs_per_week=0.25)
    assessment = assess_workload(small)
    assert assessment.decision.instance_type == "ml.g5.xlarge"


def test_a_multi_gpu_job_is_told_to_launch_on_every_gpu():
    notes = assess_workload(WORKLOADS["creative"]).notes
    assert ("train on all 64 GPUs (16 x ml.g5.12xlarge) under torchrun (distribution "
            "torch_distributed, one process per GPU) if the job does not already: with no "
            "distribution SageMaker starts one process per instance and 48 GPUs sit idle while "
            "the 16 instances train separate models") in notes
    # Training Compiler's launcher is the constructs' default: nothing to say there.
    assert not any(note.startswith("train on all") for note in assess_workload(DOCUMENTS).notes)


@pytest.mark.parametrize("changes", [{"instance_type": "ml.g5.2xlarge", "instance_count": 1},
                                     {"framework": "xgboost", "model_family": "xgboost"},
                                     {"instance_type": "ml.m6i.12xlarge", "instance_count": 4}])
def test_no_launcher_note_where_nothing_would_idle(changes):
    notes = assess_workload(_with(WORKLOADS["creative"], **changes)).notes
    assert not any(note.startswith("train on all") for note in notes)


# A short recurring torch.compile job: a BERT fine-tune of 15 minutes, daily, on PyTorch 2.9.
SHORT_DAILY = _with(DOCUMENTS, name="short-daily", framework_version="2.9", hours_per_run=0.25,
                    runs_per_week=7, instance_type="ml.g5.12xlarge", instance_count=1)


def test_a_short_recurring_torch_compile_job_is_charged_its_warm_start_not_a_cold_compile():
    assessment = assess_workload(SHORT_DAILY)

    assert assessment.compiler is CompilerKind.TORCH_COMPILE
    assert assessment.limits["duration"] is Verdict.ENABLE
    reason = assessment.reasons["duration"]
    assert "warm-start overhead (0.5-1.5 min after the first run's 2-5" in reason
    assert "the library's warm-start bench" in reason and "gpt-fast issue 43" in reason
    assert assessment.compile_minutes == (0.5, 1.5)
    # The same job run cold each time (the first-run figure) does not pay.
    assert assessment.break_even_minutes < 15 < assess_workload(
        _with(SHORT_DAILY, framework_version="2.3")).break_even_minutes


@pytest.mark.parametrize("changes", [
    {"framework_version": "2.3"},   # Inductor keeps no cache on disk before PyTorch 2.4
    {"runs_per_week": 0.1},         # once in ten weeks: the cache expires in between
], ids=["pytorch-2.3", "rarer-than-the-cache-lives"])
def test_a_job_that_cannot_start_warm_is_charged_a_first_runs_compile_every_run(changes):
    assessment = assess_workload(_with(SHORT_DAILY, **changes))

    assert assessment.compile_minutes == (2.0, 5.0)
    assert assessment.limits["duration"] is Verdict.SKIP
    assert "compile overhead (2-5 min a run" in assessment.reasons["duration"]


def test_training_compiler_keeps_nothing_between_runs():
    assessment = assess_workload(WORKLOADS["document-classification-debug"])
    assert assessment.compile_minutes == (2.0, 5.0)
    assert "keeps no compile cache between runs" in assessment.reasons["duration"]


def test_a_years_compiling_is_one_cold_run_and_the_rest_warm():
    warm, cold = (assess_workload(_with(SHORT_DAILY, hours_per_run=2, framework_version=v))
                  for v in ("2.9", "2.3"))
    price = ON_DEMAND_PRICES_USD["ml.g5.12xlarge"]
    runs = 7 * 52
    # The saving differs by the compile time the warm runs do not pay, at the high end.
    extra = price / 60 * (runs - 1) * (5.0 - 1.5)
    assert warm.saving_per_year[1] - cold.saving_per_year[1] == pytest.approx(extra)


def test_auto_on_trainium_enables_the_neuron_path_not_training_compiler():
    profile = _with(DOCUMENTS, instance_type="ml.trn1.32xlarge", framework_version="2.9.0",
                    precision="bf16", instance_count=1,
                    hours_per_run=8.0, runs_per_week=5)
    assert assess_workload(profile).verdict is Verdict.ENABLE
    assert Compiler.auto(profile).kind is CompilerKind.NEURON_XLA
