"""``compiled-training run`` twice in one workdir: a torch.compile pipeline's second run
restores, through the stand-in S3, the compile cache its first run saved there.

What stands in for AWS: moto's S3 (the training job reaches it over HTTP, moto's server on
the same state) and one host for the instances; the training step runs SageMaker's training
toolkit with the PyTorch DLCs' launcher logic, on a tiny BERT (``--set``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from compiled_training_runtime import contract
from compiled_training_runtime.local import write_examples
from tests.helpers import ENV, TINY_BERT
from tests.runtime.harness import RUNTIME

DATA = "s3://team-data/ranker"


def _assembly(outdir: Path) -> Path:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Ranking", env=ENV)
    TrainingPipeline(stack, "Ranker", pipeline_name="ranker", framework=Framework.pytorch("2.9.0"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
                     source_dir=RUNTIME, entry_point="train.py",
                     channels=[InputChannel("train", f"{DATA}/train/")])
    app.synth()
    return outdir


def test_the_second_local_run_starts_warm_from_the_first_runs_cache(tmp_path):
    assembly = _assembly(tmp_path / "cdk.out")
    write_examples(tmp_path / "train", 32, seed=0)
    tiny = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}
    settings = [arg for name, value in {**tiny, "max_steps": 1}.items()
                for arg in ("--set", f"Train.{name}={value}")]
    reports = []
    for run in ("first", "second"):
        result = subprocess.run(
            [sys.executable, "-m", "compiled_training.tools.cli", "run", str(assembly),
             "--pipeline", "ranker", "--data", f"{DATA}/train/={tmp_path / 'train'}",
             *settings, "--workdir", str(tmp_path / "work"),
             "--json", str(tmp_path / f"{run}.json")],
            capture_output=True, text=True, timeout=900, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        reports.append(json.loads((tmp_path / f"{run}.json").read_text()))
        summary = tmp_path / "work" / "steps" / "Train" / "opt_ml" / "output" / "data"
        reports[-1]["cache"] = json.loads((summary / contract.RUN_SUMMARY_FILE).read_text())[
            contract.SUMMARY_COMPILE_CACHE]

    first, second = (report["cache"] for report in reports)
    assert first["state"] == "cold" and first["graphs_compiled"] > 0
    assert second["state"] == "warm" and second["graphs_compiled"] == 0
    assert second["graphs_loaded"] == first["graphs_compiled"]
    # Where the job put it: the pipeline's own prefix in the run's S3, keyed below its step by
    # the instance type resourceconfig.json names, as on SageMaker.
    assert first["location"].startswith("s3://") and \
        "/ranker/compile-cache/Train/ml.g5.2xlarge/cpu/inductor-default/" in first["location"]
    (archive,) = (tmp_path / "work" / "s3").rglob("inductor-cache.tar.gz")
    assert "ranker/compile-cache/Train" in archive.as_posix()
    assert any(note.startswith("carried from the last run in this workdir, as AWS keeps them "
                               "between executions: ") and " compile-cache objects)" in note
               for note in reports[1]["notes"])


def test_one_process_then_two_then_one_ends_warm_with_the_first_runs_graphs(tmp_path):
    """Under DDP the graphs differ: a two-rank run keeps its own archive (the key names the
    world size), so the third run, one process again, loads the first run's graphs."""
    import aws_cdk as cdk

    from compiled_training import Distribution

    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    TrainingPipeline(cdk.Stack(app, "Ranking", env=ENV), "Ranker", pipeline_name="ranker",
                     framework=Framework.pytorch("2.9.0"), compiler=Compiler.torch_compile(),
                     instance_type="ml.g5.12xlarge", source_dir=RUNTIME, entry_point="train.py",
                     distribution=Distribution.TORCH_DISTRIBUTED,
                     channels=[InputChannel("train", f"{DATA}/train/")])
    app.synth()
    write_examples(tmp_path / "train", 32, seed=0)
    tiny = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}
    settings = [arg for name, value in {**tiny, "max_steps": 1}.items()
                for arg in ("--set", f"Train.{name}={value}")]
    caches = []
    for processes in (1, 2, 1):
        result = subprocess.run(
            [sys.executable, "-m", "compiled_training.tools.cli", "run",
             str(tmp_path / "cdk.out"), "--pipeline", "ranker", "--processes", str(processes),
             "--data", f"{DATA}/train/={tmp_path / 'train'}", *settings,
             "--workdir", str(tmp_path / "work")],
            capture_output=True, text=True, timeout=900, check=False)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        summary = tmp_path / "work" / "steps" / "Train" / "opt_ml" / "output" / "data"
        caches.append(json.loads((summary / contract.RUN_SUMMARY_FILE).read_text())[
            contract.SUMMARY_COMPILE_CACHE])

    one, two, again = caches
    assert one["state"] == two["state"] == "cold"
    assert one["location"].endswith("/world1/inductor-cache.tar.gz")
    assert two["location"].endswith("/world2/inductor-cache.tar.gz")
    assert again["state"] == "warm" and again["location"] == one["location"]
    assert again["hit"] and again["graphs_loaded"] == one["graphs_compiled"] > 0
