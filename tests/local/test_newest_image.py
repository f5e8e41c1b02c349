"""A torch.compile pipeline on PyTorch 2.14, the newest training image (Amazon Linux 2023), run
locally in that image's Python, torch and SageMaker toolkit (tests/environments.py builds them):
two ranks under torchrun train the runtime's tiny BERT compiled, save the compile cache, and a
second execution starts warm from it.

What stands in for AWS: moto's S3; the GPUs, by the CPU (``--processes``); one host.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk

from compiled_training import (
    Compiler,
    Distribution,
    Framework,
    InputChannel,
    TrainingPipeline,
)
from compiled_training_runtime import contract
from compiled_training_runtime.local import write_examples
from tests.environments import NEWEST_GPU_IMAGE, require
from tests.helpers import TINY_BERT
from tests.runtime.harness import RUNTIME

DATA = "s3://team-data/bert/train/"


def _assembly(outdir: Path) -> Path:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Nlp", env=cdk.Environment(region="eu-central-1"))
    TrainingPipeline(stack, "Bert", pipeline_name="bert-2-14", framework=Framework.pytorch("2.14"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.12xlarge",
                     distribution=Distribution.TORCH_DISTRIBUTED, source_dir=str(RUNTIME),
                     entry_point="train.py", channels=[InputChannel("train", DATA)])
    app.synth()
    return outdir


def _execute(assembly: Path, tmp_path: Path, name: str) -> tuple[dict, dict]:
    """One run in the shared workdir (its S3 carried to the next), its report and its summary."""
    tiny = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}
    values = [arg for key, value in {**tiny, "max_steps": 2}.items()
              for arg in ("--set", f"Train.{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(assembly),
         "--pipeline", "bert-2-14", "--python", str(require(NEWEST_GPU_IMAGE).executable),
         "--processes", "2", "--data", f"{DATA}={tmp_path / 'train'}", *values,
         "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / f"{name}.json")],
        capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = (tmp_path / "work" / "steps" / "Train" / "opt_ml" / "output" / "data"
               / contract.RUN_SUMMARY_FILE)
    return json.loads((tmp_path / f"{name}.json").read_text()), json.loads(summary.read_text())


def test_a_pytorch_2_14_pipeline_trains_compiled_in_its_images_python_and_starts_warm(tmp_path):
    write_examples(tmp_path / "train", 32, seed=0)
    assembly = _assembly(tmp_path / "cdk.out")

    first, cold = _execute(assembly, tmp_path, "first")
    (train,) = first["steps"]
    assert (train["name"], train["status"]) == ("Train", "Succeeded")
    assert train["image"] == "pytorch:2.14-cu133-amzn2023-sagemaker"
    assert cold["compiler"] == contract.COMPILER_TORCH_COMPILE and cold["world_size"] == 2
    assert cold[contract.SUMMARY_COMPILE_CACHE]["state"] == "cold"
    # Keyed by what compiled it: this environment's torch and Python, the image's (its torch is
    # PyTorch's cu130 wheel too), and two ranks.
    assert "/ml.g5.12xlarge/cpu/inductor-default/torch-2.14.0+cu130/" in \
        cold[contract.SUMMARY_COMPILE_CACHE]["location"]
    assert "/py3.12/world2/" in cold[contract.SUMMARY_COMPILE_CACHE]["location"]

    _, warm = _execute(assembly, tmp_path, "second")
    cache = warm[contract.SUMMARY_COMPILE_CACHE]
    assert cache["state"] == "warm" and cache["graphs_compiled"] == 0
    assert cache["graphs_loaded"] == cold[contract.SUMMARY_COMPILE_CACHE]["graphs_compiled"] > 0
