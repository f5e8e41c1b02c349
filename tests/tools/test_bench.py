"""`compiled-training bench` and `bench --ab`: counts, files, accuracies and decisions, never
times."""

from __future__ import annotations

import contextlib
import io
import json
import os
import textwrap

import pytest
import torch

from compiled_training.tools import bench as bench_module
from compiled_training.tools.bench import bench, run_compiler, table
from compiled_training.tools.cli import main
from compiled_training_runtime import compare, contract, models
from compiled_training_runtime.env import InputError, TrainingConfig, parse_hyperparameters
from compiled_training_runtime.local import digits

ARMS = (contract.ARM_BASELINE, contract.ARM_COMPILER, contract.ARM_COMPILER_LARGE_BATCH)


def test_bench_runs_each_compiler_in_its_own_process_and_counts(tmp_path):
    rows = {r["compiler"]: r for r in bench(4, ["none", "torch-compile", "training-compiler"],
                                            tmp_path)}
    # Training Compiler's mechanism, XLA: the step and the optimizer-state creation.
    assert rows["training-compiler"]["compiles"] == 2
    assert rows["training-compiler"]["host_syncs_per_step"] == 0
    assert rows["torch-compile"]["compiles"] == 1 and rows["torch-compile"]["graph_breaks"] == 0
    for row in rows.values():
        assert row["peak_memory_mib"] > 0
    assert rows["none"]["break_even_steps"] is None  # the baseline breaks even with nothing
    document = json.loads((tmp_path / "bench.json").read_text())
    assert [len(run["step_seconds"]) for run in document["runs"]] == [4, 4, 4]
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert table(list(rows.values())).count("\n") == 4


def test_the_warm_start_table_loads_every_graph_the_cold_run_compiled(tmp_path, monkeypatch):
    # One small model, one run each way: counted, not timed (RESULTS.md has the times).
    monkeypatch.setattr(bench_module, "WARM_START_MODELS", {"tiny BERT": bench_module.CONFIG})

    (row,) = bench_module.warm_start(tmp_path, steps=1, repeats=1)

    cold, warm = row["cold"], row["warm"]
    assert (cold["state"], warm["state"]) == ("cold", "warm")
    assert cold["graphs_compiled"] > 0 and warm["graphs_compiled"] == 0
    assert warm["graphs_loaded"] == cold["graphs_compiled"]
    assert row["warm_over_cold"] == row["warm_seconds_to_first_step"] / \
        row["cold_seconds_to_first_step"]
    assert json.loads((tmp_path / "warm-start.json").read_text())[0]["model"] == "tiny BERT"
    assert bench_module.warm_start_table([row]).count("\n") == 2


@pytest.mark.parametrize(("compiled", "break_even"), [
    ([3.0, 0.3, 0.25, 0.25], 8),        # 2 s more to compile, 0.25 s saved a step
    ([3.0, 0.6, 0.5, 0.5], None),       # no step saved: it never breaks even
    ([0.5, 0.25, 0.25, 0.25], 0),       # cheaper from the first step
])
def test_break_even_is_the_compile_time_over_the_steady_saving(compiled, break_even):
    # Step times given, not measured: the arithmetic alone (the warm-up steps are left out of
    # the steady median).
    runs = [{"compiler": compiler, "step_seconds": seconds, "batch_size": 8,
             "counters": {}, "host_syncs_per_step": 0.0, "peak_memory_mib": 100.0}
            for compiler, seconds in (("none", [1.0, 0.6, 0.5, 0.5]),
                                      ("training-compiler", compiled))]
    baseline, row = bench_module.summarize(runs)
    assert (baseline["break_even_steps"], row["break_even_steps"]) == (None, break_even)
    assert row["steady_samples_per_second"] == 8 / compiled[-1]
    shown = table([baseline, row]).splitlines()[-1].split("|")[7].strip()
    assert shown == ("never" if break_even is None else str(break_even))


@pytest.mark.parametrize("unknown", ["tpu", "xla", "eager", "torch.compile"])
def test_fails_on_an_unknown_compiler_listing_the_known_ones(capsys, unknown):
    assert main(["bench", "--compilers", f"none,{unknown}"]) == 2
    assert ("--compilers must come from none, torch-compile, training-compiler"
            in capsys.readouterr().err)


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
    for option in ("--compiler", "--steps", "--config"):
        parser.add_argument(option)
    args = parser.parse_args()
    steps = int(args.steps)
    for step in range(steps):
        print(f"step {step + 1}/{steps}", file=sys.stderr, flush=True)
    print("a warning the worker's libraries print", file=sys.stderr, flush=True)
    if args.compiler == "broken":
        print("RuntimeError: the compiler broke", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"compiler": args.compiler, "step_seconds": [0.0123456789] * steps}))
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
    result = run_compiler("none", steps, {}, progress)
    assert len(result["step_seconds"]) == steps
    assert progress.n == steps  # the warning is not a step


def test_fails_when_the_worker_fails_with_its_last_stderr_lines(fake_worker):
    with pytest.raises(RuntimeError, match=r"(?s)bench of broken failed:\n.*a warning the "
                                           r"worker's libraries print\nRuntimeError: the "
                                           r"compiler broke\n$"):
        run_compiler("broken", 100, {}, Counter())


# --- compiled-training bench --ab: a CompilerBenchmark's arms and comparison, on digits -------

