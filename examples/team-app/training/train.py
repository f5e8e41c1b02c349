"""A team's own entry point that keeps compiled-training's whole launch contract.

Plain PyTorch: copy it and replace the model and the data. It imports nothing of the
library's: under ``Compiler.torch_compile()`` the pipeline puts the runtime's launcher in front
of it, which carries torch.compile's cache from run to run. What each part is for
(docs/guides/runtime.md, the launch contract, lists the same):

- Launchers. SageMaker starts this file one of three ways: ``python train.py ARGS`` (no
  distribution), ``torchrun ... train.py ARGS`` (``torch_distributed``: one process per GPU,
  ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` set) or AWS's ``xla_spawn`` (``pytorchxla``), which
  imports it as a module and calls ``_mp_fn(index)`` in each process.
- Arguments. Every hyperparameter arrives as ``--name value``: read the ones you know and
  accept the rest (``parse_known_args``). The ``sagemaker_*`` switches come in
  ``SM_FRAMEWORK_PARAMS``.
- The compiler. ``Compiler.torch_compile()`` sets ``COMPILED_TRAINING_TORCH_COMPILE=true``
  (and ``_MODE``, ``_BACKEND``) in the environment: this script compiles its model with them.
  Training Compiler sends ``sagemaker_training_compiler_enabled``; its images compile through
  XLA, which this plain script does not use (the library's runtime does).
- Metrics. SageMaker reads metrics from the log with the regexes the pipeline declares:
  ``[metrics] name=value`` lines (``train_loss``, ``samples_per_second``, ``validation_loss``,
  ``validation_accuracy``), the last match being the final value that the registration gate
  compares. Printed from rank 0 only, every ``log_every`` steps, never a tensor (``.item()``
  once per logged step, not per step).
- Checkpoints. ``/opt/ml/checkpoints`` (the base folder's ``checkpoints`` when
  ``SAGEMAKER_BASE_DIR`` is set) is synced with S3 on spot jobs: save to it and resume from it,
  and on SIGTERM (a spot interruption) save before exiting.
- The model goes to ``SM_MODEL_DIR``; SageMaker packs it as ``model.tar.gz``.
- The compile cache. The launcher restores it before this script starts and saves it after
  the script succeeds (docs/guides/warm-starts.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

BASE = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
CHECKPOINT = BASE / "checkpoints" / "checkpoint.pt"


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--max_steps", type=int, default=0)  # a pre-compilation step sends it
    parser.add_argument("--log_every", type=int, default=10)
    parser.add_argument("--checkpoint_every", type=int, default=50)
    known, _unknown = parser.parse_known_args(argv)  # hyperparameters of other tools
    return known


def load(channel: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A channel's JSON lines, ``{"features": [...], "label": k}``, as tensors."""
    folder = Path(os.environ[f"SM_CHANNEL_{channel.upper()}"])
    rows = [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]
    return (torch.tensor([row["features"] for row in rows], dtype=torch.float32),
            torch.tensor([row["label"] for row in rows]))


def metrics(**values: float) -> None:
    print("[metrics] " + " ".join(f"{name}={value:.6g}" for name, value in values.items()),
          flush=True)


def main() -> None:
    args = arguments(sys.argv[1:])
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # torchrun: one process per GPU
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)

    features, labels = load("train")
    model = nn.Sequential(nn.Linear(features.shape[1], 128), nn.ReLU(),
                          nn.Linear(128, int(labels.max()) + 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    start_step = 0
    if CHECKPOINT.exists():  # a spot restart: resume where the last checkpoint left off
        state = torch.load(CHECKPOINT, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step = state["step"]
    step_model: nn.Module = model
    if os.environ.get("COMPILED_TRAINING_TORCH_COMPILE") == "true":  # Compiler.torch_compile()
        mode = os.environ.get("COMPILED_TRAINING_TORCH_COMPILE_MODE", "default")
        backend = os.environ.get("COMPILED_TRAINING_TORCH_COMPILE_BACKEND", "inductor")
        if rank == 0:
            print(f"compiling the step with torch.compile (mode={mode}, backend={backend})")
        # Before DDP wraps it: Dynamo does not trace DDP's own forward, so a compiled DDP
        # module breaks its graph there and compiles nothing.
        step_model = torch.compile(model, mode=mode, backend=backend)
    if distributed:
        step_model = nn.parallel.DistributedDataParallel(step_model)

    # A spot interruption sends SIGTERM to every process, not at the same step: the ranks agree
    # to stop at the next logging step (one small all-reduce every log_every steps, not every
    # step), so that none waits in a collective for a rank that already left.
    signalled = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: signalled.update(now=True))

    def everyone_stops() -> bool:
        flag = torch.tensor([1.0 if signalled["now"] else 0.0], device=device)
        if distributed:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def save(step: int) -> None:
        if rank == 0:
            CHECKPOINT.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step}, CHECKPOINT)

    # Each rank takes its own slice; full batches only, so every step has one shape.
    shard = torch.arange(rank, len(labels), world)
    per_epoch = len(shard) // args.batch_size
    total = args.max_steps or args.epochs * per_epoch
    step, began, stopping = start_step, time.perf_counter(), False
    while step < total and not stopping:
        order = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(step))]
        for first in range(0, per_epoch * args.batch_size, args.batch_size):
            batch = order[first:first + args.batch_size]
            x, y = features[batch].to(device), labels[batch].to(device)
            loss = nn.functional.cross_entropy(step_model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.log_every == 0:
                if rank == 0:
                    seconds = time.perf_counter() - began
                    metrics(step=step, train_loss=loss.item(),
                            samples_per_second=args.log_every * args.batch_size * world / seconds)
                    began = time.perf_counter()
                stopping = everyone_stops()
            if step % args.checkpoint_every == 0:
                save(step)
            if step >= total or stopping:
                break
    if stopping:
        save(step)
        sys.exit(143)  # interrupted: SageMaker restarts the job from the checkpoint

    if rank == 0:
        validation_x, validation_y = load("validation")
        model.eval()
        with torch.no_grad():
            logits = model(validation_x.to(device))
            loss = nn.functional.cross_entropy(logits, validation_y.to(device))
            accuracy = (logits.argmax(1).cpu() == validation_y).float().mean()
        metrics(step=step, validation_loss=loss.item(), validation_accuracy=accuracy.item())
        model_dir = Path(os.environ.get("SM_MODEL_DIR", BASE / "model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
    if distributed:
        dist.destroy_process_group()


def _mp_fn(index: int) -> None:  # AWS's xla_spawn (pytorchxla) calls this in each process
    main()


if __name__ == "__main__":
    main()
