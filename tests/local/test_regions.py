"""The README's first pipeline (a stack in eu-west-1) run locally, and the same stack in a
second region and in the ``aws-cn`` and ``aws-us-gov`` partitions (on PyTorch 2.13 there, which
AWS publishes in them, where 2.14 it does not): the stand-in buckets take their region's
location constraint and the ARNs name their partition.

The team's script is its own (no runtime import, ``parse_known_args`` for the library's
switches) and first leaves its model folder empty, which the report flags. What stands in for
AWS: moto; the job runs SageMaker's training toolkit with the PyTorch DLCs' launcher logic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import aws_cdk as cdk
import pytest

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline

SCRIPT = """
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--save_model", type=int, default=0)
args, _ = parser.parse_known_args()
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "rows.txt")).read().split()
print(f"[metrics] train_loss={1 / (1 + len(rows)):.4f}")  # the gate reads this format
if args.save_model:
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("weights")
"""


def _assembly(outdir: Path, region: str, source: Path, *, save: bool) -> Path:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "NlpTraining", env=cdk.Environment(region=region))
    TrainingPipeline(
        stack, "BertFineTune", pipeline_name="nlp-bert-fine-tune",
        framework=Framework.pytorch(_version(region)), compiler=Compiler.torch_compile(),
        instance_type="ml.g5.2xlarge", source_dir=str(source), entry_point="train.py",
        channels=[InputChannel("train", "s3://nlp-data/bert/train/")],
        hyperparameters={"save_model": 1} if save else None)
    app.synth()
    return outdir


def _version(region: str) -> str:
    """The README's PyTorch 2.14, or 2.13 where AWS has not published 2.14 (outside ``aws``)."""
    return "2.14" if region.startswith(("eu-", "ap-")) else "2.13"


@pytest.mark.parametrize(("region", "partition"), [
    ("eu-west-1", "aws"), ("ap-southeast-2", "aws"), ("cn-north-1", "aws-cn"),
    ("us-gov-west-1", "aws-us-gov")])
def test_the_readme_stack_runs_in_its_region_and_partition(tmp_path, region, partition):
    source = tmp_path / "training"
    source.mkdir()
    (source / "train.py").write_text(SCRIPT)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.txt").write_text("a b c\n")
    save = region == "eu-west-1"
    assembly = _assembly(tmp_path / "cdk.out", region, source, save=save)

    result = subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(assembly),
         "--pipeline", "nlp-bert-fine-tune", "--data",
         f"s3://nlp-data/bert/train/={tmp_path / 'data'}", "--workdir", str(tmp_path / "work"),
         "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=600, check=False)

    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    train = {s["name"]: s for s in report["steps"]}["Train"]
    assert train["status"] == "Succeeded"
    assert train["outputs"]["FinalMetricDataList"]["train_loss"]["Value"] == 0.25
    assert f"dkr.ecr.{region}." not in train["image"]  # named by repository and tag
    assert train["image"] == f"pytorch:{_version(region)}-cu133-amzn2023-sagemaker"
    stand_ins = next(note for note in report["notes"] if note.startswith("the template's"))
    assert f"arn:{partition}:" in stand_ins
    empty = "Train: warning: the job left /opt/ml/model empty"
    model = train["outputs"]["ModelArtifacts"]["S3ModelArtifacts"]
    with tarfile.open(tmp_path / "work" / "s3" / model.removeprefix("s3://")) as archive:
        names = archive.getnames()
    if save:
        assert names == ["model.txt"]
        assert not any(note.startswith(empty) for note in report["notes"])
    else:
        assert names == []
        assert any(note.startswith(empty) for note in report["notes"])
