"""Runs the runtime the way SageMaker does, in its own process, on a tiny model.

Every run is a subprocess: importing torch_xla changes torch._dynamo defaults for the
process, so XLA and torch.compile never share one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from compiled_training.definition.sourcedir import build_sourcedir
from compiled_training.local.images import PYTORCH_LAUNCHER
from compiled_training.local.training import free_port, stand_in_gpus
from compiled_training_runtime import contract
from compiled_training_runtime.local import job_env, job_folder
from tests.helpers import TINY_BERT

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime"
# AWS's xla_spawn stand-in ships with the local runner (compiled-training run), which launches
# Training Compiler jobs the same way.
XLA_SPAWN_SHIM = ROOT / "constructs" / "compiled_training" / "local" / "stand_ins" / "xla_spawn"
# Trainium's stand-ins (see its sitecustomize.py): the NeuronCore count, pre-compilation's
# launcher, gloo for the XLA collectives.
NEURON_SHIM = Path(__file__).resolve().parent / "neuron_shim"


def opt_ml(base: Path, hyperparameters: dict[str, Any], *, train: int = 32,
           validation: int = 0) -> Path:
    return job_folder(base, hyperparameters, train=train, validation=validation)


def direct_env(base: Path, hyperparameters: dict[str, Any], *,
               python: str = sys.executable,
               environment: dict[str, str] | None = None) -> dict[str, str]:
    """The toolkit's environment, with the job's ``environment`` (the library's switches) and
    this checkout's runtime on the path (another interpreter, an image's, runs the runtime
    installed in its own environment)."""
    env = {**job_env(base, hyperparameters), **(environment or {})}
    env.pop("PYTHONPATH", None)
    if python == sys.executable:
        env["PYTHONPATH"] = str(RUNTIME)
    return env


ABORT_GRACE_SECONDS = 5
"""How long a process aborted for its stacks gets to pass them to its parent's pipe."""


