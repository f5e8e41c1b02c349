"""Messages are short: what, the value, the fix; the why is in the guide they link. Every
literal part of a message the package raises, warns or reports as a finding (the text around
its placeholders) is read with `ast`, so a long one fails here whatever path reaches it."""

from __future__ import annotations

import ast
import statistics

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "constructs" / "compiled_training"
LONGEST = 200
MEDIAN_UNDER = 70
_WARNINGS = {"add_warning", "add_warning_v2", "add_error", "add_info", "warn"}


def _literal(node: ast.AST) -> str | None:
    """A message's literal text, each placeholder as ``{}``; None if it has none."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}"
                       for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None and right is None else (left or "{}") + (right or "{}")
    return None


def _message(node: ast.AST) -> ast.AST | None:
    """The message argument of a raise, a warning, or a finding (``Finding(id, message)``, a
    compiler's ``("Id", message)``)."""
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        return node.exc.args[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
            node.func.attr in _WARNINGS) and node.args:
        return node.args[-1]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
            node.func.id == "Finding") and len(node.args) > 1:
        return node.args[1]
    if isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(
            first := node.elts[0], ast.Constant) and isinstance(first.value, str) and (
            first.value[:1].isupper() and first.value.isidentifier()):
        return node.elts[1]
    return None


def messages(source: str, where: str) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        argument = _message(node)
        text = _literal(argument) if argument is not None else None
        if text:
            found.append((f"{where}:{node.lineno}", text))
    return found


@pytest.fixture(scope="module")
def every_message() -> list[tuple[str, str]]:
    return [found for path in sorted(PACKAGE.rglob("*.py"))
            for found in messages(path.read_text(), str(path.relative_to(PACKAGE)))]


def test_no_message_is_longer_than_two_hundred_characters(every_message):
    assert len(every_message) > 200  # the scan reads the package's messages
    long = [f"{where}: {len(text)}" for where, text in every_message if len(text) > LONGEST]
    assert long == []


def test_the_median_message_is_short(every_message):
    assert statistics.median(len(text) for _, text in every_message) < MEDIAN_UNDER


def test_each_kind_of_message_is_read_and_a_long_one_found():
    long = "x" * (LONGEST + 1)
    source = (f"raise ValueError(f'{{a}} {long}')\n"
              f"Annotations.of(s).add_warning_v2('id', '{long}')\n"
              f"errors.append(('TrainiumNetwork', '{long}'))\n"
              f"yield Finding('Image', '{long}' + str(x))\n")
    assert [len(text) > LONGEST for _, text in messages(source, "m.py")] == [True] * 4
