"""The API reference: the site builds strictly (every public name documented and placed, no
broken link), the CLI page is the parsers' own help, and every warning the library can emit
is listed on a construct's page."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

from compiled_training.compilers import BUILT_IN
from compiled_training.definition import rules
from tests.helpers import ROOT

PACKAGE = ROOT / "constructs" / "compiled_training"
# Warnings by literal id (add_warning_v2), and the job rules' and the compilers' declared
# warnings (tests/definition/test_rules.py holds the declarations to what the rules raise),
# which the pipelines emit as compiled-training:<Construct>:<Rule>.
_LITERAL = re.compile(r'add_warning_v2\(\s*f?"compiled-training:[^":]+:(\w+)"', re.S)
_NAMED_ID = re.compile(r'"compiled-training:\{?\w*\}?:(\w+)"')


def _emitted() -> set[str]:
    found = set(rules.WARNING_IDS) | {w for m in BUILT_IN for w in m.warning_ids}
    for module in PACKAGE.rglob("*.py"):
        text = module.read_text()
        found |= set(_LITERAL.findall(text))
        if "add_warning_v2" in text:
            found |= set(_NAMED_ID.findall(text))
    return found


def test_every_warning_the_library_emits_is_on_a_reference_page():
    emitted = _emitted()
    assert {"NamedByPath", "ImmutableRole", "IdleGpus", "Spot", "UncheckedParameters",
            "CompileCacheCold", "NonEfa", "ParserRefuses"} <= emitted  # the reading finds them
    pages = "\n".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    missing = sorted(rule for rule in emitted if rule not in pages)
    assert not missing, f"warnings no docs/reference page lists: {missing}"


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                            "--site-dir", str(tmp_path / "site")], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "--live-prices" in cli and "--workdir" in cli  # advise's and run's own options
    reference = (tmp_path / "site" / "reference" / "props" / "index.html").read_text()
    assert "team_scope" in reference and "pipeline_role" in reference


def test_a_public_name_without_a_docstring_fails_the_build(monkeypatch):
    sys.path.insert(0, str(ROOT / "docs"))
    import hooks

    import compiled_training
    from compiled_training.values import job

    assert hooks.public_name_problems() == []

    @dataclasses.dataclass(frozen=True)
    class Undocumented:  # @dataclass writes its signature as __doc__: not a docstring
        name: str

    assert Undocumented.__doc__ and hooks.written_docstring(Undocumented) is None
    monkeypatch.setattr(job, "ParameterType", Undocumented)
    monkeypatch.setattr(compiled_training, "ParameterType", Undocumented)
    assert hooks.public_name_problems() == ["ParameterType has no docstring of its own"]
