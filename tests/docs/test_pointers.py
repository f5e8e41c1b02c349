"""What the library's messages point a user to exists: every guide a message names
(``docs/guides/warm-starts.md``) is a file of the repository, and no message sends a reader to a
README section that moved into the guides."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*(ROOT / "constructs" / "compiled_training").rglob("*.py"),
           *(ROOT / "runtime" / "compiled_training_runtime").rglob("*.py")]
GUIDE = re.compile(r"docs/[\w/-]+\.md")


def _texts() -> list[tuple[Path, str]]:
    """Every string literal of the library and the runtime, f-strings' literal parts included."""
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((path, node.value))
    return found


def test_every_guide_a_message_names_exists():
    named = {(path.relative_to(ROOT).as_posix(), guide) for path, text in _texts()
             for guide in GUIDE.findall(text)}
    assert {guide for _, guide in named} >= {"docs/guides/warm-starts.md",
                                             "docs/guides/runtime.md"}
    missing = sorted((where, guide) for where, guide in named if not (ROOT / guide).is_file())
    assert not missing


def test_no_message_points_to_a_readme_section():
    said = [(path.name, text) for path, text in _texts() if re.search(r"README's \w", text)]
    assert not said


def test_every_link_of_the_guides_resolves_in_the_repository():
    """Read on GitHub, a guide's links are files of the repository; the site build
    (docs/hooks.py) points the ones it serves at their own pages."""
    links = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")
    found, broken = 0, []
    for guide in sorted((ROOT / "docs" / "guides").glob("*.md")):
        for target in links.findall(guide.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            found += 1
            if not (guide.parent / target).exists():
                broken.append(f"{guide.name}: {target}")
    assert found > 20 and not broken
