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

from compiled_training.catalog.training_arguments import TORCH_COMPILE, argument_fields
from compiled_training.definition import compile_cache
from compiled_training.values.job import HyperparameterValue, TrainingJob


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


def trainer_hyperparameters(job: TrainingJob, cache: compile_cache.CachePlan
                            ) -> dict[str, HyperparameterValue]:
    """The compiler's switches as ``TrainingArguments`` takes them, for a script that parses
    them from the command line; a value the job sets itself stays."""
    if not cache.inductor or trainer_script(
            job.entry_point, job.source_dir) is not TrainerScript.PARSED:
        return {}
    switches = job.compiler.module.trainer_arguments(job.compiler)
    return {name: value for name, value in switches.items() if name not in job.hyperparameters}


def ignores_switches(job: TrainingJob) -> bool:
    """Whether the script builds its ``TrainingArguments`` in code, out of the job's reach."""
    return compile_cache.plan(job).inductor and trainer_script(
        job.entry_point, job.source_dir) is TrainerScript.IN_CODE


# --- what HfArgumentParser accepts -----------------------------------------------------------

_NO_VALUE = ""
"""What a negated boolean's options (``--no_name``) set in the option table: no value."""

def parser_refuses(entry_point: str | None, source_dir: Path | None,
                   passed: list[str]) -> tuple[list[str], list[str]] | None:
    """The arguments (``--name value``) that the script's ``HfArgumentParser`` would refuse, with
    the classes it parses; None where it has no such parser, keeps what it does not know
    (``return_remaining_strings``, ``parse_known_args``) or parses a class not read here.

    The parser accepts a class's init fields as ``--name`` and ``--na-me``, ``--no_name`` for a
    boolean whose default is True, and a unique prefix of any (argparse's abbreviations); the
    rest stops the script ("Some specified arguments are not used by the HfArgumentParser")."""
    script = source_dir / entry_point if source_dir is not None and entry_point else None
    if script is None or not script.is_file():
        return None
    return _parser_refuses(script.read_bytes(), tuple(passed))


@functools.lru_cache(maxsize=64)
def _parser_refuses(source: bytes, passed: tuple[str, ...]
                    ) -> tuple[list[str], list[str]] | None:
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    calls = [node for node in ast.walk(module) if isinstance(node, ast.Call)]
    parsers = [call for call in calls if _name(call.func) == "HfArgumentParser"]
    parsing = [call for call in calls if _name(call.func) == "parse_args_into_dataclasses"]
    keeps = any(k.arg == "return_remaining_strings" and not (
        isinstance(k.value, ast.Constant) and k.value.value is False) or k.arg == "args"
                for call in parsing for k in call.keywords)  # or parses a list of its own
    if not parsers or not parsing or keeps or any(args for call in parsing
                                                  for args in call.args[:1]) or any(
            _name(call.func) == "parse_known_args" for call in calls):
        return None
    own = {node.name: node for node in module.body if isinstance(node, ast.ClassDef)}
    options: dict[str, str] = {}  # option -> the field it sets
    classes: list[str] = []
    for parser in parsers:
        for node in _class_nodes(parser):
            fields = _fields(node, own)
            if fields is None:
                return None
            classes.append(_name(node))
            for name, true_default in fields.items():
                for option in {name, name.replace("_", "-")}:
                    options[option] = name
                if true_default:
                    options[f"no_{name}"] = options[f"no-{name.replace('_', '-')}"] = _NO_VALUE
    for call in calls:
        if _name(call.func) == "add_argument":
            given = [a.value for a in call.args
                     if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(given) != len(call.args):
                return None  # an option named by a variable: not read here
            names = [name.lstrip("-") for name in given if name.startswith("--")]
            options.update({name: names[0] for name in names})
    return [name for name in passed if _refused(name, options)], classes


def _refused(name: str, options: dict[str, str]) -> bool:
    """argparse's reading of ``--name value``: the option itself, or the one option it is a
    prefix of (more than one: ambiguous). A negated boolean takes no value, so the value is
    left over and refused with it."""
    matches = [name] if name in options else [o for o in options if o.startswith(name)]
    return len(matches) != 1 or options[matches[0]] == _NO_VALUE


def _class_nodes(parser: ast.Call) -> list[ast.expr]:
    """The classes an ``HfArgumentParser(...)`` call is given, one or a tuple or list of them."""
    given = parser.args[0] if parser.args else next(
        (k.value for k in parser.keywords if k.arg == "dataclass_types"), None)
    if given is None:
        return []
    return list(given.elts) if isinstance(given, (ast.Tuple, ast.List)) else [given]


def _fields(node: ast.expr, own: dict[str, ast.ClassDef],
            seen: frozenset[str] = frozenset()) -> dict[str, bool] | None:
    """A class's init fields, each with whether its default is True: from the catalog for
    transformers' classes, from the script for its own dataclasses (and their bases)."""
    name = _name(node)
    catalogued = argument_fields(name) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if catalogued is not None:
        fields, true_booleans = catalogued
        return {field: field in true_booleans for field in fields}
    if name not in own or name in seen:
        return None
    found: dict[str, bool] = {}
    for base in own[name].bases:
        inherited = _fields(base, own, seen | {name})
        if inherited is None:
            return None
        found.update(inherited)
    for statement in own[name].body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                and "ClassVar" not in ast.unparse(statement.annotation) \
                and "init=False" not in ast.unparse(statement.value or ast.Constant(None)):
            found[statement.target.id] = _true_default(statement)
    return found


def _true_default(statement: ast.AnnAssign) -> bool:
    """Whether a field is a boolean defaulting to True (``= True``, ``field(default=True)``)."""
    value = statement.value
    if isinstance(value, ast.Call):
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    return isinstance(value, ast.Constant) and value.value is True and "bool" in ast.unparse(
        statement.annotation)
