"""The user's entry point, checked at synth for what SageMaker's training toolkit demands at
launch; otherwise the job fails on the cluster, after the instances have started.

The toolkit runs the entry point from the unpacked ``sourcedir.tar.gz``. Its ``pytorchxla`` and
``torch_distributed`` runners take only a Python script (``.py``), and refuse a source folder
that is a Python package (a top-level ``setup.py``). The ``pytorchxla`` launcher, AWS's
``torch_xla.distributed.xla_spawn``, imports the script and calls its ``_mp_fn(index)`` in each
process. The script is read with ``ast``, never imported: that would run user code at synth.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

from compiled_training.definition.sourcedir import DEFAULT_EXCLUDES, source_files
from compiled_training.values.job import Distribution
from compiled_training_runtime import contract

LAUNCHERS = {
    Distribution.PYTORCHXLA: "the pytorchxla launcher (AWS's xla_spawn)",
    Distribution.TORCH_DISTRIBUTED: "the torch_distributed launcher (torchrun)",
}
MP_FN = "_mp_fn"


def entry_point_problems(
    entry_point: str, distribution: Distribution, source_dir: Path | None
) -> list[str]:
    """What the toolkit would refuse at launch, one message each; none when it would start.

    ``source_dir`` is the local folder the code archive is built from; when it is None (the
    code is already in S3), only the entry point's name is checked.
    """
    launcher = LAUNCHERS.get(distribution)
    problems = []
    if launcher and not entry_point.endswith(".py"):
        problems.append(f"entry_point must be a Python script (.py) for distribution "
                        f"{distribution.value!r}, got {entry_point!r}: {launcher} runs only "
                        "Python scripts")
    if source_dir is None:
        return problems
    where = f"entry_point {entry_point!r} in {str(source_dir)!r}"
    files = set(source_files(source_dir))
    if Path(entry_point) not in files:
        if (source_dir / entry_point).is_file():
            problems.append(f"{where} is left out of the uploaded sourcedir.tar.gz, which "
                            f"skips {', '.join(DEFAULT_EXCLUDES)}; move the script")
        else:
            problems.append(f"{where} does not exist; SageMaker runs the entry point from "
                            "source_dir, so it must be a file there (a path relative to it)")
        return problems
    if launcher and Path("setup.py") in files:
        problems.append(f"source_dir {str(source_dir)!r} holds a setup.py, which makes it a "
                        f"Python package; {launcher} refuses packages and runs only a script. "
                        "Move setup.py out of source_dir")
    if distribution is Distribution.PYTORCHXLA and entry_point.endswith(".py"):
        problem = _mp_fn_problem((source_dir / entry_point).read_bytes())
        if problem:
            problems.append(f"{where} {problem}; {launcher} imports the script "
                            f"and calls {MP_FN}(index) in each process. Add: "
                            f"def {MP_FN}(index): main()")
    return problems


RUNTIME_PACKAGE = "compiled_training_runtime"


def imports_runtime(entry_point: str, source_dir: Path | None) -> bool | None:
    """Whether the entry point imports the library's runtime (whose warm start restores and
    saves the compile cache), or None where the script cannot be read here."""
    script = source_dir / entry_point if source_dir is not None else None
    if script is None or not script.is_file():
        return None
    return _imports(script.read_bytes(), RUNTIME_PACKAGE)


# Where a script finds the checkpoint folder: SageMaker's LocalPath, or the runtime's variable.
CHECKPOINT_NAMES = (contract.CHECKPOINT_LOCAL_PATH, "COMPILED_TRAINING_CHECKPOINT_DIR")


def checkpoints_named(entry_point: str, source_dir: Path | None) -> bool | None:
    """Whether the code names the checkpoint folder (any Python file of ``source_dir``, a
    module the entry point imports included) or imports the runtime, which checkpoints; None
    where the script cannot be read here."""
    runtime = imports_runtime(entry_point, source_dir)
    if runtime is None or source_dir is None:
        return None
    return runtime or any(name in path.read_text(errors="replace")
                          for path in source_dir.rglob("*.py") for name in CHECKPOINT_NAMES)


def runtime_to_ship(entry_point: str | None, source_dir: Path, launcher: bool = False
                    ) -> list[Path]:
    """The runtime package's folder where the entry point imports it, or the ``launcher`` is
    to run it, and ``source_dir`` does not hold it (it is pure Python: the code archive
    carries it beside the script), else nothing."""
    if not entry_point or (source_dir / RUNTIME_PACKAGE).is_dir() or not (
            launcher or imports_runtime(entry_point, source_dir)):
        return []
    import compiled_training_runtime

    return [Path(compiled_training_runtime.__file__).parent]


@functools.lru_cache(maxsize=64)
def _imports(source: bytes, package: str) -> bool | None:
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(module):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(name.split(".")[0] == package for name in names):
            return True
    return False


@functools.lru_cache(maxsize=64)  # pipelines sharing a script parse it once
def _mp_fn_problem(source: bytes) -> str | None:
    """Why the script's module would have no callable ``_mp_fn(index)``, or None."""
    try:
        module = ast.parse(source)
    except SyntaxError as error:
        return f"cannot be parsed ({error.msg}, line {error.lineno})"
    for statement in _top_level(module.body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if statement.name == MP_FN:
                return None if _takes_one_argument(statement.args) else (
                    f"defines {MP_FN} without the index parameter")
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                # A star import may bring _mp_fn in: nothing to tell from here.
                if (alias.asname or alias.name.split(".")[0]) in (MP_FN, "*"):
                    return None
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [
                statement.target]
            if any(isinstance(n, ast.Name) and n.id == MP_FN and isinstance(n.ctx, ast.Store)
                   for target in targets for n in ast.walk(target)):
                return None
    return f"defines no top-level {MP_FN}(index)"


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that bind module names when the script is imported: the body, and the blocks
    of its ``if``, ``try`` and ``with`` statements (not functions or classes), except an
    ``if __name__ == "__main__"`` block: imported by the launcher, the script is not main."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.Try, ast.With)):
            blocks = ["orelse"] if _is_main_guard(statement) else ["body", "orelse", "finalbody"]
            for block in blocks:
                yield from _top_level(getattr(statement, block, []))
        if isinstance(statement, ast.Try):
            for handler in statement.handlers:
                yield from _top_level(handler.body)


def _is_main_guard(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.If) or not isinstance(statement.test, ast.Compare):
        return False
    test = statement.test
    sides = {ast.unparse(test.left), *(ast.unparse(c) for c in test.comparators)}
    return isinstance(test.ops[0], ast.Eq) and sides == {"__name__", "'__main__'"}


def _takes_one_argument(args: ast.arguments) -> bool:
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    required_keywords = sum(default is None for default in args.kw_defaults)
    return required <= 1 and (positional >= 1 or args.vararg is not None) and not required_keywords


def refused_arguments(entry_point: str, source_dir: Path | None,
                      passed: Iterator[str] | list[str]) -> list[str] | None:
    """The hyperparameters the toolkit passes (``--name value``) that the entry point's parser
    would refuse: it calls ``parse_args`` (which refuses what it does not know, where
    ``parse_known_args()`` keeps it) and no ``add_argument`` defines them, nor a longer option
    they abbreviate. None where the script cannot be read, takes no such parser, or builds its
    options in a way ``ast`` cannot follow (a computed name)."""
    script = source_dir / entry_point if source_dir is not None else None
    if script is None or not script.is_file():
        return None
    return _refused(script.read_bytes(), tuple(passed))


@functools.lru_cache(maxsize=64)
def _refused(source: bytes, passed: tuple[str, ...]) -> list[str] | None:
    try:
        calls = list(_method_calls(ast.parse(source)))
    except SyntaxError:
        return None
    methods = {method for method, _ in calls}
    if "parse_args" not in methods or methods & {"parse_known_args",
                                                 "parse_args_into_dataclasses"}:
        return None
    options: list[str] = []
    for method, call in calls:
        if method != "add_argument":
            continue
        names = [a.value for a in call.args
                 if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(names) != len(call.args):
            return None  # an option named by a variable: not read here
        options += [name.lstrip("-") for name in names if name.startswith("--")]
    return [name for name in passed if not any(o == name or o.startswith(name) for o in options)]


def _method_calls(module: ast.Module) -> Iterator[tuple[str, ast.Call]]:
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node.func.attr, node
