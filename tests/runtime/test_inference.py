"""The model archive the runtime writes is served by SageMaker's PyTorch inference toolkit.

A tiny model is trained by the runtime on CPU, its ``/opt/ml/model`` packed as SageMaker packs
``model.tar.gz`` and unpacked elsewhere, then served through the real toolkit
(``sagemaker-pytorch-inference``'s handler service over ``sagemaker-inference``) in a process
that has only the archive's ``code/`` and the toolkit on its path. Only TorchServe's context
object is a stand-in (serve_probe.py says why).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import sagemaker_inference
import sagemaker_pytorch_serving_container
import transformers

from compiled_training_runtime.local import digits
from tests.helpers import TINY_BERT
from tests.runtime.harness import opt_ml, run_direct

PROBE = Path(__file__).resolve().parent / "serve_probe.py"
MLP = {"model_family": "mlp", "num_features": 64, "num_labels": 10, "hidden_size": 32,
       "batch_size": 16, "learning_rate": 3e-3, "epochs": 4, "log_every": 1000,
       "checkpoint_every": 1000, "seed": 3}


def _train_and_unpack(tmp_path: Path, hyperparameters: dict, **data) -> Path:
    """Trains, packs /opt/ml/model as SageMaker does, unpacks it where an endpoint would."""
    base = opt_ml(tmp_path / "job", hyperparameters, **data)
    result = run_direct(base, hyperparameters)
    assert result.returncode == 0, result.stderr[-4000:]
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as packed:
        for item in sorted((base / "model").iterdir()):
            packed.add(item, arcname=item.name)
    served = tmp_path / "endpoint" / "model"
    served.mkdir(parents=True)
    with tarfile.open(archive) as packed:
        packed.extractall(served, filter="data")
    return served


def _serve(model_dir: Path, body: str, content_type: str = "application/json",
           accept: str = "application/json") -> dict:
    # The toolkits' folder only (not this checkout's runtime): what the endpoint runs must
    # come from the archive. The archive's code/ goes first, as the toolkit's start-up sets it.
    toolkits = {str(Path(m.__file__).parents[1]) for m in (sagemaker_inference,
                                                            sagemaker_pytorch_serving_container)}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(model_dir / "code"), *sorted(toolkits)])
    result = subprocess.run([sys.executable, str(PROBE), str(model_dir), content_type, accept],
                            input=body, env=env, cwd=model_dir.parent, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_the_served_model_reproduces_the_validation_accuracy_training_reported(tmp_path):
    train, validation = digits()
    model_dir = _train_and_unpack(tmp_path, MLP, train=train[:640], validation=validation)
    assert sorted(p.name for p in (model_dir / "code").iterdir()) == [
        "compiled_training_runtime", "inference.py"]  # no requirements: torch alone serves it
    reported = json.loads((tmp_path / "job" / "output" / "data" / "metrics.json").read_text())
    # The runtime validates whole batches only; serve exactly those examples.
    seen = len(validation) // MLP["batch_size"] * MLP["batch_size"]
    request = [{"features": r["features"]} for r in validation[:seen]]

    served = _serve(model_dir, json.dumps(request))

    assert served["status"] is None and served["content_type"] == "application/json"
    assert served["runtime"].startswith(str(model_dir / "code"))
    predictions = json.loads(served["response"])["predictions"]
    assert len(predictions) == seen
    assert all(len(p["probabilities"]) == 10 and abs(sum(p["probabilities"]) - 1) < 1e-4
               for p in predictions)
    correct = sum(p["label"] == r["label"] for p, r in zip(predictions, validation[:seen], strict=True))
    assert correct / seen == reported["validation_accuracy"]
    assert reported["validation_accuracy"] > 0.5  # it learned: the served weights are trained


def test_a_transformers_model_serves_and_pins_its_transformers_version(tmp_path):
    model_dir = _train_and_unpack(tmp_path, TINY_BERT, validation=8)
    assert (model_dir / "code" / "requirements.txt").read_text() == \
        f"transformers=={transformers.__version__}\n"
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_family"] == "bert" and config["max_seq_length"] == 16

    served = _serve(model_dir, json.dumps({"input_ids": [5, 9, 2, 40]}))

    (prediction,) = json.loads(served["response"])["predictions"]
    assert prediction["label"] in (0, 1) and len(prediction["probabilities"]) == 2


def test_a_model_factory_module_travels_with_the_archive(tmp_path):
    source = tmp_path / "code"
    source.mkdir()
    (source / "team_model.py").write_text(
        "import torch\n\n\ndef build(config):\n"
        "    return torch.nn.Linear(config.num_features, config.num_labels)\n")
    hyperparameters = {**MLP, "model_factory": "team_model:build", "epochs": 1}
    train, _ = digits()
    base = opt_ml(tmp_path / "job", hyperparameters, train=train[:64])
    env = _direct_env_with(base, hyperparameters, source)
    result = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "runtime" /
                                                 "train.py")], env=env, cwd=source,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    model_dir = base / "model"
    assert (model_dir / "code" / "team_model.py").exists()

    served = _serve(model_dir, json.dumps([{"features": train[0]["features"]}]))

    assert len(json.loads(served["response"])["predictions"]) == 1


def _direct_env_with(base: Path, hyperparameters: dict, source: Path) -> dict[str, str]:
    from tests.runtime.harness import direct_env

    env = direct_env(base, hyperparameters)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(source)])
    return env


def test_fails_clearly_on_a_request_it_cannot_read(tmp_path):
    train, _ = digits()
    model_dir = _train_and_unpack(tmp_path, {**MLP, "epochs": 1}, train=train[:64])

    served = _serve(model_dir, "1,2,3", content_type="text/csv")
    assert served["status"][0] == 500
    assert "content type must be application/json, got 'text/csv'" in served["response"]
    served = _serve(model_dir, json.dumps({"pixels": [1]}))
    assert "each example must be an object with 'input_ids' (token ids) or 'features'" in \
        served["response"]
