"""The training loop: static shapes, no per-step host sync, checkpoints that survive a spot
interruption.

A step is one optimizer step (``gradient_accumulation_steps`` micro-batches). Metrics leave
the device only in a step closure every ``log_every`` steps; checkpoints are written at step
boundaries, after ``mark_step``, with tensors moved to the CPU. SIGTERM (what a spot
interruption sends) checkpoints at the next boundary and stops; a restart resumes there, with
the same data order and random state.
"""

from __future__ import annotations

import contextlib
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import contract, data, models
from .backends import Backend, Stopwatch
from .env import InputError, SageMakerEnv, TrainingConfig

CHECKPOINT = "checkpoint.pt"
INTERRUPTED_EXIT = 143  # 128 + SIGTERM


class Interrupted(Exception):
    """SIGTERM arrived; the checkpoint is written."""


@dataclass
class Progress:
    step: int = 0
    samples: int = 0
    metrics: list[dict[str, float]] = field(default_factory=list)


def _autocast(config: TrainingConfig, backend: Backend) -> contextlib.AbstractContextManager[Any]:
    if config.precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if config.precision == "bf16" else torch.float16
    device_type = "cuda" if backend.device.type == "cuda" else "cpu"
    if backend.name == "xla":
        device_type = "xla"
    return torch.autocast(device_type=device_type, dtype=dtype)


def run(env: SageMakerEnv, config: TrainingConfig, backend: Backend) -> dict[str, Any]:
    """Trains, checkpointing as it goes; returns the run's summary."""
    torch.manual_seed(config.seed)
    train = data.load(env.channel(contract.CHANNEL_TRAIN), config)
    examples = len(train["labels"])
    micro = config.batch_size
    per_step = micro * config.gradient_accumulation_steps * backend.world_size
    steps_per_epoch = examples // per_step
    if steps_per_epoch == 0:
        raise InputError(f"the train channel has {examples} examples, fewer than one step "
                         f"({config.gradient_accumulation_steps} x batch_size {micro} x "
                         f"{backend.world_size} workers)")
    total = config.epochs * steps_per_epoch
    if config.max_steps:
        total = min(total, config.max_steps)

    model = backend.prepare(models.build(config))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.scaled_learning_rate)
    progress = Progress()
    env.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = env.checkpoint_dir / CHECKPOINT
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        backend.set_rng_state(state["rng"])
        progress = Progress(step=state["step"], samples=state["samples"])
        print(f"resumed from {checkpoint} at step {progress.step}", flush=True)

    stop = {"requested": False}
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    clock = Stopwatch()
    try:
        model.train()
        order_epoch, order = -1, torch.empty(0, dtype=torch.long)
        while progress.step < total:
            epoch, index = divmod(progress.step, steps_per_epoch)
            if epoch != order_epoch:  # once per epoch: a permutation costs O(examples)
                order_epoch, order = epoch, torch.randperm(
                    examples, generator=torch.Generator().manual_seed(config.seed + epoch))
            for part in range(config.gradient_accumulation_steps):
                # Every rank draws the same order and trains on its own slice of it.
                start = index * per_step + (part * backend.world_size + backend.rank) * micro
                inputs = _inputs(backend, data.batch(train, order[start:start + micro], config))
                with _autocast(config, backend):
                    loss, _ = model(**inputs)
                (loss / config.gradient_accumulation_steps).backward()
            backend.optimizer_step(optimizer)
            optimizer.zero_grad(set_to_none=True)
            backend.mark_step()
            progress.step += 1
            progress.samples += per_step
            if progress.step % config.log_every == 0 or progress.step == total:
                backend.after_step(_log, progress, progress.step, loss.detach(),
                                   progress.samples, clock, backend.is_master())
            if stop["requested"] or progress.step % config.checkpoint_every == 0:
                _save(backend, checkpoint, model, optimizer, progress)
                if stop["requested"]:
                    raise Interrupted(f"SIGTERM: checkpoint at step {progress.step}")
    finally:
        signal.signal(signal.SIGTERM, previous)

    # The final save waits for the last step's graph and runs the pending closures.
    _save(backend, checkpoint, model, optimizer, progress)
    summary: dict[str, Any] = {"backend": backend.name, "steps": progress.step,
                               "samples": progress.samples, "counters": backend.counters(),
                               "global_batch_size": per_step,
                               "learning_rate": config.scaled_learning_rate}
    if progress.metrics:
        summary.update(progress.metrics[-1])
    if contract.CHANNEL_VALIDATION in env.channels:
        summary.update(_validate(env, config, backend, model))
    if not backend.is_master():
        return summary
    env.model_dir.mkdir(parents=True, exist_ok=True)
    module = getattr(model, "module", model)  # unwrap DistributedDataParallel
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    torch.save(state, env.model_dir / "model.pt")
    (env.model_dir / "config.json").write_text(json.dumps(
        {k: v for k, v in config.__dict__.items() if k != "extra"}, sort_keys=True))
    return summary


def _inputs(backend: Backend, rows: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A batch on the device, its attention mask prebuilt as a 4D additive mask."""
    inputs = backend.to_device(rows)
    if "attention_mask" in inputs:
        inputs["attention_mask"] = data.additive_mask(inputs["attention_mask"], torch.float32)
    return inputs


def _log(progress: Progress, step: int, loss: torch.Tensor, samples: int,
         clock: Stopwatch, report: bool) -> None:
    # Runs in a step closure: the loss is materialized, reading it costs no extra execution.
    metrics = {"train_loss": float(loss.item()),
               "samples_per_second": samples / max(clock.seconds(), 1e-9)}
    progress.metrics.append(metrics)
    if report:  # one line per step for the job, from the first worker
        print(contract.format_metric_line(step, metrics), flush=True)


def _save(backend: Backend, path: Path, model: torch.nn.Module,
          optimizer: torch.optim.Optimizer, progress: Progress) -> None:
    backend.mark_step()
    if not backend.is_master():
        return
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "rng": backend.rng_state(), "step": progress.step, "samples": progress.samples}
    partial = path.with_suffix(".partial")
    backend.save(state, str(partial))
    partial.replace(path)  # a kill mid-write never leaves a torn checkpoint


def _validate(env: SageMakerEnv, config: TrainingConfig, backend: Backend,
              model: torch.nn.Module) -> dict[str, float]:
    rows = data.load(env.channel(contract.CHANNEL_VALIDATION), config)
    model.eval()
    losses, correct, seen = [], torch.zeros(()), 0
    with torch.no_grad():
        for start in range(0, len(rows["labels"]) - config.batch_size + 1, config.batch_size):
            indices = torch.arange(start, start + config.batch_size)
            inputs = _inputs(backend, data.batch(rows, indices, config))
            loss, logits = model(**inputs)
            losses.append(loss.detach())
            correct = correct.to(logits.device) + (logits.argmax(-1) == inputs["labels"]).sum()
            seen += config.batch_size
            backend.mark_step()
    if not losses:
        raise InputError(f"the validation channel has fewer examples than one batch "
                         f"({config.batch_size})")
    metrics = {"validation_loss": float(torch.stack(losses).mean().cpu()),
               "validation_accuracy": float(correct.cpu()) / seen}
    print(contract.format_metric_line(0, metrics), flush=True)
    return metrics
