"""The training loop: static shapes, no per-step host sync, checkpoints that survive a spot
interruption.

A step is one optimizer step (``gradient_accumulation_steps`` micro-batches). Metrics leave
the device only in a step closure every ``log_every`` steps; checkpoints are written at step
boundaries, after ``mark_step``, with tensors moved to the CPU. SIGTERM (what a spot
interruption sends) checkpoints at the next boundary and stops; a restart resumes there, with
the same data order and random state.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from . import compat, contract, data, inference, models
from .backends import Backend, Stopwatch
from .env import InputError, SageMakerEnv, TrainingConfig

CHECKPOINT = "checkpoint.pt"
_PREBUILT_4D_MASK = functools.lru_cache(maxsize=1)(compat.prebuilt_4d_mask)
INTERRUPTED_EXIT = 143  # 128 + SIGTERM


class Interrupted(Exception):
    """SIGTERM arrived; the checkpoint is written."""


@dataclass
class Progress:
    step: int = 0
    samples: int = 0
    metrics: list[dict[str, float]] = field(default_factory=list)


# Replicas can be threads of one process (PJRT with several devices per process): the model
# is seeded and built under one lock so that every replica starts from the same weights.
_BUILD = threading.Lock()


# the loop kept whole, its host syncs in view
def run(env: SageMakerEnv, config: TrainingConfig, backend: Backend) -> dict[str, Any]:  # noqa: C901, PLR0915
    """Trains, checkpointing as it goes; returns the run's summary."""
    train = data.load(env.channel(contract.CHANNEL_TRAIN), config)
    examples = len(train["labels"])
    accumulation = config.gradient_accumulation_steps
    per_step = config.batch_size * accumulation * backend.world_size
    steps_per_epoch = examples // per_step
    if steps_per_epoch == 0:
        raise InputError(f"the train channel has {examples} examples, fewer than one step "
                         f"({accumulation} x batch_size {config.batch_size} x "
                         f"{backend.world_size} workers)")
    total = config.epochs * steps_per_epoch
    if config.max_steps:
        total = min(total, config.max_steps)

    with _BUILD:
        torch.manual_seed(config.seed)
        model = backend.prepare(models.build(config))
    precision = backend.mixed_precision(config.precision)
    scaler = precision.scaler
    optimizer = backend.optimizer(model.parameters(), config.scaled_learning_rate,
                                  scaled=scaler is not None)
    progress = Progress()
    env.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = env.checkpoint_dir / CHECKPOINT
    if checkpoint.exists():
        state = compat.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        backend.set_rng_state(state["rng"])
        progress = Progress(step=state["step"], samples=state["samples"])
        print(f"resumed from {checkpoint} at step {progress.step}", flush=True)

    stop = {"requested": False}
    # Python takes signal handlers in the main thread only; a replica that runs in a thread
    # relies on its periodic checkpoints.
    handles_sigterm = threading.current_thread() is threading.main_thread()
    if handles_sigterm:
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    batches = backend.loader(_micro_batches(train, config, backend, progress.step, total,
                                            steps_per_epoch), accumulation)
    clock = Stopwatch()
    try:
        model.train()
        while progress.step < total:
            for _ in range(accumulation):
                inputs = _inputs(next(batches))
                with precision.autocast():
                    loss, _ = model(**inputs)
                part = loss / accumulation
                (scaler.scale(part) if scaler is not None else part).backward()
            _optimizer_step(backend, optimizer, scaler, model, config.max_grad_norm)
            progress.step += 1
            progress.samples += per_step
            if progress.step % config.log_every == 0 or progress.step == total:
                backend.after_step(_log, progress, progress.step, loss.detach(),
                                   progress.samples, clock, backend.is_master())
            if stop["requested"] or progress.step % config.checkpoint_every == 0:
                _save(backend, checkpoint, model, optimizer, scaler, progress)
                if stop["requested"]:
                    raise Interrupted(f"SIGTERM: checkpoint at step {progress.step}")
    finally:
        if handles_sigterm:
            signal.signal(signal.SIGTERM, previous)

    # The final save waits for the last step's graph and runs the pending closures.
    _save(backend, checkpoint, model, optimizer, scaler, progress)
    summary: dict[str, Any] = {contract.SUMMARY_COMPILER: backend.compiler,
                               "steps": progress.step, "samples": progress.samples,
                               contract.SUMMARY_EPOCHS: progress.samples / examples,
                               "counters": backend.counters(),
                               contract.SUMMARY_GLOBAL_BATCH_SIZE: per_step,
                               contract.SUMMARY_LEARNING_RATE: config.scaled_learning_rate,
                               "precision": config.precision, "world_size": backend.world_size,
                               "rank": backend.rank}
    if scaler is not None:  # a scale that collapsed towards 0 means gradients kept overflowing
        summary["loss_scale"] = float(scaler.get_scale())
    if progress.metrics:
        summary.update(progress.metrics[-1])
    if contract.CHANNEL_VALIDATION in env.channels:
        summary.update(_validate(env, config, backend, model))
    if not backend.is_master():
        return summary
    # The archive the PyTorch inference DLC serves. Unwrap DistributedDataParallel only:
    # FeatureClassifier has a `module` of its own.
    ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
    inference.write_model(env.model_dir, config,
                          cast(torch.nn.Module, model.module) if ddp else model)
    return summary


