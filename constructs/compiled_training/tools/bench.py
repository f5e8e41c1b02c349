"""``compiled-training bench``: the same tiny BERT under each compiler: ``none`` (eager
PyTorch), ``torch-compile`` and ``training-compiler`` (XLA, as Training Compiler runs it).

Each compiler runs in its own process (importing torch_xla changes torch._dynamo defaults for
the process). Reports first-step (compile) time, steady samples/s, break-even steps against
no compiler, compile counts, host syncs per step and peak memory; writes JSON and a PNG of
cumulative time against steps with the break-even marked.
"""

from __future__ import annotations

import collections
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from compiled_training import tables
from compiled_training.tools.extras import require_extra
from compiled_training_runtime import contract
from compiled_training_runtime.local import TINY_BERT

# The baseline first: the others are measured against it.
COMPILERS = (contract.COMPILER_NONE, contract.COMPILER_TORCH_COMPILE,
             contract.COMPILER_TRAINING_COMPILER)
CONFIG = {**TINY_BERT, "batch_size": 8}
# The warm-start table's second model: a BERT whose cold compile takes tens of seconds here.
LARGER_BERT = {**CONFIG, "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
               "intermediate_size": 1024, "vocab_size": 30522, "max_seq_length": 128}
WARM_START_MODELS = {"tiny BERT": CONFIG, "BERT, 4 layers, hidden 256": LARGER_BERT}
WARMUP_STEPS = 2
WARM_START_COMPILER = contract.COMPILER_TORCH_COMPILE
"""The runtime's compiler whose cache a job's warm start carries."""
DEFAULT_AB_COMPILER = contract.COMPILER_TRAINING_COMPILER
"""The compiler `bench --ab` puts on trial by default: it runs here, through torch-xla on CPU."""
# One compiler's run, in its own process.
WORKER = "compiled_training_runtime.bench"


def run_compiler(compiler: str, steps: int, config: dict[str, Any],
                 progress: Any = None, compile_cache: str | None = None) -> dict[str, Any]:
    """One compiler's run in a process of its own, with an Inductor cache folder of its own
    (Inductor's default folder outlives processes: a second run would start warm unasked);
    ``compile_cache``: the cache URL it restores and saves, as a job's warm start does."""
    with tempfile.TemporaryDirectory(prefix="bench-inductor-") as inductor:
        env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"),
                   TORCHINDUCTOR_CACHE_DIR=inductor)
        command = [sys.executable, "-m", WORKER, "--compiler", compiler,
                   "--steps", str(steps), "--config", json.dumps(config)]
        if compile_cache:
            command += ["--compile-cache", compile_cache]
        return _worker(compiler, command, env, progress)


def _worker(compiler: str, command: list[str], env: dict[str, str],
            progress: Any) -> dict[str, Any]:
    errors: collections.deque[str] = collections.deque(maxlen=20)
    # The result goes to a file, not a pipe: a long run's result outgrows the pipe buffer,
    # and a worker blocked writing it would never close stderr, which is read line by line
    # here for the progress bar.
    with tempfile.TemporaryFile("w+") as result:
        process = subprocess.Popen(command, env=env, stdout=result, stderr=subprocess.PIPE,
                                   text=True)
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith("step ") and progress is not None:
                progress.update(1)
            else:
                errors.append(line)
        if process.wait() != 0:
            raise RuntimeError(f"bench of {compiler} failed:\n{''.join(errors)}")
        result.seek(0)
        output = result.read()
    return dict(json.loads(output.strip().splitlines()[-1]))


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    baseline = _baseline(results)
    for result in results:
        times = result["step_seconds"]
        steady = statistics.median(times[WARMUP_STEPS:] or times)
        row = {
            contract.SUMMARY_COMPILER: result[contract.SUMMARY_COMPILER],
            "first_step_seconds": times[0],
            "steady_step_seconds": steady,
            "steady_samples_per_second": result["batch_size"] / steady,
            "compiles": result["counters"].get("compiles", result["counters"].get("graphs")),
            "graph_breaks": result["counters"].get("graph_breaks"),
            "host_syncs_per_step": result["host_syncs_per_step"],
            "peak_memory_mib": round(result["peak_memory_mib"], 1),
            "break_even_steps": None,
        }
        if baseline is not None and result is not baseline:
            baseline_steady = statistics.median(baseline["step_seconds"][WARMUP_STEPS:]
                                                or baseline["step_seconds"])
            extra = times[0] - baseline["step_seconds"][0]
            gain = baseline_steady - steady
            # A first step no slower than the baseline's has nothing to win back: 0 steps.
            row["break_even_steps"] = math.ceil(max(extra, 0.0) / gain) if gain > 0 else None
        rows.append(row)
    return rows


