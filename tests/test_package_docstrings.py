"""Each package's docstring names real modules: a name in backticks in its description is one
of the package's modules or what one of them defines, and a name in its ``May import:`` line
is a package of the library (or the runtime's `contract`). Moves leave docstrings behind; this
fails on the name left."""

from __future__ import annotations

import ast
import importlib
import re

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "constructs" / "compiled_training"
PACKAGES = sorted(init.parent.name for init in PACKAGE.glob("*/__init__.py"))
RUNTIME_MODULES = {"contract"}
"""The runtime's modules a layer may import."""
_NAMED = re.compile(r"(?<!`)`([a-z_][a-z0-9_]*)`(?!`)")


def unknown_names(package: str, docstring: str) -> list[str]:
    """The names ``docstring`` gives in backticks that ``package`` does not have."""
    folder = PACKAGE / package
    modules = {path.stem for path in folder.glob("*.py")} - {"__init__"}
    defined = {name for module in modules for name in dir(
        importlib.import_module(f"compiled_training.{package}.{module}"))}
    unknown = []
    for paragraph in docstring.split("\n\n"):
        layers = paragraph.startswith("May import:")
        for name in _NAMED.findall(paragraph):
            known = (name in set(PACKAGES) | RUNTIME_MODULES if layers
                     else name in modules or name in defined)
            if not known:
                unknown.append(f"{package}: `{name}`")
    return unknown


@pytest.mark.parametrize("package", PACKAGES)
def test_a_packages_docstring_names_only_what_exists(package):
    docstring = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
    assert docstring, f"{package} has no docstring"
    assert unknown_names(package, docstring) == []


def test_a_module_or_a_layer_that_is_gone_is_named():
    assert unknown_names("catalog", "Prices (`prices`) and the compilers' names (`compilers`).\n\n"
                                    "May import: the catalog; not `teams`.") == [
        "catalog: `compilers`", "catalog: `teams`"]
