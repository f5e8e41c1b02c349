"""``compiled-training bench --ab``: a `CompilerBenchmark`'s arms and comparison, here.

The arms the pipeline runs (the baseline without a compiler, the compiler, the compiler at
twice the batch with the learning rate scaled) are trained by the runtime's own entry
point, one process each, on scikit-learn's bundled digits with a small MLP that learns
them, so each arm's validation accuracy is measured, not equal by construction. Each is
timed from start to exit as SageMaker times a job; then the pipeline's own comparison code
decides. On a CPU the verdict says nothing about a GPU; the mechanics are the pipeline's.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from compiled_training.compilers import compiler_module, compiler_names
from compiled_training.tools.bench import DEFAULT_AB_COMPILER
from compiled_training.values.compiler import Compiler
from compiled_training_runtime import compare, contract
from compiled_training_runtime.local import digits, job_env, job_folder, pack_output

# 8x8 images of digits, 10 classes; logging and checkpoints out of the way.
DIGITS_MLP: dict[str, Any] = {"model_family": "mlp", "num_features": 64, "num_labels": 10,
                              "hidden_size": 64, "batch_size": 8, "learning_rate": 1e-2,
                              "log_every": 1000, "checkpoint_every": 1000, "seed": 8}
BATCH_SIZE = int(DIGITS_MLP[contract.HP_BATCH_SIZE])


def check_compiler(compiler: str, field: str = "compiler") -> str:
    """``compiler`` when it can be put on trial here: a compiler (not none) of NVIDIA's GPUs,
    for which the runtime has a backend."""
    runnable = tuple(name for name in compiler_names()
                     if (m := compiler_module(name)).enabled and "nvidia" in m.accelerators)
    contract.check_compiler(compiler, field, runnable)
    if compiler not in contract.backend_names():
        raise ValueError(f"{field}: compiler {compiler!r} has no runtime backend to train with; "
                         f"install the package that adds one "
                         f"({contract.BACKENDS_ENTRY_POINT_GROUP})")
    return compiler


def arms(compiler: str, epochs: int = 1) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    """Each arm's hyperparameters and environment, as the pipeline sets them."""
    chosen = Compiler.named(check_compiler(compiler))
    switch, environment = chosen.hyperparameters(), chosen.environment()
    baseline = {**DIGITS_MLP, "epochs": epochs}
    return {
        contract.ARM_BASELINE: (baseline, {}),
        contract.ARM_COMPILER: ({**baseline, **switch}, environment),
        contract.ARM_COMPILER_LARGE_BATCH: ({**baseline, **switch,
                                             contract.HP_BATCH_SIZE: 2 * BATCH_SIZE,
                                             contract.HP_BASE_BATCH_SIZE: BATCH_SIZE},
                                            environment),
    }


def run_ab(out: Path, *, compiler: str = DEFAULT_AB_COMPILER, epochs: int = 1,
           thresholds: compare.Thresholds | None = None,
           progress: Any = None) -> dict[str, Any]:
    """Trains every arm, compares them, writes ``comparison.json`` and ``.md`` to ``out``."""
    thresholds = thresholds or compare.Thresholds()
    train, validation = digits()
    timings = {}
    for name, (hyperparameters, environment) in arms(compiler, epochs).items():
        base = job_folder(out / "jobs" / name, hyperparameters, train=train,
                          validation=validation)
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "compiled_training_runtime.entry"],
                                env={**job_env(base, hyperparameters), **environment},
                                capture_output=True,
                                text=True, check=False)
        timings[name] = time.monotonic() - started
        if result.returncode != 0:
            raise RuntimeError(f"arm {name} failed:\n{result.stderr[-3000:]}")
        pack_output(base, out / "input" / name)
        if progress is not None:
            progress.update(1)
    arguments = ["--input-dir", str(out / "input"), "--output-dir", str(out),
                 "--quality-metric", thresholds.quality_metric,
                 "--speedup-threshold", str(thresholds.speedup),
                 "--quality-tolerance", str(thresholds.quality_tolerance)]
    for name, seconds in timings.items():
        # On demand, billable time is training time.
        arguments += ["--arm", f"{name}={seconds:.3f}:{seconds:.3f}"]
    with contextlib.redirect_stdout(io.StringIO()):  # the caller shows comparison.md
        failed = compare.main(arguments) != 0
    if failed:
        raise RuntimeError("the comparison failed; its message is above")
    return dict(json.loads((out / contract.COMPARISON_JSON).read_text()))
