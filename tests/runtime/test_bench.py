"""`compiled-training bench` on a tiny model: counts and files, never times."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from compiled_training import bench as bench_module
from compiled_training.bench import bench, run_backend, table
from compiled_training.cli import main


def test_bench_runs_each_backend_in_its_own_process_and_counts(tmp_path):
    rows = {r["backend"]: r for r in bench(4, ["eager", "torch.compile", "xla"], tmp_path)}
    assert rows["xla"]["compiles"] == 2          # the step and the optimizer-state creation
    assert rows["xla"]["host_syncs_per_step"] == 0
    assert rows["torch.compile"]["compiles"] == 1 and rows["torch.compile"]["graph_breaks"] == 0
    for row in rows.values():
        assert row["peak_memory_mib"] > 0
        assert row["break_even_steps"] is None or row["break_even_steps"] > 0
    document = json.loads((tmp_path / "bench.json").read_text())
    assert [len(run["step_seconds"]) for run in document["runs"]] == [4, 4, 4]
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert table(list(rows.values())).count("\n") == 4


def test_bench_rejects_an_unknown_backend(capsys):
    assert main(["bench", "--backends", "eager,tpu"]) == 2
    assert "--backends must come from eager, torch.compile, xla" in capsys.readouterr().err


# A stand-in for the worker, because the real one fills the pipe buffer (64 KiB) only after
# about 3,300 steps, minutes on this machine. It speaks the worker's protocol: a "step i/N"
# line on stderr per step, a warning, then the result as one JSON line on stdout, here 1 MiB.
# The alarm ends it if nobody reads its stdout, so a regression fails instead of hanging.
FAKE_WORKER = textwrap.dedent("""
    import argparse, json, os, signal, sys

    def give_up(*_):
        print("fake worker: nobody read its stdout for 20 s", file=sys.stderr, flush=True)
        os._exit(1)

    signal.signal(signal.SIGALRM, give_up)
    signal.alarm(20)
    parser = argparse.ArgumentParser()
    for option in ("--backend", "--steps", "--config"):
        parser.add_argument(option)
    args = parser.parse_args()
    steps = int(args.steps)
    for step in range(steps):
        print(f"step {step + 1}/{steps}", file=sys.stderr, flush=True)
    print("a warning the worker's libraries print", file=sys.stderr, flush=True)
    if args.backend == "broken":
        print("RuntimeError: the backend broke", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"backend": args.backend, "step_seconds": [0.0123456789] * steps}))
""")


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n


@pytest.fixture
def fake_worker(tmp_path, monkeypatch):
    (tmp_path / "fake_bench_worker.py").write_text(FAKE_WORKER)
    path = [str(tmp_path), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    monkeypatch.setattr(bench_module, "WORKER", "fake_bench_worker")


def test_bench_reads_a_result_larger_than_the_pipe_buffer_while_counting_steps(fake_worker):
    steps = 60_000  # about 1 MiB of step times, sixteen times the pipe buffer
    progress = Counter()
    result = run_backend("eager", steps, {}, progress)
    assert len(result["step_seconds"]) == steps
    assert progress.n == steps  # the warning is not a step


def test_fails_when_the_worker_fails_with_its_last_stderr_lines(fake_worker):
    with pytest.raises(RuntimeError, match=r"(?s)bench of broken failed:\n.*a warning the "
                                           r"worker's libraries print\nRuntimeError: the "
                                           r"backend broke\n$"):
        run_backend("broken", 100, {}, Counter())
