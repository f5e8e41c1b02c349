"""The code blocks of the README and the guides, with how the tests run each.

A block's mode is the HTML comment on the line before its fence:

- ``<!-- example: app -->``: a Python program of its own (it ends with ``app.synth()``, or
  needs no CDK app);
- ``<!-- example: runtime -->``: an entry point's lines, run with the names a training
  script has (``args``, ``train``) on CPU;
- ``<!-- example: sdk-v3 -->``: a pipeline built with the SageMaker SDK v3, run in v3's own
  environment by ``tests/local/test_sdk_v3.py``;
- no comment: a Python addition to the full example of "In your own CDK app", run before its
  ``app.synth()`` (it names that example's ``stack`` and ``bert``);
- ``<!-- shell: ... -->``: a shell block says how it is covered (``run by`` a test or
  script, named) or why it cannot run here (``needs ...``). Every shell block must say.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<code>.*?)^(?P=indent)```",
                    re.M | re.S)
_MARKER = re.compile(r"<!-- (?P<kind>example|shell): (?P<mode>.*?) -->\s*$")
ADDITION = "addition"
SDK_V3 = "sdk-v3"


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    mode: str
    """``app``, ``runtime``, ``addition`` (Python) or the shell marker's words."""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(lang: str | None = None) -> list[Block]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in _FENCE.finditer(text):
            line = text[:match.start()].count("\n") + 1
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _MARKER.search(before)
            block_lang = match["lang"]
            default = ADDITION if block_lang == "python" else ""
            found.append(Block(path, line, block_lang, textwrap.dedent(match["code"]),
                               marker["mode"] if marker else default))
    return [b for b in found if lang is None or b.lang == lang]


def block_with(marker: str) -> Block:
    """The one Python block that contains ``marker``."""
    (found,) = [b for b in blocks("python") if marker in b.code]
    return found


def base_example() -> Block:
    """The full example additions run in: "In your own CDK app"'s program."""
    (found,) = [b for b in blocks("python")
                if b.path.name == "your-own-app.md" and "app.synth()" in b.code]
    return found