def run_bounded(command: list[str], env: dict[str, str], timeout: int
                ) -> subprocess.CompletedProcess[str]:
    """Runs ``command`` to its end; past ``timeout`` it fails with every Python stack of the
    process tree (faulthandler's dump on SIGABRT, deepest process first), so that a hang says
    where it hung."""
    with subprocess.Popen(command, env={**env, "PYTHONFAULTHANDLER": "1"}, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in [*reversed(_descendants(process.pid)), process.pid]:
                _abort(pid)
            try:
                out, err = process.communicate(timeout=ABORT_GRACE_SECONDS * 4)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                out, err = process.communicate()
            raise AssertionError(f"{' '.join(command)[:200]} ran past {timeout} s; the stacks "
                                 f"of its processes:\n{err[-20000:]}\n--- stdout ---\n"
                                 f"{out[-4000:]}") from None
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _descendants(root: int) -> list[int]:
    """``root``'s processes, breadth first (parents before their children), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended while being read
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    order, queue = [], [root]
    while queue:
        order += (found := [c for pid in queue for c in children.get(pid, [])])
        queue = found
    return order


def _abort(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGABRT)
    except ProcessLookupError:
        return
    time.sleep(ABORT_GRACE_SECONDS / 5)


def run_direct(base: Path, hyperparameters: dict[str, Any], *, timeout: int = 600,
               python: str = sys.executable, environment: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return run_bounded([python, str(RUNTIME / "train.py")],
                       direct_env(base, hyperparameters, python=python,
                                  environment=environment), timeout)


def run_until_step_then_sigterm(base: Path, hyperparameters: dict[str, Any], step: int,
                                timeout: int = 600, python: str = sys.executable) -> int:
    """Starts a run, sends SIGTERM once it logged ``step``, returns the exit code."""
    process = subprocess.Popen([python, str(RUNTIME / "train.py")],
                               env=direct_env(base, hyperparameters, python=python),
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


def fake_gpus(folder: Path, count: int) -> Path:
    """An ``nvidia-smi`` that lists ``count`` GPUs: the one thing the toolkit reads of the
    GPUs (``nvidia-smi --list-gpus``), which this machine does not have (the local runner's
    stand-in). Returns its folder."""
    return stand_in_gpus(folder, count)


def run_with_toolkit(base: Path, timeout: int = 900, *, gpus: int = 0,
                     launches: Path | None = None, python: str = sys.executable,
                     neuron: Path | None = None, environment: dict[str, str] | None = None,
                     ) -> subprocess.CompletedProcess[str]:
    """The real sagemaker-training toolkit and the PyTorch DLCs' launcher logic, on a local
    /opt/ml-shaped folder, with ``gpus`` stand-in GPUs and AWS's xla_spawn stand-in
    (``launches`` records each xla_spawn launch as a JSON line), or with Trainium's stand-ins
    (``neuron``: the file they record to) and the job's ``environment``."""
    env = dict(os.environ)
    path = [str(Path(python).parent), env.get("PATH", "")]  # torchrun, as in the DLC
    if gpus:
        path.insert(0, str(fake_gpus(base.parent / "fake-gpus", gpus)))
    if neuron is not None:
        path.insert(0, str(NEURON_SHIM / "bin"))
    env.update({"SAGEMAKER_BASE_DIR": str(base), "SM_STUDIO_LOCAL_MODE": "true",
                "PJRT_DEVICE": "CPU", "AWS_DEFAULT_REGION": "us-east-1",
                "SAGEMAKER_TRAINING_MODULE": PYTORCH_LAUNCHER, "PATH": os.pathsep.join(path),
                "PYTHONPATH": str(NEURON_SHIM if neuron is not None else XLA_SPAWN_SHIM)})
    env.update(environment or {})
    # torchrun's rendezvous port (PET_MASTER_PORT is its --master_port): free, so that two
    # toolkit launches in parallel test workers never meet on the default 29500.
    env["PET_MASTER_PORT"] = str(free_port())
    if launches is not None:
        env["XLA_SPAWN_RECORD"] = str(launches)
    if neuron is not None:
        env["NEURON_SHIM_RECORD"] = str(neuron)
    code = "from sagemaker_training import trainer; trainer.train()"
    return run_bounded([python, "-c", code], env, timeout)


def run_torchrun(base: Path, hyperparameters: dict[str, Any], workers: int,
                 timeout: int = 600, python: str = sys.executable,
                 ) -> subprocess.CompletedProcess[str]:
    """The torch.compile path's launcher, with ``workers`` processes on this machine."""
    command = [python, "-m", "torch.distributed.run", f"--nproc_per_node={workers}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}",
               str(RUNTIME / "train.py")]
    return run_bounded(command, direct_env(base, hyperparameters, python=python), timeout)


# torch.compile switched on as the constructs switch it: the library's variable.
TORCH_COMPILE = {contract.ENV_TORCH_COMPILE: "true"}

# The teams' models are large; the tests keep their hyperparameters and shrink the model.
TINY_TOOLKIT = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}


def toolkit_job(tmp_path: Path, step: dict[str, Any], **overrides: Any) -> Path:
    """The step's hyperparameters (strings, as SageMaker passes them), the tiny model, and
    the code the construct uploads, in an /opt/ml-shaped folder."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    code = tmp_path / "sourcedir.tar.gz"
    code.write_bytes(build_sourcedir(RUNTIME))
    hyperparameters = dict(step["HyperParameters"])
    hyperparameters.update({k: json.dumps(v) for k, v in {**TINY_TOOLKIT, **overrides}.items()})
    hyperparameters["sagemaker_submit_directory"] = json.dumps(str(code))
    return opt_ml(tmp_path / "opt_ml", hyperparameters, validation=8)


def run_summary(base: Path, logs: str = "") -> dict[str, Any]:
    """The run summary rank 0 wrote; when there is none, the run's logs say why."""
    path = base / "output" / "data" / "metrics.json"
    assert path.is_file(), logs[-6000:]
    return dict(json.loads(path.read_text()))