def _micro_batches(train: dict[str, torch.Tensor], config: TrainingConfig, backend: Backend,
                   first_step: int, total: int,
                   steps_per_epoch: int) -> Iterator[dict[str, torch.Tensor]]:
    """This replica's micro-batches from ``first_step`` on, on the host.

    Every replica draws the same order, once per epoch (a permutation costs O(examples)),
    and trains on its own slice of each step; a resumed run continues the same order.
    """
    examples = len(train["labels"])
    micro, accumulation = config.batch_size, config.gradient_accumulation_steps
    per_step = micro * accumulation * backend.world_size
    order_epoch, order = -1, torch.empty(0, dtype=torch.long)
    for step in range(first_step, total):
        epoch, index = divmod(step, steps_per_epoch)
        if epoch != order_epoch:
            order_epoch, order = epoch, torch.randperm(
                examples, generator=torch.Generator().manual_seed(config.seed + epoch))
        for part in range(accumulation):
            start = index * per_step + (part * backend.world_size + backend.rank) * micro
            yield data.batch(train, order[start:start + micro], config)


def _optimizer_step(backend: Backend, optimizer: torch.optim.Optimizer, scaler: Any,
                    model: torch.nn.Module, max_grad_norm: float | None) -> None:
    """One optimizer step, then the step's graph is cut (XLA).

    With loss scaling or clipping, in the order AWS's Training Compiler guide gives for
    several replicas: gradients all-reduced, unscaled, clipped, ``scaler.step`` (skipped on
    the device when a gradient is not finite), ``scaler.update``.
    """
    if scaler is None and max_grad_norm is None:
        backend.optimizer_step(optimizer)
    else:
        backend.reduce_gradients(optimizer)
        if scaler is not None:
            scaler.unscale_(optimizer)
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    backend.mark_step()


def _inputs(rows: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A device batch for the model; the attention mask prebuilt as a 4D additive mask
    where the installed Transformers would otherwise sync with the host."""
    if "attention_mask" in rows and _PREBUILT_4D_MASK():
        rows = {**rows, "attention_mask": data.additive_mask(rows["attention_mask"],
                                                             torch.float32)}
    return rows


def _log(progress: Progress, step: int, loss: torch.Tensor, samples: int,
         clock: Stopwatch, report: bool) -> None:
    # Runs in a step closure: the loss is materialized, reading it costs no extra execution.
    metrics = {"train_loss": float(loss.item()),
               "samples_per_second": samples / max(clock.seconds(), 1e-9)}
    progress.metrics.append(metrics)
    if report:  # one line per step for the job, from the first worker
        print(contract.format_metric_line(step, metrics), flush=True)


def _save(backend: Backend, path: Path, model: torch.nn.Module,
          optimizer: torch.optim.Optimizer, scaler: Any, progress: Progress) -> None:
    backend.mark_step()
    if not backend.is_master():
        return
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scaler": scaler.state_dict() if scaler is not None else None,
             "rng": backend.rng_state(), "step": progress.step, "samples": progress.samples}
    partial = path.with_suffix(".partial")
    backend.save(state, str(partial))
    partial.replace(path)  # a kill mid-write never leaves a torn checkpoint


def _validate(env: SageMakerEnv, config: TrainingConfig, backend: Backend,
              model: torch.nn.Module) -> dict[str, float]:
    rows = data.load(env.channel(contract.CHANNEL_VALIDATION), config)
    model.eval()
    losses, correct, seen = [], torch.zeros(()), 0
    size = config.batch_size
    batches = backend.loader((data.batch(rows, torch.arange(start, start + size), config)
                              for start in range(0, len(rows["labels"]) - size + 1, size)), 1)
    with torch.no_grad():
        for batch in batches:
            inputs = _inputs(batch)
            loss, logits = model(**inputs)
            losses.append(loss.detach())
            correct = correct.to(logits.device) + (logits.argmax(-1) == inputs["labels"]).sum()
            seen += size
            backend.mark_step()
    if not losses:
        raise InputError(f"the validation channel has fewer examples than one batch "
                         f"({config.batch_size})")
    metrics = {"validation_loss": float(torch.stack(losses).mean().cpu()),
               "validation_accuracy": float(correct.cpu()) / seen}
    print(contract.format_metric_line(0, metrics), flush=True)
    return metrics
