"""A compiler is one module of ``compiled_training/compilers/``: outside that package no module
names a `CompilerKind` member, compares a compiler's kind or name, reads a compiler's own
switches from the runtime's contract, or imports one compiler's module. The rest of the
library asks the compiler object (`Compiler.module`, `compilers.recognize`).

Read with `ast`, so a violation fails here whatever path it takes at run time; each rule has a
twin below that shows it catching a line written to break it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "constructs" / "compiled_training"
COMPILERS = PACKAGE / "compilers"
SHARED_MODULES = {"compiled_training.compilers", "compiled_training.compilers.base"}
"""What the rest may import of the package: the registry and the protocols."""

COMPILER_CONTRACT = {
    "COMPILER_TRAINING_COMPILER", "COMPILER_TORCH_COMPILE", "COMPILER_NEURON_XLA",
    "COMPILER_NONE", "HP_TRAINING_COMPILER_ENABLED", "HP_TRAINING_COMPILER_DEBUG",
    "ENV_TORCH_COMPILE", "ENV_TORCH_COMPILE_MODE", "ENV_TORCH_COMPILE_BACKEND",
    "TORCH_COMPILE_NEURON_BACKEND", "TORCH_COMPILE_MODES", "ENV_NEURON_XLA",
    "ENV_NEURON_CC_FLAGS", "NEURON_MODEL_TYPES",
}
"""The runtime's contract names that belong to one compiler."""

FACTORIES = {"training_compiler", "torch_compile", "neuron_xla", "none"}
"""`Compiler`'s public shortcuts, one per built-in compiler: they may name their kind."""
RUNTIME_BENCHMARKS = {"tools/bench.py"}
"""The benchmark of the runtime's own backends, which it starts by the runtime's names."""

_COMPILER_VALUE = re.compile(r"compiler\.(module\.)?(kind|name)\b|\bmodule\.name\b")
NAMES = {"training-compiler", "torch-compile", "neuron-xla"}
"""The built-in compilers' names, as literals ("none" is too common a word to look for)."""


def violations(source: str, relative: str) -> list[str]:
    """What breaks the rules in one module's source."""
    tree = ast.parse(source)
    found = []
    factory_lines = {n.lineno for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                     and f.name in FACTORIES and relative == "values/compiler.py"
                     for n in ast.walk(f) if hasattr(n, "lineno")}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "CompilerKind" and line not in factory_lines:
                found.append(f"{relative}:{line}: names CompilerKind.{node.attr}")
            if (node.value.id == "contract" and node.attr in COMPILER_CONTRACT
                    and not (relative in RUNTIME_BENCHMARKS and node.attr.startswith("COMPILER_"))):
                found.append(f"{relative}:{line}: reads contract.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("compiled_training.compilers.") and (
                    node.module not in SHARED_MODULES):
                found.append(f"{relative}:{line}: imports {node.module}")
            if node.module.endswith("contract"):
                found += [f"{relative}:{line}: imports contract's {a.name}"
                          for a in node.names if a.name in COMPILER_CONTRACT]
        elif isinstance(node, ast.Constant) and node.value in NAMES:
            found.append(f"{relative}:{line}: names the compiler {node.value!r}")
        elif isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                if _COMPILER_VALUE.search(ast.unparse(operand)):
                    found.append(f"{relative}:{line}: compares {ast.unparse(operand)}")
    return found


def _outside() -> dict[str, list[str]]:
    return {str(path.relative_to(PACKAGE)): violations(path.read_text(), str(
                path.relative_to(PACKAGE)))
            for path in sorted(PACKAGE.rglob("*.py")) if COMPILERS not in path.parents}


def test_no_module_outside_the_compilers_package_knows_one_compiler():
    found = [v for vs in _outside().values() for v in vs]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("line", [
    "CompilerKind.TORCH_COMPILE",
    "job.compiler.kind is CompilerKind",
    "compiler.kind == 'torch-compile'",
    "job.compiler.name != name",
    "arm.compiler.module.name == other",
    "arm.compiler.kind.value in names",
    "value_of(job.compiler.kind) == name",
    "module.name == 'toy-jit'",
    "benchmark.get('compiler', 'training-compiler')",
    "contract.ENV_TORCH_COMPILE",
    "from compiled_training_runtime.contract import HP_TRAINING_COMPILER_ENABLED",
    "from compiled_training.compilers.torch_compile import TorchCompile",
])
def test_each_rule_catches_a_line_written_to_break_it(line):
    assert violations(line, "pipelines/example.py")


def test_the_rules_let_the_registry_and_the_factories_through():
    assert violations("from compiled_training.compilers import compiler_module\n"
                      "compiler.module.inductor", "pipelines/example.py") == []
    factory = ("class Compiler:\n    def torch_compile():\n"
               "        return Compiler.named(CompilerKind.TORCH_COMPILE)\n")
    assert violations(factory, "values/compiler.py") == []
    assert violations(factory, "values/other.py")
    assert violations("contract.COMPILER_TORCH_COMPILE", "tools/bench.py") == []
    assert violations("contract.ENV_TORCH_COMPILE", "tools/bench.py")


def test_every_built_in_compiler_is_one_module_of_the_package():
    from compiled_training.compilers import BUILT_IN, CompilerKind

    modules = {type(module).__module__ for module in BUILT_IN}
    assert len(modules) == len(BUILT_IN) == len(CompilerKind)
    assert {module.name for module in BUILT_IN} == set(CompilerKind)
    files = {Path(*m.split(".")[1:]).with_suffix(".py").name for m in modules}
    assert files == {p.name for p in COMPILERS.glob("*.py")} - {"__init__.py", "base.py"}
