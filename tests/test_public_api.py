"""The public surface is held to its committed baseline (`scripts/api_check.py`, run by
`make lint`): a removed or incompatibly changed public name fails, naming it, unless the
changelog's [Unreleased] section records it under Breaking. Tried on a scratch copy of the
checkout, as a contributor's change would be."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.api_check import check, recorded_as_breaking
from tests.helpers import ROOT


def test_the_checkout_matches_its_baseline():
    assert check(ROOT) == []


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    for folder in ("constructs", "runtime", "api", "scripts"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns(
            "__pycache__", "*.egg-info", "build"))
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path / "CHANGELOG.md")
    return tmp_path


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(root / "scripts" / "api_check.py"), "--root",
                           str(root)], capture_output=True, text=True, env=env, check=False)


def _breakages(root: Path) -> str:
    """What the check prints on failing, as `make lint` would fail."""
    failed = _check(root)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    return failed.stderr


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _record(root: Path, name: str) -> None:
    _edit(root / "CHANGELOG.md", "## [Unreleased]\n\n### Breaking\n",
          f"## [Unreleased]\n\n### Breaking\n\n- `{name}`: removed, because.\n")


def test_a_removed_prop_fails_naming_it_until_the_changelog_records_it(scratch):
    _edit(scratch / "constructs/compiled_training/pipelines/options.py",
          "    spot: bool | None\n", "")
    failed = _breakages(scratch)
    # The prop, and the props that inherit it: each is what an app writes.
    named = ("compiled_training.TrainingJobOptions.spot",
             "compiled_training.TrainingPipelineProps.spot",
             "compiled_training.CompilerBenchmarkProps.spot")
    for name in named:
        assert f"`{name}`: Public object was removed" in failed
    for name in named[:2]:
        _record(scratch, name)
    assert "CompilerBenchmarkProps.spot" in _breakages(scratch)  # one left unrecorded
    _record(scratch, named[2])
    assert _check(scratch).returncode == 0


def test_a_required_argument_added_to_a_factory_fails(scratch):
    _edit(scratch / "constructs/compiled_training/values/compiler.py",
          "    def torch_compile(", "    def torch_compile(level: int, ")
    assert "compiled_training.Compiler.torch_compile" in _breakages(scratch)


def test_a_removed_cli_option_fails_naming_it(scratch):
    _edit(scratch / "constructs/compiled_training/tools/cli.py",
          '    advise.add_argument("--json", action="store_true", help="print JSON for machines")\n',
          "")
    failed = _breakages(scratch)
    assert "`compiled-training advise --json`: option removed" in failed
    _record(scratch, "compiled-training advise --json")
    assert _check(scratch).returncode == 0


def test_an_added_optional_name_is_not_breaking(scratch):
    _edit(scratch / "constructs/compiled_training/pipelines/options.py",
          "    spot: bool | None\n", "    spot: bool | None\n    spot_note: str | None\n")
    assert _check(scratch).returncode == 0


def test_only_the_unreleased_breaking_entries_count():
    changelog = ("# Changelog\n\n## [Unreleased]\n\n### Breaking\n\n- `a.B.c` went.\n\n"
                 "### Added\n\n- `x.Y`\n\n## [0.2.0] - 2026-11-26\n\n### Breaking\n\n- `old.Z`\n")
    assert recorded_as_breaking(changelog) == {"a.B.c"}


def test_an_inherited_public_method_removed_from_a_base_breaks_the_constructs(scratch):
    _edit(scratch / "constructs/compiled_training/pipelines/named_pipeline.py",
          "    def grant_start_execution(", "    def _grant_start_execution(")
    failed = _breakages(scratch)
    assert "`compiled_training.TrainingPipeline.grant_start_execution`" in failed
    assert "`compiled_training.CompilerBenchmark.grant_start_execution`" in failed


def test_an_enum_members_value_or_removal_breaks(scratch):
    """The words cdk.json and the CLI spell: CompilerKind's are the contract's constants."""
    _edit(scratch / "runtime/compiled_training_runtime/contract.py",
          'COMPILER_TORCH_COMPILE = "torch-compile"', 'COMPILER_TORCH_COMPILE = "torchcompile"')
    _edit(scratch / "constructs/compiled_training/values/job.py",
          '    SMDISTRIBUTED_DATA_PARALLEL = "smdistributed"\n', "")
    failed = _breakages(scratch)
    assert ("`compiled_training.CompilerKind.TORCH_COMPILE`: enum value changed from "
            "'torch-compile' to 'torchcompile'") in failed
    assert "`compiled_training.Distribution.SMDISTRIBUTED_DATA_PARALLEL`" in failed


def test_a_removed_command_or_an_optional_argument_made_required_breaks(scratch):
    cli = scratch / "constructs/compiled_training/tools/cli.py"
    text = cli.read_text()
    start = text.index('    bench = commands.add_parser("bench"')
    end = text.index("    return parser\n", start)
    cli.write_text(text[:start] + text[end:])
    _edit(scratch / "constructs/compiled_training/local/cli.py",
          'run.add_argument("assembly", nargs="?", default="cdk.out", type=Path,',
          'run.add_argument("assembly", type=Path,')
    failed = _breakages(scratch)
    assert "`compiled-training bench`: command removed" in failed
    assert "`compiled-training run assembly`: now required" in failed


def test_a_prop_made_or_added_required_breaks_each_props_class_that_holds_it(scratch):
    """griffe reads ``Required[...]`` as a changed annotation, which it does not report."""
    _edit(scratch / "constructs/compiled_training/pipelines/options.py",
          "    spot: bool | None\n", "    spot: Required[bool | None]\n    team_name: Required[str]\n")
    failed = _breakages(scratch)
    names = [f"compiled_training.{props}.{key}" for key in ("spot", "team_name")
             for props in ("TrainingJobOptions", "TrainingPipelineProps", "CompilerBenchmarkProps")]
    for name in names:
        assert f"`{name}`: now required" in failed
        _record(scratch, name)
    assert _check(scratch).returncode == 0


def test_a_changed_return_type_breaks_a_factory_and_a_property(scratch):
    """griffe leaves return types out of its report: an app's code reads what they return."""
    _edit(scratch / "constructs/compiled_training/values/compiler.py",
          '    def torch_compile(*, mode: str = "default") -> Compiler:',
          '    def torch_compile(*, mode: str = "default") -> Compiler | None:')
    _edit(scratch / "constructs/compiled_training/pipelines/compiler_benchmark.py",
          "    def decision_parameter_arn(self) -> str:",
          "    def decision_parameter_arn(self) -> str | None:")
    failed = _breakages(scratch)
    assert ("`compiled_training.Compiler.torch_compile`: return type changed from Compiler to "
            "Compiler | None") in failed
    assert ("`compiled_training.CompilerBenchmark.decision_parameter_arn`: return type changed "
            "from str to str | None") in failed