@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    """One A/B with Training Compiler's arms (XLA on the CPU): its folder, exit code,
    comparison and printed output."""
    out = tmp_path_factory.mktemp("ab")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = main(["bench", "--ab", "--compiler", "training-compiler", "--out", str(out)])
    comparison = json.loads((out / contract.COMPARISON_JSON).read_text())
    return out, code, comparison, printed.getvalue()


def test_digits_are_split_deterministically_into_features_in_0_to_1():
    train, validation = digits()
    assert (len(train), len(validation)) == (1437, 360)
    assert digits() == (train, validation)
    for split in (train, validation):
        assert {r["label"] for r in split} == set(range(10))
        assert {len(r["features"]) for r in split} == {64}
        assert all(0 <= v <= 1 for r in split for v in r["features"])


def test_bench_ab_trains_the_arms_on_digits_and_decides_with_the_pipelines_comparison(ab):
    _, code, comparison, printed = ab
    arms = {arm["name"]: arm for arm in comparison["arms"]}
    assert [arms[n]["compiler"] for n in ARMS] == ["none", "training-compiler",
                                                    "training-compiler"]
    assert [arms[n]["global_batch_size"] for n in ARMS] == [8, 8, 16]
    rate = arms[contract.ARM_BASELINE]["learning_rate"]
    assert [arms[n]["learning_rate"] for n in ARMS] == [rate, rate, 2 * rate]  # scaled linearly
    # Every arm learns (chance is 0.1 on ten classes), and the large batch, half the steps at
    # twice the learning rate, ends elsewhere: the quality gate has something to measure.
    assert all(arms[n]["quality"] > 0.8 for n in ARMS)
    baseline = arms[contract.ARM_BASELINE]["quality"]
    assert arms[contract.ARM_COMPILER_LARGE_BATCH]["quality"] != baseline
    for name in ARMS:
        assert arms[name]["quality_drop"] == pytest.approx((baseline - arms[name]["quality"])
                                                           * 100)
    # The verdict follows from the measured numbers, whatever they are on this machine.
    ships = any(a["speedup"] >= 0.2 and a["quality_drop"] <= 0.1
                for n, a in arms.items() if n != contract.ARM_BASELINE)
    assert comparison["decision"]["verdict"] == ("ship" if ships else "hold")
    assert code == (0 if ships else 1)
    assert comparison["decision"]["reason"] in printed


@pytest.mark.parametrize(("tolerance_over_drop", "verdict"), [(-0.01, "hold"), (0.01, "ship")])
def test_bench_ab_quality_gate_decides_on_the_measured_accuracy(ab, tmp_path, capsys,
                                                                 tolerance_over_drop, verdict):
    out, _, comparison, _ = ab
    (large,) = [a for a in comparison["arms"] if a["name"] == contract.ARM_COMPILER_LARGE_BATCH]
    # At one epoch the large batch loses accuracy: half the steps, which the scaled learning
    # rate does not make up for here.
    assert large["quality_drop"] > 0.1
    # SageMaker's timings are the comparison's arguments: here the large batch takes half the
    # baseline's time, so speed passes and the measured accuracy alone decides.
    tolerance = large["quality_drop"] + tolerance_over_drop
    code = compare.main(["--input-dir", str(out / "input"), "--output-dir", str(tmp_path),
                         "--arm", "baseline=100:100", "--arm", "compiler-large-batch=50:50",
                         "--quality-tolerance", str(tolerance)])
    assert code == 0
    decision = json.loads((tmp_path / contract.COMPARISON_JSON).read_text())["decision"]
    assert decision["verdict"] == verdict
    expected = "ship: " if verdict == "ship" else "hold (quality lost): "
    # Per epoch: half the time, over the share of an epoch each arm's batches covered (a
    # global batch that does not divide the examples leaves a few unseen).
    arms = {a["name"]: a for a in comparison["arms"]}
    speedup = 2 * arms[contract.ARM_COMPILER_LARGE_BATCH]["epochs"] / arms[
        contract.ARM_BASELINE]["epochs"] - 1
    assert 0.9 < speedup <= 1.0
    assert decision["speedup"] == pytest.approx(speedup)
    assert decision["reason"].startswith(f"{expected}compiler-large-batch is {speedup:.1%} "
                                         f"faster")
    assert decision["reason"] in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--compiler", "xla"], "--compiler must be one of training-compiler, torch-compile, "
                            "got 'xla'"),
    (["--compiler", "none"], "--compiler must be one of training-compiler, torch-compile, "
                             "got 'none'"),
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
])
def test_fails_on_bad_ab_arguments(tmp_path, capsys, argv, message):
    assert main(["bench", "--ab", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_mlp_family_maps_features_to_logits_and_fails_without_num_features():
    config = parse_hyperparameters({"model_family": "mlp", "num_labels": 10, "hidden_size": 16,
                                    "num_features": "64"})  # the toolkit may pass a string
    loss, logits = models.build(config)(torch.zeros(4, 64), torch.zeros(4, dtype=torch.long))
    assert tuple(logits.shape) == (4, 10) and loss.ndim == 0
    with pytest.raises(InputError, match=r"^model_family 'mlp' needs the hyperparameter "
                                         r"'num_features', a positive int \(the length of each "
                                         r"example's features\), got None$"):
        models.build(TrainingConfig(model_family="mlp"))
