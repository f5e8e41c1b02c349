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

IDENTITY_FLAGS = {"training_compiler_images", "is_training_compiler", "inductor", "neuron_sdk",
                  "options_as_fields"}
"""Names that said which compiler a job has rather than what it does: none may be read."""
BUILT_IN_OPTIONS = {"debug", "mode", "model_type", "precompile", "precompile_steps"}
"""The built-in compilers' options, which only their own modules read."""
_COMPILER_OBJECT = re.compile(r"\b(compiler|choice|module|m)\b")
"""What an expression that stands for a compiler (or its choice) is called."""

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
        if (isinstance(node, ast.Attribute) and node.attr in IDENTITY_FLAGS
                and _COMPILER_OBJECT.search(ast.unparse(node.value))):
            found.append(f"{relative}:{line}: reads the identity flag {node.attr}")
        if (isinstance(node, ast.Attribute) and node.attr in BUILT_IN_OPTIONS
                and _COMPILER_OBJECT.search(ast.unparse(node.value))):
            found.append(f"{relative}:{line}: reads the option {ast.unparse(node)}")
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Compiler.named") and (
                line not in factory_lines):
            found += [f"{relative}:{line}: passes the option {k.arg} by name"
                      for k in node.keywords if k.arg in BUILT_IN_OPTIONS]
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and (
                node.left.value in BUILT_IN_OPTIONS) and "settings" in ast.unparse(node):
            found.append(f"{relative}:{line}: looks for the option {node.left.value!r}")
        if isinstance(node, ast.ImportFrom) and node.module:
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
    "module.training_compiler_images",
    "if arm.compiler.is_training_compiler: pass",
    "cached = not module.inductor",
    "runnable = not m.neuron_sdk",
    "steps = job.compiler.precompile_steps",
    "switches = {'torch_compile_mode': str(job.compiler.mode)}",
    "Compiler.named(name, precompile=True)",
    "options = {'mode': mode} if 'mode' in module.settings else {}",
])
def test_each_rule_catches_a_line_written_to_break_it(line):
    assert violations(line, "pipelines/example.py")


def test_the_rules_let_the_registry_and_the_factories_through():
    assert violations("from compiled_training.compilers import compiler_module\n"
                      "compiler.module.image(framework, instance_type)",
                      "pipelines/example.py") == []
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


def importers_of_another_compiler(source: str, own: str) -> list[str]:
    """The imports by which one compiler's module (``own``) reaches another's."""
    return [f"{own}: imports {node.module}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("compiled_training.compilers.")
            and node.module not in SHARED_MODULES]


def test_no_compiler_module_imports_another():
    found = [line for path in sorted(COMPILERS.glob("*.py")) if path.name != "__init__.py"
             for line in importers_of_another_compiler(path.read_text(), path.name)]
    assert found == []
    # The twin: Training Compiler reaching its successor's module, as it once did.
    assert importers_of_another_compiler(
        "from compiled_training.compilers.torch_compile import TorchCompile",
        "training_compiler.py")
