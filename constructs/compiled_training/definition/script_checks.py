"""What the team's own script will do with the job it is given, read from its source at synth:
acknowledgeable warnings, each a (rule, message) pair."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.training_arguments import transformers_version
from compiled_training.definition import compile_cache
from compiled_training.definition.entry_point import (
    CHECKPOINT_NAMES,
    RUNTIME_PACKAGE,
    checkpoints_named,
    imports_runtime,
    refused_arguments,
)
from compiled_training.definition.trainer_script import ignores_switches, parser_refuses
from compiled_training.definition.training import hyperparameters
from compiled_training.values.job import TrainingJob
from compiled_training_runtime import contract

WARNING_IDS = ("CompileCacheUnused", "ReadsOldSwitches", "ParserRefuses",
               "TrainerIgnoresSwitches", "SpotWithoutCheckpoints")
"""The warnings these checks raise, which an app acknowledges by id."""


def script_warnings(job: TrainingJob) -> list[tuple[str, str]]:
    """Every warning about the entry point, in a stable order."""
    if not job.entry_point or is_token(job.entry_point) or not job.framework.runs_script:
        return []
    entry_point, found = job.entry_point, []
    refusal = compile_cache.launcher_refusal(job.source_dir) if job.source_dir else None
    if compile_cache.plan(job).uri and refusal and imports_runtime(
            entry_point, job.source_dir) is False:
        found.append(("CompileCacheUnused", f"{refusal}: no launcher carries the compile cache "
                      f"for entry_point {entry_point!r}, so every run compiles cold; train "
                      f"inside `with compile_cache(...)` (docs/guides/warm-starts.md)"))
    old = old_switches_read(entry_point, job.source_dir)
    if old and set(contract.SWITCHES.values()) & set(job.compiler.environment()):
        found.append(("ReadsOldSwitches", f"entry_point {entry_point!r} reads "
                      f"{', '.join(old)}, which arrive as environment variables now "
                      f"({', '.join(contract.SWITCHES[name] for name in old)}), so it trains "
                      f"eager; read os.environ (docs/guides/runtime.md)"))
    passed = [name for name in hyperparameters(job) if not name.startswith("sagemaker_")]
    refused = refused_arguments(entry_point, job.source_dir, passed)
    if refused:
        found.append(("ParserRefuses", f"entry_point {entry_point!r} calls parse_args(), which "
                      f"stops the job on {', '.join('--' + name for name in refused)}: define "
                      f"them with add_argument, or call parse_known_args()"))
    hf_refused = parser_refuses(entry_point, job.source_dir, passed)
    if hf_refused and hf_refused[0]:
        names, classes = hf_refused
        found.append(("ParserRefuses", f"entry_point {entry_point!r}: HfArgumentParser("
                      f"{', '.join(classes)}) of transformers {transformers_version()} stops the "
                      f"job on {', '.join('--' + name for name in names)}: add the field, or "
                      f"pass return_remaining_strings=True"))
    if ignores_switches(job):
        found.append(("TrainerIgnoresSwitches", f"entry_point {entry_point!r} builds "
                      f"TrainingArguments in code, out of the compiler switches' reach, so it "
                      f"trains eager; pass torch_compile=True (docs/guides/runtime.md)"))
    if job.spot and checkpoints_named(entry_point, job.source_dir) is False:
        found.append(("SpotWithoutCheckpoints", f"spot is on but no file of source_dir names "
                      f"{CHECKPOINT_NAMES[0]} or imports {RUNTIME_PACKAGE}: an interruption "
                      f"restarts the job from step 0; save and resume checkpoints there"))
    return found


def old_switches_read(entry_point: str, source_dir: Path | None) -> list[str]:
    """The library's old hyperparameters (0.2.0's) that the script names, as it would read
    them from its arguments."""
    script = source_dir / entry_point if source_dir is not None else None
    if script is None or not script.is_file():
        return []
    return _old_switches(script.read_bytes())


@functools.lru_cache(maxsize=64)
def _old_switches(source: bytes) -> list[str]:
    try:
        module = ast.parse(source)
    except SyntaxError:
        return []
    named = {node.value.lstrip("-") for node in ast.walk(module)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)} | {
        node.attr for node in ast.walk(module) if isinstance(node, ast.Attribute)}
    return [name for name in contract.SWITCHES if name in named]
