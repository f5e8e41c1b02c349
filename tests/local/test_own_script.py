"""A team's own scripts, unchanged, under a torch.compile pipeline: a plain PyTorch script with
a strict argparse and its own torch.compile call, and a Hugging Face Trainer script. Neither
imports the runtime; the runtime's launcher goes in front of each and carries the compile
cache, so a second run in the same workdir is warm, on one process and on two.

What stands in for AWS: moto's S3 (the job's own S3 calls reach moto's server), one host for
the instances and an ``nvidia-smi`` listing ``--processes`` GPUs; the training step runs
SageMaker's training toolkit with the PyTorch DLCs' launcher logic (torchrun).
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
    Distribution,
    Framework,
    InputChannel,
    TrainingPipeline,
)
from compiled_training_runtime import contract
from tests.helpers import definitions

SCRIPTS = Path(__file__).parent / "team_scripts"
DATA = "s3://team-data/own"
# Each script's own hyperparameters, as the team passes them today.
HYPERPARAMETERS = {
    "plain": {"epochs": 2, "lr": 0.05},
    "trainer": {"max_steps": 2, "per_device_train_batch_size": 8, "use_cpu": True,
                "report_to": "none", "save_strategy": "no",
                "output_dir": "/opt/ml/output/data/trainer"},
}


def _assembly(outdir: Path, script: str) -> Path:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Team", env=cdk.Environment(region="eu-west-1"))
    TrainingPipeline(stack, "Own", pipeline_name=f"own-{script}",
                     framework=Framework.pytorch("2.9.0"), compiler=Compiler.torch_compile(),
                     instance_type="ml.g5.12xlarge", distribution=Distribution.TORCH_DISTRIBUTED,
                     source_dir=str(SCRIPTS / script), entry_point="train.py",
                     hyperparameters=HYPERPARAMETERS[script],
                     channels=[InputChannel("train", f"{DATA}/train/")])
    app.synth()
    return outdir


def _data(folder: Path) -> Path:
    """Iris (scikit-learn's bundled copy) for the plain script, labelled lines for Trainer."""
    from sklearn.datasets import load_iris

    folder.mkdir(parents=True)
    iris = load_iris()
    rows = [",".join(f"{v:g}" for v in (*x, y)) for x, y in zip(iris.data, iris.target,
                                                                  strict=True)]
    (folder / "iris.csv").write_text("\n".join(rows) + "\n")
    words = ["good", "bad", "great", "awful", "fine", "poor", "film", "plot", "cast", "score"]
    lines = [f"{i % 2}\t{' '.join(words[(i * k) % len(words)] for k in range(1, 9))}"
             for i in range(32)]
    (folder / "reviews.tsv").write_text("\n".join(lines) + "\n")
    return folder


def _run(assembly: Path, script: str, data: Path, workdir: Path, processes: int,
         report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(assembly),
         "--pipeline", f"own-{script}", "--data", f"{DATA}/train/={data}",
         "--processes", str(processes), "--workdir", str(workdir), "--json", str(report)],
        capture_output=True, text=True, timeout=1200, check=False)


@pytest.mark.parametrize("script", ["plain", "trainer"])
def test_a_teams_script_trains_unchanged_and_its_second_run_is_warm(tmp_path, script):
    assembly = _assembly(tmp_path / "cdk.out", script)
    (definition,) = definitions(json.loads((assembly / "Team.template.json").read_text()))
    (step,) = definition["Steps"]
    # The script is the team's, unchanged: the launcher runs it, and only a Trainer script
    # that parses its TrainingArguments is given torch.compile's switches as arguments.
    hyperparameters = step["Arguments"]["HyperParameters"]
    assert hyperparameters["sagemaker_program"] == json.dumps(contract.LAUNCHER)
    assert step["Arguments"]["Environment"][contract.ENV_ENTRY_POINT] == "train.py"
    assert ("torch_compile" in hyperparameters) is (script == "trainer")
    data = _data(tmp_path / "data")
    caches = {}
    for processes in (1, 2):
        for run in ("first", "second"):
            report = tmp_path / f"{processes}-{run}.json"
            result = _run(assembly, script, data, tmp_path / "work", processes, report)
            assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
            (step,) = json.loads(report.read_text())["steps"]
            caches[processes, run] = step["compile_cache"]
            assert f"Train: compile cache {step['compile_cache']['state']}:" in result.stdout
    for processes in (1, 2):
        first, second = caches[processes, "first"], caches[processes, "second"]
        assert first["state"] == "cold" and first["graphs_compiled"] > 0, first
        assert second["state"] == "warm" and second["graphs_loaded"] == \
            first["graphs_compiled"], second
        assert second["graphs_compiled"] == 0
        assert first["location"].endswith(f"/world{processes}/inductor-cache.tar.gz")


@pytest.mark.parametrize("script", ["plain", "trainer"])
def test_a_failing_script_fails_its_step_and_saves_no_cache(tmp_path, script):
    """The twin: the same script made to fail ends the step as it would alone, and the
    launcher saves nothing."""
    source = tmp_path / script
    source.mkdir()
    text = (SCRIPTS / script / "train.py").read_text()
    (source / "train.py").write_text(text + "\nraise SystemExit('the team script failed')\n")
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    TrainingPipeline(cdk.Stack(app, "Team", env=cdk.Environment(region="eu-west-1")), "Own",
                     pipeline_name=f"own-{script}", framework=Framework.pytorch("2.9.0"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
                     source_dir=str(source), entry_point="train.py",
                     hyperparameters=HYPERPARAMETERS[script],
                     channels=[InputChannel("train", f"{DATA}/train/")])
    app.synth()
    result = _run(tmp_path / "cdk.out", script, _data(tmp_path / "data"), tmp_path / "work", 1,
                  tmp_path / "report.json")
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the team script failed" in result.stdout
    assert not list((tmp_path / "work" / "s3").rglob("inductor-cache.tar.gz"))
    assert not (tmp_path / "work" / "steps" / "Train" / "opt_ml" / "output" / "data" /
                contract.COMPILE_CACHE_SUMMARY_FILE).exists()
