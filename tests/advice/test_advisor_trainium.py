"""The advisor for a job already on Trainium: the Neuron path that fits its family and PyTorch
version, its verdict judged as any compiled job's (precision, shapes, run length against
Neuron's compile time and cache), and the GPU alternative AWS's claims compare it with; never
a suggestion to try Trainium."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiled_training.advice import cost
from compiled_training.advice.advisor import Verdict, WorkloadProfile, assess_workload
from compiled_training.advice.priors import COMPILE_OVERHEAD, TRAINIUM_CLAIMS
from compiled_training.catalog.instances import training_instance_types
from compiled_training.catalog.neuron import is_trainium
from compiled_training.tools.cli import main
from compiled_training.values.compiler import CompilerKind
from tests.advice.test_advisor_properties import workloads

TRAINIUM_TYPES = sorted(t for t in training_instance_types() if is_trainium(t))
BERT_ON_TRN1 = WorkloadProfile(
    name="bert-trn1", framework="pytorch", framework_version="2.9.0", model_family="bert",
    instance_type="ml.trn1.32xlarge", instance_count=4, hours_per_run=6, runs_per_week=3,
    static_shapes=True, precision="bf16")


def _with(**changes) -> WorkloadProfile:
    return dataclasses.replace(BERT_ON_TRN1, **changes)


def _tells_to_try_trainium(assessment) -> bool:
    said = [*assessment.notes, assessment.decision.reason, *assessment.reasons.values()]
    return any("on trial" in text or "BenchmarkArm('trainium'" in text or
               "Trainium could still cost less" in text for text in said)


def test_every_trainium_training_type_is_covered():
    assert TRAINIUM_TYPES == ["ml.trn1.2xlarge", "ml.trn1.32xlarge", "ml.trn1n.32xlarge",
                              "ml.trn2.48xlarge"]


def test_a_static_bf16_job_long_enough_is_enabled_on_its_neuron_path():
    assessment = assess_workload(BERT_ON_TRN1)
    assert str(assessment.decision) == "ENABLE on ml.trn1.32xlarge with neuron-xla"
    assert assessment.verdict is Verdict.ENABLE
    assert "the one path on trn1: PyTorch 2.9.0 trains on pytorch-training-neuronx:2.9.0-" \
           "neuronx-py312-sdk2.30.0-ubuntu24.04" in assessment.reasons["compiler"]
    assert "not optional" in assessment.reasons["instance"]
    assert not _tells_to_try_trainium(assessment)
    # The GPU alternative AWS's Trn1 claim compares with, costed from the claim: Trn1's
    # cost to train is 50-100 % of P4d's, so P4d's run is 1-2x Trainium's.
    options = {o.instance_type: o for o in assessment.options}
    per_run = assessment.dollars_per_run
    assert set(options) == {"ml.trn1.32xlarge", "ml.p4d.24xlarge"}
    assert options["ml.p4d.24xlarge"].dollars_per_run == pytest.approx((per_run, 2 * per_run))
    assert "ml.p4d.24xlarge" in assessment.decision.reason
    assert "by AWS's claim alone" in assessment.decision.reason


def test_fp16_is_answered_with_bf16_and_the_reason():
    assessment = assess_workload(_with(precision="fp16"))
    assert (assessment.verdict, assessment.deciding_factor) == (Verdict.BENCHMARK, "precision")
    assert "loss scaler" in assessment.reasons["precision"]
    assert "bf16 natively" in assessment.reasons["precision"]
    assert any("'bf16'" in note for note in assessment.notes)


def test_dynamic_shapes_are_answered_with_the_recompilation_and_the_fix():
    assessment = assess_workload(_with(static_shapes=False))
    assert (assessment.verdict, assessment.deciding_factor) == (Verdict.BENCHMARK, "shapes")
    assert "each new shape is a new Neuron compilation (13-40 min" in \
        assessment.reasons["shapes"]
    assert any(note.startswith("first step: make the shapes static (pad sequences to a fixed length")
               for note in assessment.notes)


def test_short_runs_are_weighed_against_neurons_compile_time_and_its_cache():
    weekly = assess_workload(_with(hours_per_run=0.25))
    assert (weekly.verdict, weekly.deciding_factor) == (Verdict.SKIP, "duration")
    assert "warm-start overhead (1-5 min after the first run's 13-40" in \
        weekly.reasons["duration"]
    assert "lengthen the runs or train them on a GPU" in weekly.reasons["duration"]
    # The SKIP's accelerator line names where such runs go: the GPU AWS compares.
    assert weekly.decision.reason.startswith("runs this short cost less where compiling is "
                                             "optional, on a GPU: the GPU alternative")
    assert assess_workload(_with(hours_per_run=2)).verdict is Verdict.ENABLE
    # Neuron's cache is kept however far apart the runs are (the library's lifecycle rule
    # expires torch.compile's only): a run every ten weeks still starts warm.
    rare = assess_workload(_with(hours_per_run=2, runs_per_week=0.1))
    assert rare.compile_minutes == COMPILE_OVERHEAD[CompilerKind.NEURON_XLA].warm == (1, 5)
    assert rare.verdict is Verdict.ENABLE


def test_neurons_compile_prior_has_a_first_and_a_cached_value_whatever_the_pytorch():
    overhead = COMPILE_OVERHEAD[CompilerKind.NEURON_XLA]
    assert overhead.first == (13.0, 40.0) and overhead.warm == (1.0, 5.0)
    assert "BERT-Large" in overhead.source
    # Neuron's cache has no PyTorch floor (torch.compile's starts at 2.4).
    old = cost.compile_minutes(_with(framework_version="1.13.1"), CompilerKind.NEURON_XLA)
    assert old.warm and old.per_run == (1.0, 5.0)


def test_trn2_gets_the_xla_path_with_the_native_paths_status_and_uncosted_gpus():
    assessment = assess_workload(_with(instance_type="ml.trn2.48xlarge", instance_count=1))
    assert assessment.compiler is CompilerKind.NEURON_XLA
    compiler = assessment.reasons["compiler"]
    assert "public beta since Neuron SDK 2.33 (2026-10-19)" in compiler
    assert "Compiler.torch_compile()" in compiler
    # trn2 has no recorded price: nothing is costed, and the GPUs AWS compares it with are
    # said to be uncosted.
    assert assessment.options == ()
    assert "ml.p5e.48xlarge, ml.p5en.48xlarge, uncosted" in assessment.decision.reason
    priced = assess_workload(_with(instance_type="ml.trn2.48xlarge"),
                             prices={"ml.trn2.48xlarge": 40.0, "ml.p5e.48xlarge": 80.0})
    options = {o.instance_type: o for o in priced.options}
    assert options["ml.p5e.48xlarge"].dollars_per_run == pytest.approx(
        (priced.dollars_per_run, priced.dollars_per_run * 1.4))
    assert "ml.p5en.48xlarge uncosted" in priced.decision.reason


@pytest.mark.parametrize("changes, said", [
    ({"framework_version": "2.5.1"}, "pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.22.0"),
    ({"framework_version": "1.11.0", "instance_type": "ml.trn1.2xlarge"},
     "the legacy pytorch-training-neuron image (Neuron SDK 2.4.0), as both SageMaker SDKs"),
    ({"framework": "huggingface", "framework_version": "2.8.0"},
     "huggingface-pytorch-training-neuronx:2.8.0-transformers4.55.4-neuronx-py310"),
])
def test_the_neuron_path_names_the_image_the_version_trains_on(changes, said):
    assessment = assess_workload(_with(**changes))
    assert said in assessment.reasons["compiler"]
    assert assessment.limits["compiler"] is Verdict.ENABLE


@pytest.mark.parametrize("changes, said, move", [
    ({"framework_version": "2.10"}, "PyTorch 2.10 has no pytorch-training-neuronx image on "
                                    "trn1 (the newest is PyTorch 2.9.0", "move to PyTorch 2.9.0"),
    ({"framework_version": "2.1.2", "instance_type": "ml.trn2.48xlarge"},
     "PyTorch 2.1.2 has no pytorch-training-neuronx image on trn2", "move to PyTorch 2.9.0"),
    ({"framework_version": "1.11.0", "instance_type": "ml.trn2.48xlarge"},
     "serves trn1 only, not 'ml.trn2.48xlarge'", "long past AWS's support: move to"),
])
def test_a_version_without_an_image_on_the_family_is_not_enabled(changes, said, move):
    """The library refuses to build it: the verdict says the job must move first."""
    assessment = assess_workload(_with(**changes))
    assert said in assessment.reasons["compiler"]
    assert assessment.verdict is Verdict.BENCHMARK
    assert assessment.deciding_factor == "compiler"
    assert any(move in note for note in assessment.notes)


def test_an_image_past_awss_support_is_said_with_the_move():
    assessment = assess_workload(_with(framework_version="1.13.1"))
    assert assessment.verdict is Verdict.ENABLE  # it runs; the note says what to plan
    assert any("Neuron SDK 2.20.2's, past AWS's support (releases before 2.21): move to "
               "PyTorch 2.9.0" in note for note in assessment.notes)


def test_other_frameworks_get_no_neuron_path():
    assessment = assess_workload(_with(framework="tensorflow"))
    assert (assessment.compiler, assessment.verdict) == (CompilerKind.NONE, Verdict.SKIP)
    assert "none: tensorflow does not run on the Neuron SDK's" in assessment.reasons["compiler"]


def test_advise_prints_the_neuron_path(tmp_path, capsys):
    workloads = tmp_path / "w.json"
    fields = {k: v for k, v in dataclasses.asdict(BERT_ON_TRN1).items() if v is not None}
    workloads.write_text(json.dumps({"workloads": [fields]}))
    assert main(["advise", str(workloads)]) == 0
    out = capsys.readouterr().out
    assert "ENABLE on ml.trn1.32xlarge with neuron-xla" in out
    assert "try Trainium" not in out and "on trial" not in out


# The GPU candidates' strategy, on every Trainium family and the Neuron images' versions.
trainium_workloads = workloads(["1.11.0", "1.13.1", "2.1.2", "2.5.1", "2.9.0", "2.10"],
                               TRAINIUM_TYPES)


@settings(deadline=None)
@given(trainium_workloads)
def test_a_trainium_job_stays_on_its_instance_with_a_neuron_path(profile):
    assessment = assess_workload(profile)
    assert assessment.compiler is CompilerKind.NEURON_XLA
    assert assessment.decision.instance_type == profile.instance_type
    assert (assessment.decision.verdict, assessment.decision.compiler) == (
        assessment.verdict, assessment.compiler)
    assert assessment.speedup == (1.0, 1.0) and assessment.saving_per_year is None
    assert not _tells_to_try_trainium(assessment)
    # The only other instances costed are the GPUs AWS's claim for the family compares with.
    gpus = {gpu for claim in TRAINIUM_CLAIMS for gpu in claim.compared_with}
    assert {o.instance_type for o in assessment.options} <= {profile.instance_type} | gpus
    assert all(reason.strip() for reason in assessment.reasons.values())


@settings(deadline=None)
@given(trainium_workloads)
def test_a_static_bf16_transformer_run_long_enough_is_never_skipped(profile):
    fit = dataclasses.replace(profile, model_family="bert", static_shapes=True,
                              precision="bf16", hours_per_run=max(profile.hours_per_run, 4.0),
                              framework="pytorch")
    assessment = assess_workload(fit)
    assert assessment.verdict is not Verdict.SKIP
    # ENABLE exactly where the version has an image on the family and nothing else holds
    # it back (a measured bottleneck, or the version to move).
    if assessment.verdict is Verdict.ENABLE:
        assert assessment.limits["compiler"] is Verdict.ENABLE


@settings(deadline=None)
@given(trainium_workloads, st.floats(1.0, 20.0))
def test_on_trainium_longer_runs_static_shapes_and_bf16_never_make_it_worse(profile, factor):
    def rank(**changes) -> int:
        return assess_workload(dataclasses.replace(profile, **changes)).verdict.rank

    base = rank()
    assert rank(hours_per_run=profile.hours_per_run * factor) >= base
    assert rank(static_shapes=True) >= base
    assert rank(precision="bf16") >= base
