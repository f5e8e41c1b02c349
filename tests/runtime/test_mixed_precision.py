"""Mixed precision that trains: fp16 with loss scaling, as AWS's Training Compiler guide sets
it up on XLA (torch_xla.amp.GradScaler and a sync-free optimizer), and torch.amp's GradScaler
elsewhere. bf16 needs no scaler.

The XLA scaler runs on torch-xla 2.8 (tests/environments.py): 2.9 removed it; the Training
Compiler images have it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.environments import XLA_WITH_GRAD_SCALER, require
from tests.helpers import TINY_BERT
from tests.runtime.harness import RUNTIME, metrics, opt_ml, run_direct

PROBE = Path(__file__).with_name("scaler_probe.py")
XLA = {"sagemaker_training_compiler_enabled": True}


def _probe(compiler: str, python: str = sys.executable) -> dict[str, Any]:
    env = {"PJRT_DEVICE": "CPU", "PATH": "/usr/bin:/bin"}
    if python == sys.executable:
        env["PYTHONPATH"] = str(RUNTIME)
    result = subprocess.run([python, str(PROBE), compiler], env=env, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _assert_overflow_skipped_and_scale_dropped(outcome: dict[str, Any]) -> None:
    assert outcome["skipped_step_left_weights"] is True
    assert outcome["scale_after_overflow"] == outcome["scale"] / 2  # backoff factor 0.5
    assert outcome["normal_step_changed_weights"] is True


def test_xla_fp16_skips_a_step_whose_gradients_overflow_without_a_host_sync():
    outcome = _probe("training-compiler", str(require(XLA_WITH_GRAD_SCALER).executable))
    assert outcome["scaler"] == "torch_xla.amp.grad_scaler.GradScaler"
    assert outcome["optimizer"] == "torch_xla.amp.syncfree.adamw.AdamW"
    _assert_overflow_skipped_and_scale_dropped(outcome)
    # The skip is decided on the device: neither step reads anything back to the host.
    assert outcome["host_syncs"] == [0, 0]


def test_eager_fp16_skips_a_step_whose_gradients_overflow():
    outcome = _probe("none")
    assert outcome["scaler"] == "torch.amp.grad_scaler.GradScaler"
    _assert_overflow_skipped_and_scale_dropped(outcome)


def test_xla_fp16_training_keeps_a_fixed_graph_count_and_no_host_sync_per_step(tmp_path):
    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    runs = {}
    for steps in (4, 8):
        hps = {**TINY_BERT, **XLA, "precision": "fp16", "max_steps": steps}
        base = opt_ml(tmp_path / f"fp16-{steps}", hps)
        result = run_direct(base, hps, python=python)
        assert result.returncode == 0, result.stderr[-4000:]
        runs[steps] = metrics(base)
    assert runs[8]["precision"] == "fp16" and runs[8]["loss_scale"] > 0
    counters = {steps: summary["counters"] for steps, summary in runs.items()}
    # Two graphs, as without scaling (the step; the first step's optimizer-state creation).
    assert counters[4]["compiles"] == counters[8]["compiles"] == 2
    assert counters[8]["executions"] - counters[4]["executions"] == 4  # one graph per step
    assert counters[8]["device_to_host_transfers"] == counters[4]["device_to_host_transfers"]


def test_eager_fp16_trains_with_a_loss_scale(tmp_path):
    hps = {**TINY_BERT, "precision": "fp16", "max_steps": 4}
    base = opt_ml(tmp_path / "fp16", hps)
    result = run_direct(base, hps)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = metrics(base)
    assert summary["precision"] == "fp16" and summary["loss_scale"] > 0
    assert math.isfinite(summary["train_loss"])


def test_fails_clearly_on_fp16_under_xla_without_a_grad_scaler(tmp_path):
    # torch-xla 2.9 (this environment) has no torch_xla.amp.GradScaler.
    hps = {**TINY_BERT, **XLA, "precision": "fp16", "max_steps": 1}
    base = opt_ml(tmp_path / "bad", hps)
    result = run_direct(base, hps)
    assert result.returncode == 2
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("InputError: precision fp16 under Training Compiler needs "
                              "torch_xla.amp.GradScaler, which torch-xla 2.9")
    assert failure.endswith("use bf16 or fp32")
