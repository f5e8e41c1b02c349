"""A pytest plugin that keeps every template the suite synthesizes, to compare two checkouts.

A change meant to leave behaviour alone (a refactoring, a move) must leave every template the
tests synthesize byte for byte as it was. Run the suite with this plugin on both checkouts and
compare the two folders::

    pytest -p tests.template_capture --capture-templates DIR --hypothesis-seed=0
    python -m tests.template_capture BEFORE_DIR AFTER_DIR

Each template is written once under its content's hash (``<sha256>.json``, keys sorted);
``index.tsv`` lists which test synthesized which stack to which hash. The comparison is of the
sets of hashes: which test synthesized a template, and how often, can differ between runs (a
session fixture synthesizes once per worker, in whichever test asks first); its content cannot.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

_FOLDER: Path | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--capture-templates", metavar="DIR", default=None,
                     help="write every synthesized template to DIR (see tests/template_capture)")


def pytest_configure(config: pytest.Config) -> None:
    global _FOLDER
    folder = config.getoption("--capture-templates")
    if not folder:
        return
    _FOLDER = Path(folder)
    _FOLDER.mkdir(parents=True, exist_ok=True)
    from aws_cdk import App, Stage
    from aws_cdk.assertions import Template

    def capturing(synth: Any) -> Any:
        def capturing_synth(self: Any, *args: Any, **kwargs: Any) -> Any:
            assembly = synth(self, *args, **kwargs)
            for stack in assembly.stacks:
                _keep(stack.stack_name, stack.template)
            return assembly
        return capturing_synth

    from_stack = Template.from_stack

    def capturing_from_stack(stack: Any, *args: Any, **kwargs: Any) -> Any:
        template = from_stack(stack, *args, **kwargs)
        _keep(stack.stack_name, template.to_json())
        return template

    # App declares its own synth (jsii writes one per class that declares it in TypeScript).
    App.synth = capturing(App.synth)  # type: ignore[method-assign]
    Stage.synth = capturing(Stage.synth)  # type: ignore[method-assign]
    Template.from_stack = staticmethod(capturing_from_stack)  # type: ignore[method-assign]


def _keep(stack_name: str, template: Any) -> None:
    assert _FOLDER is not None
    text = json.dumps(template, sort_keys=True, indent=1)
    digest = hashlib.sha256(text.encode()).hexdigest()
    (_FOLDER / f"{digest}.json").write_text(text)
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
    with open(_FOLDER / f"index-{os.getpid()}.tsv", "a") as index:
        index.write(f"{test}\t{stack_name}\t{digest}\n")


def _hashes(folder: Path) -> Counter[str]:
    return Counter(line.split("\t")[2].strip() for index in folder.glob("index-*.tsv")
                   for line in index.read_text().splitlines())


def compare(before: Path, after: Path) -> int:
    """Prints the templates synthesized on one side only (with the tests that made them)."""
    old, new = _hashes(before), _hashes(after)
    gone, came = Counter(old.keys() - new.keys()), Counter(new.keys() - old.keys())
    for label, side, hashes in (("only before", before, gone), ("only after", after, came)):
        for digest in sorted(hashes):
            tests = sorted({line.split("\t")[0] for index in side.glob("index-*.tsv")
                            for line in index.read_text().splitlines()
                            if line.endswith(digest)})
            print(f"{label}: {digest[:12]} from {', '.join(tests)}")
    print(f"{sum(old.values())} templates before ({len(old)} distinct), "
          f"{sum(new.values())} after ({len(new)} distinct); "
          f"{len(gone)} only before, {len(came)} only after")
    return 1 if gone or came else 0


if __name__ == "__main__":
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
