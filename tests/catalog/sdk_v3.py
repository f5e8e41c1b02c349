"""The SageMaker SDK v3 as an oracle of training image URIs: what its ``retrieve`` gives for every
PyTorch and Hugging Face PyTorch training image it lists (``sdk_v3_images.py``, run by a Python
that has the SDK), and where the library's catalog resolves differently."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from compiled_training import Framework
from compiled_training.catalog.dlc import resolve_dlc

SCRIPT = Path(__file__).with_name("sdk_v3_images.py")
INSTANCES = {"gpu": "ml.g5.xlarge", "cpu": "ml.m5.xlarge"}
# A deliberate difference: the library names an image's Python by its minor version (py38, py312),
# so the 2018-2019 images the SDK tags py2 and py3 (PyTorch 0.4.0 to 1.4.0) are not resolved.
UNNAMED_PYTHONS = ("py2", "py3")


def sdk_v3_images(python: str) -> dict[str, Any]:
    """``{"sagemaker-core": version, "rows": [...]}`` from the SDK that ``python`` has."""
    result = subprocess.run([python, str(SCRIPT)], capture_output=True, text=True, check=False,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def library_uri(row: dict[str, Any]) -> str:
    """The URI the library's catalog gives for an SDK row, or ``error: ...`` where it refuses."""
    try:
        if row["framework"] == "huggingface":
            framework = Framework.huggingface(row["version"], py_version=row["py_version"],
                                              pytorch_version=row["pytorch_version"])
        else:
            framework = Framework.pytorch(row["version"], py_version=row["py_version"])
        return resolve_dlc(framework, False, INSTANCES[row["processor"]]).uri(row["region"])
    except ValueError as error:
        return f"error: {error}"


def differences(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per release the SDK lists (``PyTorch 2.14 (pytorch-amzn2023)``), how the library differs:
    an image it does not resolve, or resolves to another URI, or resolves where the SDK refuses."""
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row["py_version"] in UNNAMED_PYTHONS:
            continue
        ours, theirs = library_uri(row), row["uri"]
        if ours == theirs or (ours.startswith("error") and theirs.startswith("error")):
            continue
        release = (f"Hugging Face {row['version']} with PyTorch {row['pytorch_version']}"
                   if row["framework"] == "huggingface" else f"PyTorch {row['version']}")
        where = f"{row['processor']} {row['py_version'] or ''} in {row['region']}"
        found[f"{release} ({row['config']})"].append(f"{where}: SDK {theirs}; library {ours}")
    return dict(found)


# The SDK's PyTorch and Hugging Face files that hold no training image of a GPU or CPU, or whose
# images the library takes from elsewhere: a new file (images moved again) is not among them.
READ = {"pytorch", "pytorch-amzn2023", "huggingface"}
NOT_READ = {
    "pytorch-training-compiler": "Training Compiler, frozen: test_image_matrix holds it",
    "huggingface-training-compiler": "Training Compiler, frozen: test_image_matrix holds it",
    "pytorch-neuron": "Trainium's legacy 1.11.0 image: test_dlc holds it",
    "huggingface-neuronx": "Trainium: the library's Neuron table, these registries",
    "huggingface-neuron": "Inferentia 1 inference",
    "pytorch-smp": "the model-parallel library's images, which the library does not offer",
    "huggingface-llm": "inference", "huggingface-llm-neuronx": "inference",
    "huggingface-tei": "inference", "huggingface-tei-cpu": "inference",
    "huggingface-vllm": "inference", "huggingface-vllm-neuronx": "inference",
    "huggingface-vllm-omni": "inference", "huggingface-llamacpp": "inference",
    "huggingface-sglang": "inference",
}


def unknown_files(files: list[str]) -> list[str]:
    """The SDK's PyTorch and Hugging Face files neither read by these tests nor known not to
    hold what they check."""
    return [name for name in files if name not in READ and name not in NOT_READ]


def summary(found: dict[str, list[str]]) -> str:
    """One line a release, with its first difference."""
    return "\n".join(f"- {release}: {len(cases)} images, e.g. {cases[0]}"
                     for release, cases in sorted(found.items()))