def _baseline(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run without a compiler, which the others are measured against."""
    return next((r for r in runs if r[contract.SUMMARY_COMPILER] == contract.COMPILER_NONE),
                None)


def table(rows: list[dict[str, Any]]) -> str:
    baseline = _baseline(rows) or rows[0]
    cells = []
    for r in rows:
        ratio = r["steady_samples_per_second"] / baseline["steady_samples_per_second"]
        break_even = ("-" if r is baseline else "never" if r["break_even_steps"] is None
                      else r["break_even_steps"])
        cells.append([r[contract.SUMMARY_COMPILER], f"{r['first_step_seconds']:.2f}",
                      f"{r['steady_samples_per_second']:.1f}", f"{ratio:.2f}x",
                      "-" if r["compiles"] is None else str(r["compiles"]),
                      f"{r['host_syncs_per_step']:.2f}", str(break_even),
                      f"{r['peak_memory_mib']:.0f}"])
    return tables.markdown(("compiler", "first step (s)", "steady samples/s", "ratio to none",
                            "compiles", "host syncs/step", "break-even steps",
                            "peak memory (MiB)"), cells)


def plot(results: list[dict[str, Any]], rows: list[dict[str, Any]], target: Path) -> None:
    require_extra("plot", "the bench plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5), dpi=110)
    # Measured steps solid; beyond them each compiler's steady step time, projected dashed,
    # far enough to show where the compiled lines cross the baseline's.
    horizon = max([len(r["step_seconds"]) for r in results]
                  + [int(row["break_even_steps"] * 1.2) for row in rows
                     if row["break_even_steps"]])
    for result, row in zip(results, rows, strict=True):
        measured = [sum(result["step_seconds"][: i + 1])
                    for i in range(len(result["step_seconds"]))]
        (line,) = axes.plot(range(1, len(measured) + 1), measured,
                            label=result[contract.SUMMARY_COMPILER])
        axes.plot([len(measured), horizon],
                  [measured[-1], measured[-1] + (horizon - len(measured))
                   * row["steady_step_seconds"]],
                  color=line.get_color(), linestyle=":", linewidth=1)
        if row["break_even_steps"]:
            axes.axvline(row["break_even_steps"], color=line.get_color(), linestyle="--",
                         linewidth=1)
            axes.annotate(f"break-even {row['break_even_steps']} steps",
                          (row["break_even_steps"], 0), rotation=90, fontsize=8,
                          color=line.get_color(), xytext=(3, 5), textcoords="offset points")
    axes.set_xlabel("training steps")
    axes.set_ylabel("cumulative wall-clock (s); dotted: projected from steady steps")
    axes.set_title("Compile once, then faster steps: cumulative time against steps")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(target, metadata={"Software": None})
    plt.close(figure)


def bench(steps: int, compilers: list[str], out: Path,
          config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    require_extra("bench", "bench")
    from tqdm import tqdm

    config = {**CONFIG, **(config or {})}
    out.mkdir(parents=True, exist_ok=True)
    with tqdm(total=steps * len(compilers), desc="bench", unit="step", file=sys.stderr) as bar:
        results = [run_compiler(c, steps, config, bar) for c in compilers]
    rows = summarize(results)
    (out / "bench.json").write_text(json.dumps({"config": config, "steps": steps,
                                                "summary": rows, "runs": results}, indent=2))
    plot(results, rows, out / "bench.png")
    return rows


def warm_start(out: Path, steps: int = 2, repeats: int = 2) -> list[dict[str, Any]]:
    """torch-compile cold, then warm from the cache the cold run saved (restored the way a
    job's warm start restores it), each in a fresh process: seconds to the first finished
    step (the least of ``repeats`` runs each way: this machine's noise only ever adds), and
    the compiler's own counts of graphs compiled and loaded."""
    require_extra("bench", "bench --warm-start")
    rows = []
    for name, config in WARM_START_MODELS.items():
        colds, warms = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory(prefix="bench-compile-cache-") as store:
                url = f"file://{store}/"
                colds.append(run_compiler(WARM_START_COMPILER, steps, config,
                                          compile_cache=url))
                warms.append(run_compiler(WARM_START_COMPILER, steps, config,
                                          compile_cache=url))
        cold = min(colds, key=lambda run: run["seconds_to_first_step"])
        warm = min(warms, key=lambda run: run["seconds_to_first_step"])
        rows.append({
            "model": name, "config": config, "repeats": repeats,
            "cold_seconds_to_first_step": cold["seconds_to_first_step"],
            "warm_seconds_to_first_step": warm["seconds_to_first_step"],
            "warm_over_cold": warm["seconds_to_first_step"] / cold["seconds_to_first_step"],
            "all_cold_seconds": [run["seconds_to_first_step"] for run in colds],
            "all_warm_seconds": [run["seconds_to_first_step"] for run in warms],
            "cold": cold[contract.SUMMARY_COMPILE_CACHE],
            "warm": warm[contract.SUMMARY_COMPILE_CACHE]})
    out.mkdir(parents=True, exist_ok=True)
    (out / "warm-start.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def warm_start_table(rows: list[dict[str, Any]]) -> str:
    cells = [[r["model"], f"{r['cold_seconds_to_first_step']:.1f}",
              f"{r['warm_seconds_to_first_step']:.1f}", f"{r['warm_over_cold']:.0%}",
              str(r["cold"]["graphs_compiled"]), str(r["warm"]["graphs_compiled"]),
              str(r["warm"]["graphs_loaded"]), f"{r['cold'].get('saved_bytes', 0) / 1024:.0f}"]
             for r in rows]
    return tables.markdown(("model", "cold: s to first step", "warm: s to first step",
                            "warm / cold", "graphs compiled cold", "graphs compiled warm",
                            "graphs loaded warm", "cache (KiB)"), cells)
