"""A gate on the team's own metric, printed in its own format: the script knows nothing of this
library (no runtime import, its own argparse, its own log line), and reports only its gate
metric. Above the threshold the model is registered; below it the execution fails with the
gate's message.

What stands in for AWS: moto (S3 and the model registry); the job runs SageMaker's training
toolkit with the PyTorch DLCs' launcher logic, the ModelMetrics step its Lambda handler.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from compiled_training import (
    Compiler,
    Framework,
    InputChannel,
    MetricDefinition,
    ModelRegistration,
    TrainingPipeline,
)

SCRIPT = """
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--quality", type=float, default=0.9)
args, _ = parser.parse_known_args()
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("weights")
print(f"epoch 1 done. F1 score: {args.quality:.3f}")
"""
DATA = "s3://team-data/clf"


def _assembly(outdir: Path, source: Path) -> Path:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Classifier", env=cdk.Environment(region="eu-west-1"))
    TrainingPipeline(
        stack, "Clf", pipeline_name="classifier", framework=Framework.pytorch("2.6.0"),
        compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
        source_dir=str(source), entry_point="train.py",
        channels=[InputChannel("train", f"{DATA}/train/"),
                  InputChannel("validation", f"{DATA}/validation/")],
        metric_definitions=[MetricDefinition("f1", r"F1 score: ([0-9.]+)")],
        registration=ModelRegistration(model_package_group_name="classifier", gate_metric="f1",
                                       gate_threshold=0.8))
    app.synth()
    return outdir


def _run(tmp_path: Path, script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The pipeline synthesized with ``script`` (once), then run."""
    source = tmp_path / "training"
    if not source.exists():
        source.mkdir()
        (source / "train.py").write_text(script)
        for channel in ("train", "validation"):
            (tmp_path / channel).mkdir()
            (tmp_path / channel / "rows.txt").write_text("a b c\n")
        _assembly(tmp_path / "cdk.out", source)
    assembly = tmp_path / "cdk.out"
    return subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(assembly),
         "--pipeline", "classifier", *arguments,
         "--data", f"{DATA}/train/={tmp_path / 'train'}",
         "--data", f"{DATA}/validation/={tmp_path / 'validation'}",
         "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize(("quality", "registered"), [(0.9, True), (0.5, False)])
def test_a_gate_on_the_scripts_own_f1_registers_above_it_and_fails_below(tmp_path, quality,
                                                                          registered):
    result = _run(tmp_path, SCRIPT, "--set", f"Train.quality={quality}")

    report = json.loads((tmp_path / "report.json").read_text())
    steps = {step["name"]: step for step in report["steps"]}
    assert steps["Train"]["outputs"]["FinalMetricDataList"]["f1"]["Value"] == quality
    assert steps["ModelMetrics"]["status"] == "Succeeded"  # it asked for f1 alone
    if registered:
        assert result.returncode == 0, result.stdout + result.stderr
        assert steps["RegisterModel"]["status"] == "Succeeded"
        assert steps["QualityGateFailed"]["status"] == "Skipped"
    else:
        assert result.returncode == 1, result.stdout + result.stderr
        assert steps["RegisterModel"]["status"] == "Skipped"
        assert report["failure"] == ("step QualityGateFailed failed: Model not registered: f1 "
                                     f"{quality} is below the threshold MinF1 0.8")


def test_a_metric_its_regex_never_matches_is_said_with_the_regex_and_the_log(tmp_path):
    result = _run(tmp_path, SCRIPT.replace("F1 score:", "F1="))
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    log = tmp_path / "work" / "steps" / "Train" / "training.log"
    why = (f"its regex 'F1 score: ([0-9.]+)' never matched the job's log ({log}), so "
           f"SageMaker reports no such metric: print it so, or fix the regex")
    assert report["failure"].endswith(f"metric 'f1': {why}"), report["failure"]
    assert f"Train: metrics never printed as their definitions read them: f1: {why}" in \
        report["notes"]


@pytest.mark.parametrize("threshold", ["85", "-0.1"])
def test_a_threshold_outside_the_metric_s_range_stops_the_run_before_it_starts(tmp_path,
                                                                               threshold):
    result = _run(tmp_path, SCRIPT, "--param", f"MinF1={threshold}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == (f"compiled-training run: --param MinF1 {float(threshold)!r} is "
                             f"outside [0, 1], the range of 'f1' (a fraction, as its name "
                             f"says){': for 85 % give 0.85' if threshold == '85' else ''}\n")
    assert not (tmp_path / "work").exists()  # nothing ran


def test_each_run_in_a_workdir_registers_the_next_version_until_it_starts_fresh(tmp_path):
    """The model package group keeps its versions between executions, as on AWS, with the
    run's S3; --fresh starts without either."""
    arns, notes = [], []
    for arguments in ((), (), ("--fresh",)):
        result = _run(tmp_path, SCRIPT, *arguments)
        assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        (register,) = [s for s in report["steps"] if s["name"] == "RegisterModel"]
        arns.append(register["outputs"]["ModelPackageArn"])
        notes.append([n for n in report["notes"] if n.startswith("carried from the last run")])
    assert [arn.rsplit("/", 2)[1:] for arn in arns] == [["classifier", "1"], ["classifier", "2"],
                                                        ["classifier", "1"]]
    first, (second,), fresh = notes
    assert first == fresh == []
    assert second.endswith(" and 1 model version (--fresh starts without them)"), second
