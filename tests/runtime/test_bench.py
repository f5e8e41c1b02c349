"""`compiled-training bench` on a tiny model: counts and files, never times."""

from __future__ import annotations

import json

from compiled_training.bench import bench, table
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
