"""The warm start's launcher, in front of a script that knows nothing of it: the script runs as
``python script ARGS`` would, its failures leave as they came, and the ranks of a host meet
without a process group. (Its runs through the toolkit and torchrun are in
``tests/local/test_own_script.py`` and ``tests/test_examples.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiled_training_runtime import contract
from compiled_training_runtime.launch import HostBarrier
from tests.runtime.harness import RUNTIME

LAUNCHER = RUNTIME / contract.LAUNCHER


def _launch(tmp_path: Path, script: str, *arguments: str, cache: bool = True
            ) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(script)
    env = {"PATH": "/usr/bin:/bin", contract.ENV_ENTRY_POINT: "train.py",
           "SAGEMAKER_BASE_DIR": str(tmp_path / "opt_ml"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    if cache:
        env[contract.ENV_COMPILE_CACHE_URL] = (tmp_path / "store").as_uri() + "/"
    return subprocess.run([sys.executable, str(LAUNCHER), *arguments], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_script_runs_as_main_with_the_jobs_arguments_and_the_cache_is_saved(tmp_path):
    script = ("import sys, helper\nprint(__name__, sys.argv[1:], helper.NAME)\n"
              "import compiled_training_runtime.launch as l\n")
    (tmp_path / "helper.py").write_text("NAME = 'helper beside the script'\n")
    result = _launch(tmp_path, script, "--epochs", "3")
    assert result.returncode == 0, result.stderr
    assert "__main__ ['--epochs', '3'] helper beside the script" in result.stdout
    assert "compile cache: saved" in result.stdout
    summary = tmp_path / "opt_ml" / "output" / "data" / contract.COMPILE_CACHE_SUMMARY_FILE
    assert '"state": "cold"' in summary.read_text()
    # It compiled nothing, and the launcher says so.
    assert "the script compiled no graph with Inductor" in result.stderr


def test_a_script_that_compiles_is_cold_then_warm_and_draws_no_warning(tmp_path):
    script = ("import torch\nmodel = torch.compile(torch.nn.Linear(4, 2))\n"
              "model(torch.randn(3, 4)).sum().backward()\n")
    first, second = (_launch(tmp_path, script) for _ in range(2))
    assert first.returncode == second.returncode == 0, second.stderr
    assert "compiled no graph" not in first.stderr + second.stderr
    summary = tmp_path / "opt_ml" / "output" / "data" / contract.COMPILE_CACHE_SUMMARY_FILE
    assert '"state": "warm"' in summary.read_text()


def test_the_launchers_own_modules_do_not_shadow_the_scripts_imports(tmp_path):
    """The runtime's folder holds ``data.py``, ``models.py``, ``local.py``: run as a file, the
    launcher puts the folder above it on the path, never its own, and the script's folder
    first."""
    script = ("import sys\nprint(sys.path[0])\n"
              "print([p for p in sys.path if p.endswith('compiled_training_runtime')])\n")
    result = _launch(tmp_path, script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert str(tmp_path) in lines and "[]" in lines


@pytest.mark.parametrize(("script", "code", "said"), [
    ("raise SystemExit(3)\n", 3, ""),
    ("raise ValueError('bad data')\n", 1, "ValueError: bad data"),
    ("import sys\nsys.exit('stopped')\n", 1, "stopped"),
])
def test_a_failing_script_fails_as_it_would_alone_and_nothing_is_saved(tmp_path, script, code,
                                                                       said):
    result = _launch(tmp_path, script)
    assert result.returncode == code and said in result.stderr
    assert "compile cache: saved" not in result.stdout
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("script", ["raise SystemExit(0)\n", "raise SystemExit\n"])
def test_a_script_that_exits_0_succeeds(tmp_path, script):
    result = _launch(tmp_path, script)
    assert result.returncode == 0 and "compile cache: saved" in result.stdout


def test_without_a_script_named_it_says_so(tmp_path):
    result = subprocess.run([sys.executable, str(LAUNCHER)], cwd=tmp_path, env={},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "COMPILED_TRAINING_ENTRY_POINT names no script" in result.stderr


BARRIER = """
import pathlib, sys, time
from compiled_training_runtime.launch import HostBarrier
rank, delay = int(sys.argv[1]), float(sys.argv[2])
barrier = HostBarrier({"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
                       "TORCHELASTIC_RUN_ID": "test"})
time.sleep(delay)
pathlib.Path(f"came-{rank}").touch()
met = barrier()
print(rank, met, pathlib.Path(f"came-{1 - rank}").exists(), flush=True)
"""


def test_the_ranks_of_a_host_wait_for_one_another(tmp_path):
    """Two processes of one parent, as torchrun's ranks are: the fast one waits for the slow."""
    runner = ("import subprocess, sys\n"
              f"procs = [subprocess.Popen([sys.executable, '-c', {BARRIER!r}, str(r), d],"
              " stdout=subprocess.PIPE, text=True) for r, d in ((0, '0'), (1, '1.5'))]\n"
              "print(''.join(p.communicate()[0] for p in procs))\n")
    result = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True,
                            timeout=60, check=True, cwd=tmp_path,
                            env={"PYTHONPATH": str(RUNTIME), "TMPDIR": str(tmp_path)})
    lines = [tuple(line.split()) for line in result.stdout.split("\n") if line.strip()]
    # Each left the meeting having met, and knowing the other had come (rank 0 waited).
    assert lines == [("0", "True", "True"), ("1", "True", "True")]


def test_a_rank_that_never_comes_is_waited_for_no_longer_than_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    barrier = HostBarrier({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}, wait_seconds=0.2)
    assert barrier() is False
    assert HostBarrier({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})() is True  # alone


def test_a_launcher_that_had_this_process_id_before_leaves_no_meeting_behind(tmp_path,
                                                                            monkeypatch):
    """A host runs many jobs: a folder an earlier launcher of the same process id left, its
    meetings held, must not let a rank through before the others come."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    from compiled_training_runtime.launch import _started

    barrier = HostBarrier({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}, wait_seconds=0.2)
    parent, started = os.getppid(), int(_started(os.getppid()))
    assert started > 0 and str(started) in barrier.folder.name
    # Both ranks met twice there: as the folder was named before (by the process id alone),
    # and by the same id with another start.
    for earlier in (f"{parent}-none-0", f"{parent}-{started - 1}-none-0"):
        folder = tmp_path / f"compiled-training-ranks-{earlier}"
        folder.mkdir()
        for meeting in ("1.0", "1.1", "2.0", "2.1"):
            (folder / meeting).touch()
    assert barrier() is False


def test_a_device_that_cannot_be_named_turns_the_cache_off_not_the_job(tmp_path, monkeypatch):
    """Keying the cache asks CUDA for the device; where that fails, the run goes on cold."""
    from compiled_training_runtime import warm_start

    def no_device(*_: object) -> str:
        raise RuntimeError("CUDA error: invalid device ordinal")

    monkeypatch.setattr(warm_start, "cache_key", no_device)
    cache = warm_start.CompileCache.from_environ(environ={
        contract.ENV_COMPILE_CACHE_URL: (tmp_path / "store").as_uri() + "/",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    cache.restore()
    assert cache.summary() == {"state": "off", "why": "could not name the device (RuntimeError: "
                                                      "CUDA error: invalid device ordinal)"}
