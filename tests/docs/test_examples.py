"""Every Python example in the README and the guides runs as written (the README's first
pipeline and each reference page's minimal example alone, the guides' additions inside the
full example of "In your own CDK app", with cdk-nag and the rule pack on); every shell block
says how it is covered or why it cannot run here."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.docs.blocks import ADDITION, SDK_V3, Block, base_example, blocks
from tests.helpers import ROOT, SAMPLE_ENTRY_POINT

# A SageMaker SDK v3 builder runs in v3's own environment (tests/local/test_sdk_v3.py).
PYTHON = [b for b in blocks("python") if b.mode != SDK_V3]
# An entry point's lines train with torch.compile: `make test` runs them, `make test-fast` not.
PYTHON_CASES = [pytest.param(b, marks=pytest.mark.slow) if b.mode == "runtime" else b
                for b in PYTHON]
# What a training script has around the guide's lines: its arguments and a loop that compiles.
RUNTIME_HARNESS = """\
import torch


def train():  # one tiny step of a compiled model
    model = torch.compile(torch.nn.Linear(4, 2))
    model(torch.randn(3, 4)).sum().backward()


"""
SHELL = [b for b in blocks() if b.lang in ("bash", "sh", "shell")]


def run_addition(block: Block, tmp_path, monkeypatch) -> dict:
    """``block`` inside the full example, before its ``app.synth()``; returns its names."""
    base = base_example().code
    return run_program(base.replace("app.synth()", block.code + "\napp.synth()"), tmp_path,
                       monkeypatch)


def run_program(program: str, tmp_path, monkeypatch) -> dict:
    (tmp_path / "training").mkdir(exist_ok=True)
    (tmp_path / "training" / "train.py").write_text(SAMPLE_ENTRY_POINT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    scope: dict = {"__name__": "__main__"}
    exec(compile(program, "example", "exec"), scope)  # raises on any cdk-nag finding
    return scope


@pytest.mark.parametrize("block", PYTHON_CASES, ids=lambda b: b.name)
def test_the_example_runs_as_written(block, tmp_path, monkeypatch):
    if block.mode == "app":
        scope = run_program(block.code, tmp_path, monkeypatch)
        if "app.synth()" in block.code:  # the second synth returns the first's assembly
            assert scope["app"].synth().stacks or "CompiledTrainingChecks" in block.code
    elif block.mode == "runtime":
        pytest.importorskip("torch")
        # In a process of its own, as an entry point runs: torch.compile's workers stay out of
        # this test process (a compile in a pytest worker has crashed a later import there).
        ran = subprocess.run([sys.executable, "-c", RUNTIME_HARNESS + block.code], cwd=tmp_path,
                             env={**os.environ, "COMPILED_TRAINING_COMPILE_CACHE_URL":
                                  (tmp_path / "cache").as_uri()},
                             capture_output=True, text=True, timeout=600, check=False)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "'state': 'cold'" in ran.stdout  # the first run saves the cache
        assert list((tmp_path / "cache").rglob("*.tar.gz"))
    else:
        assert block.mode == ADDITION, block.mode
        run_addition(block, tmp_path, monkeypatch)


def test_the_examples_are_found():
    modes = {b.mode for b in PYTHON}
    assert {"app", "runtime", ADDITION} <= modes
    assert len([b for b in PYTHON if b.path.name == "README.md"]) == 1
    assert len(PYTHON) >= 18
    assert [b.mode for b in blocks("python") if b.mode not in modes] == [SDK_V3]


@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.name)
def test_every_shell_block_says_how_it_is_covered(block):
    assert block.mode, f"{block.name}: mark it <!-- shell: run by ... --> or <!-- shell: " \
                       f"needs ... -->"
    covered = re.match(r"run by (.*)", block.mode)
    if covered:
        for named in re.findall(r"[\w./-]+\.(?:py|sh)(?:::\w+)?|\.ci/run", covered[1]):
            path, _, test = named.partition("::")
            assert (ROOT / path).exists(), f"{block.name}: {path} does not exist"
            if test:
                assert f"def {test}(" in (ROOT / path).read_text(), f"{block.name}: {named}"
    else:
        assert block.mode.startswith("needs "), block.mode

