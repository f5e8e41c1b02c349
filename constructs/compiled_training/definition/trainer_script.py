"""Hugging Face ``Trainer`` scripts: torch.compile switched on as ``TrainingArguments`` takes it.

A script that parses its ``TrainingArguments`` from the command line (``HfArgumentParser``)
reads ``--torch_compile True --torch_compile_mode <mode>``, which the toolkit passes from the
job's hyperparameters. One that builds them in code reads nothing the job passes.
"""

from __future__ import annotations

import ast
import functools
from enum import Enum
from pathlib import Path

from compiled_training.definition import compile_cache
from compiled_training.values.job import HyperparameterValue, TrainingJob

# TrainingArguments' own fields for torch.compile (transformers' training_args.py).
TORCH_COMPILE = "torch_compile"
TORCH_COMPILE_MODE = "torch_compile_mode"


class TrainerScript(Enum):
    PARSED = "parsed"
    """``TrainingArguments`` come from ``HfArgumentParser``: the job's arguments reach them."""
    IN_CODE = "in_code"
    """``TrainingArguments(...)`` is built in code, without ``torch_compile``: the job's
    arguments do not reach it."""


def trainer_script(entry_point: str | None, source_dir: Path | None) -> TrainerScript | None:
    """How the entry point makes its ``TrainingArguments``, or None where it makes none (or
    cannot be read here)."""
    script = source_dir / entry_point if source_dir is not None and entry_point else None
    if script is None or not script.is_file():
        return None
    return _kind(script.read_bytes())


@functools.lru_cache(maxsize=64)
def _kind(source: bytes) -> TrainerScript | None:
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    calls = [node for node in ast.walk(module) if isinstance(node, ast.Call)]
    # Parsed: TrainingArguments (or a subclass named so) among what HfArgumentParser parses.
    if any(_name(call.func) == "HfArgumentParser" and any(
            _arguments_class(node) for arg in call.args for node in ast.walk(arg))
           for call in calls):
        return TrainerScript.PARSED
    built = [call for call in calls if _arguments_class(call.func)]
    if built and not any(keyword.arg == TORCH_COMPILE for call in built
                         for keyword in call.keywords):
        return TrainerScript.IN_CODE
    return None


def _arguments_class(node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Attribute)) and _name(node).endswith(
        "TrainingArguments")


def _name(function: ast.AST) -> str:
    if isinstance(function, ast.Attribute):
        return function.attr
    return function.id if isinstance(function, ast.Name) else ""


def trainer_hyperparameters(job: TrainingJob) -> dict[str, HyperparameterValue]:
    """torch.compile's switches as ``TrainingArguments`` takes them, for a script that parses
    them from the command line; a value the job sets itself stays."""
    if not compile_cache.applies(job) or trainer_script(
            job.entry_point, job.source_dir) is not TrainerScript.PARSED:
        return {}
    switches: dict[str, HyperparameterValue] = {TORCH_COMPILE: True,
                                                TORCH_COMPILE_MODE: str(job.compiler.mode)}
    return {name: value for name, value in switches.items() if name not in job.hyperparameters}


def ignores_switches(job: TrainingJob) -> bool:
    """Whether the script builds its ``TrainingArguments`` in code, out of the job's reach."""
    return compile_cache.applies(job) and trainer_script(
        job.entry_point, job.source_dir) is TrainerScript.IN_CODE
