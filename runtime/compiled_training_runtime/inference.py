"""Serving: the model archive the runtime writes is one the PyTorch inference DLC serves.

SageMaker unpacks ``model.tar.gz`` into ``/opt/ml/model``. The inference toolkit
(``sagemaker-inference`` under ``sagemaker-pytorch-inference``) puts ``code/`` on the path,
imports ``code/inference.py`` (its default ``SAGEMAKER_PROGRAM``) and calls its ``model_fn``,
``input_fn``, ``predict_fn`` and ``output_fn``. `write_model` lays the archive out:

- ``model.pt``: the weights (a state dict, on the CPU) and ``config.json``: the run's config;
- ``code/inference.py``: these four functions, imported from
- ``code/compiled_training_runtime/``: this package, which the inference images lack;
- ``code/requirements.txt``: ``transformers`` at the training version, for a Transformers
  model (the PyTorch inference DLC has none; the toolkit installs it as the endpoint starts);
- the module of a ``model_factory``, so the endpoint can build the same module.

Requests are JSON: one example or a list, each as a training line without its label
(``{"input_ids": [...]}`` or ``{"features": [...]}``). Responses are JSON:
``{"predictions": [{"label": k, "probabilities": [...]}, ...]}``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import torch

from . import data, models
from .env import TrainingConfig

WEIGHTS = "model.pt"
CONFIG = "config.json"
CODE = "code"
JSON = "application/json"
_ENTRY = ('"""SageMaker\'s inference toolkit imports this file: the compiled-training '
          'runtime serves the model."""\n\n'
          "from compiled_training_runtime.inference import (  # noqa: F401\n"
          "    input_fn,\n    model_fn,\n    output_fn,\n    predict_fn,\n)\n")


@dataclasses.dataclass(frozen=True)
class Served:
    """What ``model_fn`` loads: the module, in eval mode on the device, and its config."""

    model: models.SequenceClassifier | models.FeatureClassifier
    config: TrainingConfig
    device: torch.device


def write_model(model_dir: Path, config: TrainingConfig, module: torch.nn.Module) -> None:
    """Writes the weights, the config and the serving code into ``model_dir``."""
    model_dir.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()},
               model_dir / WEIGHTS)
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
              if f.name != "extra"}
    (model_dir / CONFIG).write_text(json.dumps(fields, sort_keys=True))
    code = model_dir / CODE
    package = Path(__file__).parent
    shutil.copytree(package, code / package.name,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
    (code / "inference.py").write_text(_ENTRY)
    if isinstance(module, models.SequenceClassifier):
        import transformers

        (code / "requirements.txt").write_text(f"transformers=={transformers.__version__}\n")
    if config.model_factory:
        _copy_top_level(config.model_factory.partition(":")[0], code)


def _copy_top_level(module_name: str, code: Path) -> None:
    """The factory's top-level module or package, beside ``inference.py``."""
    spec = importlib.util.find_spec(module_name.split(".")[0])
    if spec is None or spec.origin is None:
        return  # models.build has already imported it; a namespace package has no one file
    if spec.submodule_search_locations:
        source = Path(spec.origin).parent
        shutil.copytree(source, code / source.name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        shutil.copy2(spec.origin, code / Path(spec.origin).name)


# --- the toolkit's four functions ----------------------------------------------------------

def model_fn(model_dir: str) -> Served:
    config = TrainingConfig(**json.loads((Path(model_dir) / CONFIG).read_text()))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = models.build(config)
    model.load_state_dict(torch.load(Path(model_dir) / WEIGHTS, map_location="cpu"))
    return Served(model.to(device).eval(), config, device)


def input_fn(body: str | bytes, content_type: str) -> list[dict[str, Any]]:
    if content_type.split(";")[0].strip() != JSON:
        raise ValueError(f"content type must be {JSON}, got {content_type!r}")
    parsed = json.loads(body)
    records = parsed if isinstance(parsed, list) else [parsed]
    for record in records:
        if not isinstance(record, dict) or not {"input_ids", "features"} & set(record):
            raise ValueError(f"each example must be an object with 'input_ids' (token ids) or "
                             f"'features' (numbers), as in training, got {record!r:.200}")
    return records


def predict_fn(records: list[dict[str, Any]], served: Served) -> list[dict[str, Any]]:
    inputs = data.tensors(records, served.config, labels=False)
    with torch.no_grad():
        logits = served.model.predict(**{k: v.to(served.device) for k, v in inputs.items()})
    probabilities = torch.softmax(logits.float(), dim=-1).cpu()
    return [{"label": int(row.argmax()), "probabilities": row.tolist()}
            for row in probabilities]


def output_fn(predictions: list[dict[str, Any]], accept: str) -> tuple[str, str]:
    if accept.split(";")[0].strip() not in (JSON, "*/*"):
        raise ValueError(f"accept must be {JSON}, got {accept!r}")
    return json.dumps({"predictions": predictions}), JSON
