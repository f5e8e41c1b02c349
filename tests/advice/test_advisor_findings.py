"""Issue 14's four findings, as a new user meets them in the use case's own words.

This module imports only what the advisor had before the issue, so that it also runs against
the code at the branch point (where each test fails on its first assertion).
"""

from __future__ import annotations

import json
import subprocess
import sys

from compiled_training.advice.advisor import Verdict, WorkloadProfile, assess_workload
from compiled_training.values.compiler import Compiler, CompilerKind

BERT_STYLE = dict(name="document-classification", framework="pytorch",
                  instance_type="ml.g5.48xlarge", instance_count=8, hours_per_run=6.2,
                  runs_per_week=3, static_shapes=True, precision="fp16", batch_size=32,
                  bottleneck="compute")


def test_the_category_transformer_counts_like_bert():
    # "Model family, transformer, vision, or something custom?": the use case's vocabulary.
    assessment = assess_workload(WorkloadProfile(**BERT_STYLE, model_family="transformer"))
    assert assessment.verdict is Verdict.ENABLE
    assert "no published gain" not in assessment.reasons["model"]


def test_an_instance_without_a_known_price_still_gets_its_verdict(tmp_path):
    workloads = tmp_path / "workloads.yaml"
    workloads.write_text("workloads:\n" + "".join(
        f"  - {{name: w{i}, framework: pytorch, model_family: bert, instance_type: {instance},"
        " instance_count: 1, hours_per_run: 6, runs_per_week: 3, static_shapes: true,"
        " precision: bf16}\n"
        for i, instance in enumerate(("ml.c5.18xlarge", "ml.p5.48xlarge", "ml.g6.12xlarge",
                                      "ml.trn1.32xlarge", "ml.p5en.48xlarge"))))
    result = subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", "advise",
                             str(workloads), "--json"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert [w["name"] for w in json.loads(result.stdout)] == [
        "w0", "w1", "w2", "w3", "w4"]


def test_a_pytorch_2_job_off_the_training_compiler_families_gets_torch_compile():
    # A g6 job: Training Compiler never ran there; torch.compile runs on any NVIDIA GPU.
    profile = WorkloadProfile(**{**BERT_STYLE, "instance_type": "ml.g6.48xlarge"},
                              model_family="bert")
    assert assess_workload(profile, prices={"ml.g6.48xlarge": 16.0}).verdict is Verdict.ENABLE
    compiler = Compiler.auto(profile)
    assert compiler.kind is CompilerKind.TORCH_COMPILE
    assert compiler.mode == "default"


def test_dynamic_shapes_make_the_shape_fix_a_first_step_not_a_veto():
    # The use case's plan for Stable Diffusion: normalise the loader to fixed sizes, then
    # benchmark.
    profile = WorkloadProfile(**{**BERT_STYLE, "model_family": "bert", "static_shapes": False})
    assessment = assess_workload(profile)
    assert assessment.verdict is Verdict.BENCHMARK
    assert assessment.notes[0].startswith("first step: make the shapes static (pad sequences")
