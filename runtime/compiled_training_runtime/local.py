"""A SageMaker job's layout on this machine: an ``/opt/ml``-shaped folder, its environment,
and its output packed as SageMaker uploads it. For local runs and benchmarks; never used
inside a training image.
"""

from __future__ import annotations

import json
import os
import random
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import contract

# A BERT small enough to train in seconds on a CPU: the model of ``compiled-training bench``
# and of the tests. Random token sequences (`write_examples`) fit it.
TINY_BERT: Mapping[str, Any] = {
    "model_family": "bert", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
    "num_attention_heads": 2, "intermediate_size": 64, "max_seq_length": 16,
}


def write_examples(folder: Path, count: int, *, seed: int = 0,
                   max_length: int = TINY_BERT["max_seq_length"],
                   vocab_size: int = TINY_BERT["vocab_size"]) -> None:
    """``count`` random token sequences with binary labels, as JSON lines."""
    rng = random.Random(seed)
    records = []
    for _ in range(count):
        length = rng.randint(4, max_length)
        records.append({"input_ids": [rng.randint(1, vocab_size - 1) for _ in range(length)],
                        "label": rng.randint(0, 1)})
    write_records(folder, records)


def write_records(folder: Path, records: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def digits() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """scikit-learn's bundled digits (8x8 images of 0-9, 1,797 of them) as train and validation
    records ``{"features": [64 floats in 0..1], "label": k}``: every fifth image validates.
    The data ship inside scikit-learn; nothing is downloaded."""
    from sklearn.datasets import load_digits

    images = load_digits()
    records = [{"features": [float(v) / 16 for v in images.data[i]],
                "label": int(images.target[i])} for i in range(len(images.target))]
    return ([r for i, r in enumerate(records) if i % 5],
            [r for i, r in enumerate(records) if i % 5 == 0])


def _write_channel(folder: Path, examples: int | list[dict[str, Any]], seed: int) -> None:
    """That many random token sequences, or the records given."""
    if isinstance(examples, int):
        write_examples(folder, examples, seed=seed)
    else:
        write_records(folder, examples)


def job_folder(base: Path, hyperparameters: Mapping[str, Any], *,
               train: int | list[dict[str, Any]] | None = 32,
               validation: int | list[dict[str, Any]] = 0) -> Path:
    """A folder shaped like /opt/ml, with data and the job's configuration; each channel holds
    that many random token sequences or the records given (e.g. `digits`)."""
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    channels = {}
    if train is not None:
        _write_channel(base / "input" / "data" / contract.CHANNEL_TRAIN, train, seed=0)
        channels[contract.CHANNEL_TRAIN] = {"TrainingInputMode": "File",
                                            "S3DistributionType": "FullyReplicated"}
    if validation:
        _write_channel(base / "input" / "data" / contract.CHANNEL_VALIDATION, validation,
                       seed=1)
        channels[contract.CHANNEL_VALIDATION] = {"TrainingInputMode": "File"}
    # SageMaker writes every hyperparameter value as a string, JSON-encoded by the SDK.
    (config / "hyperparameters.json").write_text(json.dumps(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in hyperparameters.items()}))
    (config / "inputdataconfig.json").write_text(json.dumps(channels))
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}))
    return base


def job_env(base: Path, hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """The environment the training toolkit gives the entry point, for runs without it."""
    data = base / "input" / "data"
    channels = sorted(p.name for p in data.iterdir()) if data.exists() else []
    # The job's own switches only: none this shell happens to export.
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPILED_TRAINING_")}
    env.update({
        "SAGEMAKER_BASE_DIR": str(base),
        "SM_HPS": json.dumps(dict(hyperparameters)),
        "SM_CHANNELS": json.dumps(channels),
        "SM_MODEL_DIR": str(base / "model"),
        "SM_OUTPUT_DIR": str(base / "output"),
        "SM_OUTPUT_DATA_DIR": str(base / "output" / "data"),
        "PJRT_DEVICE": env.get("PJRT_DEVICE", "CPU"),
    })
    for name in channels:
        env[f"SM_CHANNEL_{name.upper()}"] = str(data / name)
    return env


def pack_output(base: Path, target: Path) -> Path:
    """``/opt/ml/output/data`` as SageMaker uploads it: ``output.tar.gz`` in ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    archive_path = target / "output.tar.gz"
    with tarfile.open(archive_path, "w:gz") as archive:
        for item in sorted((base / "output" / "data").iterdir()):
            archive.add(item, arcname=item.name)
    return archive_path
