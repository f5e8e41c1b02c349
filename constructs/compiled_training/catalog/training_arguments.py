"""Hugging Face's ``TrainingArguments`` classes as ``HfArgumentParser`` turns them into options,
read from ``training-arguments.json`` (``make training-arguments`` writes it from transformers
itself; synthesis has no transformers)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

_CATALOG = resources.files(__package__) / "training-arguments.json"
TORCH_COMPILE = "torch_compile"
TORCH_COMPILE_MODE = "torch_compile_mode"
"""``TrainingArguments``' own fields for torch.compile (transformers' training_args.py)."""


@functools.cache
def _catalog() -> dict[str, Any]:
    catalog: dict[str, Any] = json.loads(_CATALOG.read_text())
    return catalog


def transformers_version() -> str:
    """The transformers release the catalog was read from."""
    return str(_catalog()["transformers"])


def argument_fields(class_name: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """A class's init fields and, of those, the booleans whose default is True; None for a
    class the catalog does not hold."""
    entry = _catalog()["classes"].get(class_name)
    if entry is None:
        return None
    return frozenset(entry["fields"]), frozenset(entry["true_booleans"])
