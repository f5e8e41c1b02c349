"""End to end: the reference teams' synthesized training steps, launched as the PyTorch DLCs
launch them: the real sagemaker-training toolkit with the DLCs' framework module
(``sagemaker_pytorch_container.training:main``, which picks the runner from the
hyperparameters), on a tiny BERT with random weights.

Replaced, because it cannot exist here: the GPUs (a stand-in ``nvidia-smi`` gives the count
the toolkit reads) and AWS's ``torch_xla.distributed.xla_spawn`` (only in the Training
Compiler DLCs; a stand-in does what it does, see ``xla_spawn_shim/xla_spawn.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from compiled_training.definition.sourcedir import build_sourcedir
from compiled_training_runtime import contract
from tests.environments import XLA_WITH_GRAD_SCALER, require
from tests.helpers import TINY_BERT, definitions, substitute_expressions
from tests.runtime.harness import RUNTIME, opt_ml, run_with_toolkit

# The teams' models are large; the tests keep their hyperparameters and shrink the model.
TINY = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}


def _team_step(assembly: Any, team: str) -> dict[str, Any]:
    """The team's production training step (TrainingPipeline's step ``Train``)."""
    for definition in definitions(assembly.get_stack_by_name(team).template):
        defaults = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
        for step in definition["Steps"]:
            if step["Name"] == "Train":
                return dict(substitute_expressions(step["Arguments"], defaults))
    raise AssertionError(f"{team} has no step named Train")


def _job(tmp_path: Path, step: dict[str, Any], **overrides: Any) -> Path:
    """The step's hyperparameters (strings, as SageMaker passes them), the tiny model, and
    the code the construct uploads, in an /opt/ml-shaped folder."""
    code = tmp_path / "sourcedir.tar.gz"
    code.write_bytes(build_sourcedir(RUNTIME))
    hyperparameters = dict(step["HyperParameters"])
    hyperparameters.update({k: json.dumps(v) for k, v in {**TINY, **overrides}.items()})
    hyperparameters["sagemaker_submit_directory"] = json.dumps(str(code))
    return opt_ml(tmp_path / "opt_ml", hyperparameters, validation=8)


def _summary(base: Path) -> dict[str, Any]:
    return dict(json.loads((base / "output" / "data" / "metrics.json").read_text()))


def test_document_classification_starts_under_the_pytorchxla_launcher(reference_assembly,
                                                                      tmp_path):
    # The team trains in fp16: its loss scaler is torch_xla.amp.GradScaler, which the Training
    # Compiler images have and torch-xla 2.9 removed, so this runs on torch-xla 2.8.
    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    step = _team_step(reference_assembly, "DocumentClassification")
    assert step["HyperParameters"]["sagemaker_pytorch_xla_multi_worker_enabled"] == "true"
    assert step["HyperParameters"]["precision"] == '"fp16"'
    base = _job(tmp_path, step, max_steps=4, log_every=2, model_family="bert")
    launches = tmp_path / "launches.jsonl"

    result = run_with_toolkit(base, gpus=1, launches=launches, python=python)

    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-6000:]
    # The toolkit chose PyTorchXLARunner, which runs AWS's launcher on the entry point ...
    assert re.search(r"-m torch_xla\.distributed\.xla_spawn --num_gpus 1 train\.py ", logs)
    # ... which imported train.py as the module 'train' and called its _mp_fn.
    (launch,) = [json.loads(line) for line in launches.read_text().splitlines()]
    assert launch["module"] == "train" and launch["argv"][0] == "train.py"
    assert "--max_steps" in launch["argv"]
    summary = _summary(base)
    assert summary["compiler"] == "training-compiler" and summary["steps"] == 4
    assert summary["precision"] == "fp16" and summary["loss_scale"] > 0
    assert (base / "model" / "model.pt").exists()
    assert (base / "checkpoints" / "checkpoint.pt").exists()
    assert (base / "output" / "success").exists()
    # SageMaker reads metrics with the regexes the construct declared in the template.
    declared = step["AlgorithmSpecification"]["MetricDefinitions"]
    for metric in declared:
        assert re.search(metric["Regex"], logs), metric["Name"]
    assert declared == contract.metric_definitions()


def test_creative_starts_under_torchrun_with_one_worker_per_gpu(reference_assembly, tmp_path):
    step = _team_step(reference_assembly, "Creative")
    assert step["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    # The team's own model comes from its model_factory; the launch is what is tested here.
    base = _job(tmp_path, step, max_steps=2, model_family="bert", model_factory="")

    result = run_with_toolkit(base, gpus=2)

    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-6000:]
    assert re.search(r"torchrun --nnodes 1 --nproc_per_node 2 train\.py ", logs)
    summary = _summary(base)
    assert summary["compiler"] == "none" and summary["world_size"] == 2
    assert summary["steps"] == 2 and summary["samples"] == 2 * 2 * TINY["batch_size"]
