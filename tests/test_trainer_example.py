"""examples/trainer-app: a team's own Hugging Face Trainer script behind a gate on the F1 score
Trainer logs, as the model-versions guide shows it.

Synthesized as a user runs it (its own process, its cdk.json's flags), then run locally as its
README says: the training step in the newest PyTorch image's environment (torch 2.14, the
SageMaker toolkit, transformers), torch.compile on the CPU, on the example's own sample data.
The gate passes at the app's threshold; its twin, the same run with a threshold the data cannot
reach, fails with the gate's message. What stands in for AWS: moto (S3, the registry, the
ModelMetrics step's Lambda); one CPU for the GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.environments import NEWEST_GPU_IMAGE, require
from tests.helpers import ROOT, cfn_lint, synth_example

EXAMPLE = ROOT / "examples" / "trainer-app"
PIPELINE = "review-classifier"
DATA = "s3://acme-reviews-data"
# Fewer steps than the app's 3 epochs, evaluated once at the end, as a local run's --set does.
SHORTER = {"max_steps": "30", "eval_strategy": "steps", "eval_steps": "30"}


@pytest.fixture(scope="module")
def trainer_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_example(EXAMPLE, tmp_path_factory.mktemp("trainer-app.out"))


def test_the_trainer_app_synthesizes_clean(trainer_out):
    assert cfn_lint(str(trainer_out / "ReviewsTraining.template.json")) == []
    report = json.loads((trainer_out / "validation-report.json").read_text())
    assert {p["pluginName"]: p["conclusion"] for p in report["pluginReports"]} == {
        "AwsSolutions": "success", "CompiledTraining": "success"}
    # Its hyperparameters are TrainingArguments' own: no ParserRefuses, no warning at all.
    metadata = json.loads((trainer_out / "ReviewsTraining.metadata.json").read_text())
    assert not [entry for entries in metadata.values() for entry in entries
                if entry["type"] == "aws:cdk:warning"]


def _run(trainer_out: Path, tmp_path: Path, report: str, *arguments: str
         ) -> subprocess.CompletedProcess[str]:
    shorter = [arg for name, value in SHORTER.items() for arg in ("--set", f"Train.{name}={value}")]
    return subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(trainer_out),
         "--pipeline", PIPELINE, "--python", str(require(NEWEST_GPU_IMAGE).executable),
         "--data", f"{DATA}/train/={tmp_path / 'data' / 'train'}",
         "--data", f"{DATA}/validation/={tmp_path / 'data' / 'validation'}", *shorter,
         *arguments, "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / report)],
        capture_output=True, text=True, timeout=900, check=False)


def test_its_gate_on_trainers_eval_f1_registers_and_its_twin_threshold_fails(trainer_out,
                                                                            tmp_path):
    subprocess.run([sys.executable, str(EXAMPLE / "sample_data.py"), str(tmp_path / "data")],
                   check=True, capture_output=True)
    passed = _run(trainer_out, tmp_path, "passed.json")
    assert passed.returncode == 0, passed.stdout[-4000:] + passed.stderr[-3000:]
    report = json.loads((tmp_path / "passed.json").read_text())
    steps = {step["name"]: step for step in report["steps"]}
    # The metric definition read Trainer's own log line; the data caps F1 below 1 (one
    # validation review in eight is labelled wrong), and the tiny BERT reaches 0.8 in 30 steps.
    f1 = steps["Train"]["outputs"]["FinalMetricDataList"]["eval_f1"]["Value"]
    log = (tmp_path / "work" / "steps" / "Train" / "training.log").read_text()
    assert f"'eval_f1': '{f1:.4g}'" in log
    assert 0.8 <= f1 < 0.95
    assert steps["Train"]["compile_cache"]["state"] == "cold"  # torch.compile ran
    assert steps["RegisterModel"]["outputs"]["ModelPackageArn"].endswith(
        f":model-package/{PIPELINE}/1")

    # The twin: the same run, warm now, with a threshold (in range) the model cannot reach.
    failed = _run(trainer_out, tmp_path, "failed.json", "--param", "MinEvalF1=0.95")
    assert failed.returncode == 1, failed.stdout[-4000:] + failed.stderr[-3000:]
    report = json.loads((tmp_path / "failed.json").read_text())
    (train,) = [step for step in report["steps"] if step["name"] == "Train"]
    assert train["compile_cache"]["state"] == "warm"  # the first run's graphs, loaded
    assert report["failure"] == (f"step QualityGateFailed failed: Model not registered: eval_f1 "
                                 f"{f1:g} is below the threshold MinEvalF1 0.95")
