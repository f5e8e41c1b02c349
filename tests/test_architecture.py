"""The package's structure, held by checks that fail: its layers (import-linter's contracts in
pyproject.toml, docs/architecture.md), no import cycle between modules or between packages, no
module over 450 lines, and a docstring that opens every package.

Every import counts: at module level, inside functions and under ``if TYPE_CHECKING:`` (grimp,
import-linter's graph, reads them all).
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import grimp
import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "constructs" / "compiled_training"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
LAYERS = "Each layer imports only from the layers below it"
PURE = "Below the constructs nothing imports the CDK"
HANDLERS = "The Lambda handlers run alone in Lambda"
NO_SDK = "Synthesis needs no AWS SDK for Python and no SageMaker SDK"
LOCAL_APART = "The local runner (boto3, moto, the toolkit) is imported by nothing"
LOCAL_JSON = "The local runner reads the assembly as JSON"
RULE_PACK = "cdk-nag's side of the rule pack above its rules"
MAX_LINES = 450


@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("compiled_training")


def _lint_imports(cwd: Path, package_parent: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package_parent),
                                                        str(ROOT / "runtime")])}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """The groups of nodes that reach each other (Tarjan's algorithm), one node apart."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def test_the_contracts_hold():
    result = _lint_imports(ROOT, ROOT / "constructs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 7 kept, 0 broken." in result.stdout


# Each breaks one contract the way a contributor could: inside a function, for type checkers
# only, or plainly.
@pytest.mark.parametrize(("module", "added", "contract", "importer"), [
    ("catalog/instances.py",
     "\n\ndef _upward():\n    from compiled_training.pipelines import base\n",
     LAYERS, "compiled_training.catalog.instances -> compiled_training.pipelines.base"),
    ("values/framework.py",
     "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
     "    from compiled_training.definition import validation\n",
     LAYERS, "compiled_training.values.framework -> compiled_training.definition.validation"),
    ("definition/training.py", "\n\ndef _cdk():\n    import aws_cdk\n",
     PURE, "compiled_training.definition.training -> aws_cdk"),
    ("handlers/decision.py",
     "\n\ndef _contract():\n    from compiled_training_runtime import contract\n",
     HANDLERS, "compiled_training.handlers.decision -> compiled_training_runtime"),
    # The way boto3 once reached synthesis: a construct reading a constant from a handler.
    ("image/runtime_image.py", "\nfrom compiled_training.handlers.decision import handler\n",
     NO_SDK, "compiled_training.handlers.decision -> boto3"),
    # The CLI reaches the local runner by name only; an import would bring boto3 and moto in.
    ("tools/cli.py", "\n\ndef _runner():\n    from compiled_training.local import cli\n",
     LOCAL_APART, "compiled_training.tools.cli -> compiled_training.local.cli"),
    ("local/assembly.py", "\n\ndef _cdk():\n    import aws_cdk\n",
     LOCAL_JSON, "compiled_training.local.assembly -> aws_cdk"),
    # A rule reaching up into cdk-nag's side of the pack.
    ("nag/rules/fp32_only.py", "\n\ndef _pack():\n    from compiled_training.nag import rule_pack\n",
     RULE_PACK, "compiled_training.nag.rules.fp32_only -> compiled_training.nag.rule_pack"),
], ids=["function-level", "type-checking", "cdk-below-constructs", "handler-imports-runtime",
        "boto3-at-synth", "cli-imports-the-runner", "runner-imports-cdk", "rule-imports-pack"])
def test_fails_on_an_import_that_breaks_a_contract(tmp_path, module, added, contract, importer):
    copy = tmp_path / "constructs" / "compiled_training"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (copy / module).open("a") as source:
        source.write(added)

    result = _lint_imports(tmp_path, tmp_path / "constructs")

    assert result.returncode == 1, result.stdout + result.stderr
    report = result.stdout.partition("Broken contracts")[2]
    assert contract in report and importer in report, result.stdout


def test_no_module_imports_one_that_imports_it_back():
    graph = _graph()
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _strongly_connected(edges) == []


def test_no_package_imports_one_that_imports_it_back():
    graph = _graph()

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        edges.setdefault(package(module), set()).update(
            package(m) for m in graph.find_modules_directly_imported_by(module)
            if package(m) != package(module))
    assert _strongly_connected(edges) == []


def test_the_cycle_check_finds_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        {"a", "b", "c"}]


def test_no_module_is_over_450_lines():
    lengths = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines())
               for p in PACKAGE.rglob("*.py")}
    assert {m: n for m, n in lengths.items() if n > MAX_LINES} == {}


def test_every_package_opens_with_a_docstring_saying_what_it_holds():
    packages = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))
    assert len(packages) >= 11
    missing = [str(p.relative_to(PACKAGE.parent)) for p in packages
               if not ast.get_docstring(ast.parse((p / "__init__.py").read_text()))]
    assert missing == []


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """The names a module imports under ``if TYPE_CHECKING:``, as ``module[:attribute]``."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    for alias in statement.names:
                        target = f"{statement.module}.{alias.name}"
                        is_module = importlib.util.find_spec(target) is not None \
                            if statement.module.startswith("aws_cdk") else False
                        names[alias.asname or alias.name] = (
                            target if is_module else f"{statement.module}:{alias.name}")
    return names


def test_deferred_imports_are_the_modules_own_type_checking_imports():
    """What the boundary check imports by name on a module's behalf is what that module imports
    for type checkers, which the contracts check: no import hides from import-linter."""
    declaring = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "DEFERRED_IMPORTS":
                declared = ast.literal_eval(node.value)
                checked = _type_checking_imports(tree)
                assert {n: checked.get(n) for n in declared} == declared, path
                declaring.append(path.name)
    assert sorted(declaring) == ["options.py", "training_image.py"]
