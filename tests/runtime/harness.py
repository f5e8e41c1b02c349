"""Runs the runtime the way SageMaker does, in its own process, on a tiny model.

Every run is a subprocess: importing torch_xla changes torch._dynamo defaults for the
process, so XLA and torch.compile never share one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime"
TINY_BERT = {
    "model_family": "bert", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
    "num_attention_heads": 2, "intermediate_size": 64, "max_seq_length": 16,
    "batch_size": 4, "learning_rate": 1e-3, "epochs": 1, "log_every": 1000,
    "checkpoint_every": 1000, "seed": 7,
}


def write_examples(folder: Path, count: int, *, seed: int = 0, max_length: int = 16) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for _ in range(count):
        length = rng.randint(4, max_length)
        lines.append(json.dumps({"input_ids": [rng.randint(1, 63) for _ in range(length)],
                                 "label": rng.randint(0, 1)}))
    (folder / "part-0.jsonl").write_text("\n".join(lines) + ("\n" if lines else ""))


def opt_ml(base: Path, hyperparameters: dict[str, Any], *, train: int = 32,
           validation: int = 0) -> Path:
    """A folder shaped like /opt/ml, with data and the job's configuration."""
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    channels = {}
    if train is not None:
        write_examples(base / "input" / "data" / "train", train)
        channels["train"] = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}
    if validation:
        write_examples(base / "input" / "data" / "validation", validation, seed=1)
        channels["validation"] = {"TrainingInputMode": "File"}
    # SageMaker writes every hyperparameter value as a string, JSON-encoded by the SDK.
    (config / "hyperparameters.json").write_text(json.dumps(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in hyperparameters.items()}))
    (config / "inputdataconfig.json").write_text(json.dumps(channels))
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}))
    return base


def direct_env(base: Path, hyperparameters: dict[str, Any],
               channels: tuple[str, ...] = ("train",)) -> dict[str, str]:
    """The environment the toolkit gives the entry point, for runs without the toolkit."""
    env = dict(os.environ)
    env.update({
        "SAGEMAKER_BASE_DIR": str(base),
        "SM_HPS": json.dumps(hyperparameters),
        "SM_CHANNELS": json.dumps(list(channels)),
        "SM_MODEL_DIR": str(base / "model"),
        "SM_OUTPUT_DIR": str(base / "output"),
        "SM_OUTPUT_DATA_DIR": str(base / "output" / "data"),
        "PJRT_DEVICE": "CPU",
        "PYTHONPATH": str(RUNTIME),
    })
    for name in channels:
        env[f"SM_CHANNEL_{name.upper()}"] = str(base / "input" / "data" / name)
    return env


def _channels(base: Path) -> tuple[str, ...]:
    data = base / "input" / "data"
    return tuple(sorted(p.name for p in data.iterdir())) if data.exists() else ()


def run_direct(base: Path, hyperparameters: dict[str, Any], *, timeout: int = 600,
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUNTIME / "train.py")],
                          env=direct_env(base, hyperparameters, _channels(base)),
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_until_step_then_sigterm(base: Path, hyperparameters: dict[str, Any], step: int,
                                timeout: int = 600) -> int:
    """Starts a run, sends SIGTERM once it logged ``step``, returns the exit code."""
    process = subprocess.Popen([sys.executable, str(RUNTIME / "train.py")],
                               env=direct_env(base, hyperparameters, _channels(base)),
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    for line in process.stdout:
        if f"[metrics] step={step} " in line:
            process.send_signal(signal.SIGTERM)
            break
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError(f"no step {step} within {timeout} s")
    process.stdout.read()
    return process.wait(timeout=timeout)


def metrics(base: Path) -> dict[str, Any]:
    return json.loads((base / "output" / "data" / "metrics.json").read_text())


def run_with_toolkit(base: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """The real sagemaker-training toolkit, on a local /opt/ml-shaped folder."""
    env = dict(os.environ)
    env.update({"SAGEMAKER_BASE_DIR": str(base), "SM_STUDIO_LOCAL_MODE": "true",
                "PJRT_DEVICE": "CPU", "AWS_DEFAULT_REGION": "us-east-1"})
    code = "from sagemaker_training import trainer; trainer.train()"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def run_torchrun(base: Path, hyperparameters: dict[str, Any], workers: int,
                 timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """The torch.compile path's launcher, with ``workers`` processes on this machine."""
    with socket.socket() as probe:  # a free loopback port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={workers}",
               "--master_addr=127.0.0.1", f"--master_port={port}", str(RUNTIME / "train.py")]
    return subprocess.run(command, env=direct_env(base, hyperparameters, _channels(base)),
                          capture_output=True, text=True, timeout=timeout, check=False)
