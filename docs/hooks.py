"""The site's build hooks (mkdocs.yml): pages made from the repository's own files, so that
each fact has one source, and the checks a strict build fails on.

- The changelog, the contributor's guide, the benchmarks' results and the example app's README
  are included as they are in the repository.
- The CLI page is the CLI's own ``--help`` texts, read from its parsers.
- Every public name (``compiled_training.__all__``) has a docstring of its own and a place in
  the API reference (a ``::: compiled_training.<Name>`` block in ``docs/reference/``).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the API check's reading of the checkout serves here too
from scripts.api_check import importable  # noqa: E402

INCLUDED = {
    "changelog.md": "CHANGELOG.md",
    "contributing.md": "CONTRIBUTING.md",
    "results/RESULTS.md": "benchmarks/RESULTS.md",
    "results/RESULTS-synth.md": "benchmarks/RESULTS-synth.md",
    "results/RESULTS-suite.md": "benchmarks/RESULTS-suite.md",
    "results/bench/bench.png": "benchmarks/bench/bench.png",
    "examples/team-app.md": "examples/team-app/README.md",
    "examples/trainer-app.md": "examples/trainer-app/README.md",
}
REFERENCE = ROOT / "docs" / "reference"
_DIRECTIVE = re.compile(r"^::: compiled_training\.(\w+)\s*$", re.M)


def on_config(config: Any) -> Any:
    problems = public_name_problems()
    if problems:
        raise PluginError("the API reference: " + "; ".join(problems))
    return config


_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A guide links a repository file by its path in the repository, which GitHub follows;
    the site serves the included ones at their own pages, so the link is pointed there."""
    source = Path(page.file.abs_src_path or "").parent
    site_page = Path(page.file.src_uri).parent

    def pointed(match: re.Match[str]) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        if "://" in target:
            return match.group(0)
        repository_path = (source / target).resolve()
        for uri, included in INCLUDED.items():
            if repository_path == (ROOT / included).resolve():
                relative = Path(*[".."] * len(site_page.parts), uri).as_posix()
                return f"]({relative}{anchor})"
        return match.group(0)

    return _LINK.sub(pointed, markdown)


def on_files(files: Files, config: Any) -> Files:
    for uri, source in INCLUDED.items():
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / source)))
    files.append(File.generated(config, "cli.md", content=cli_page()))
    return files


def public_name_problems() -> list[str]:
    """Public names without a docstring of their own, or without a place in the reference."""
    importable(ROOT)
    import compiled_training

    documented = {name for page in REFERENCE.glob("*.md")
                  for name in _DIRECTIVE.findall(page.read_text())}
    problems = []
    for name in compiled_training.__all__:
        if not written_docstring(getattr(compiled_training, name)):
            problems.append(f"{name} has no docstring of its own")
        if name not in documented:
            problems.append(f"{name} is in no docs/reference page (::: compiled_training.{name})")
    problems += [f"docs/reference names {name}, which is not public"
                 for name in sorted(documented - set(compiled_training.__all__))]
    return problems


def written_docstring(obj: Any) -> str | None:
    """The docstring written in the source for ``obj`` (a class or a function), not one
    Python made or inherited (``@dataclass`` writes the signature where there is none)."""
    source = textwrap.dedent(inspect.getsource(obj))
    (definition,) = [node for node in ast.parse(source).body
                     if isinstance(node, (ast.ClassDef, ast.FunctionDef))]
    return ast.get_docstring(definition)


def cli_page() -> str:
    """The CLI's reference: each command's ``--help``, from the parsers that print it."""
    importable(ROOT)
    from compiled_training.tools.cli import command_parsers, parser

    sections = ["# The command line", "",
                "`compiled-training` and each of its commands, as `--help` prints them (this "
                "page is made from the same parsers).", "", _help("compiled-training", parser())]
    sections += [_help(f"compiled-training {name}", sub)
                 for name, sub in command_parsers().items()]
    return "\n".join(sections)


def _help(title: str, parser: argparse.ArgumentParser) -> str:
    return f"## `{title}`\n\n```text\n{parser.format_help().rstrip()}\n```\n"
