"""One compiler's side of ``compiled-training bench``: train a model (the bench gives a tiny
BERT) for N steps, report.

Run as its own process per compiler (importing torch_xla changes torch._dynamo defaults).
Step times need the step to have finished: on XLA that means waiting for the device after
each step, a host sync the training loop never makes; the bench makes it to time, and counts
the training loop's own syncs separately.

    python -m compiled_training_runtime.bench --compiler training-compiler --steps 20 > result.json

With ``--compile-cache URL``, a torch-compile run restores and saves its compile cache there
as a job does (`warm_start`): a second process on the same URL starts warm.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable

import torch

from . import backends, contract, data, models
from .env import TrainingConfig


def run(compiler: str, steps: int, config: TrainingConfig,
        compile_cache: str | None = None) -> dict[str, object]:
    """``compile_cache``: a cache URL (``file://`` or ``s3://``) the run restores before its
    first step and saves after its last, as a job's warm start does (torch-compile only)."""
    torch.manual_seed(config.seed)
    backend = backends.create(compiler, config)
    built = models.build(config)  # imports Transformers: before the clock, cold or warm
    began = time.perf_counter()
    cache = backend.compile_cache({**os.environ, contract.ENV_COMPILE_CACHE_URL: compile_cache}
                                  ) if compile_cache else None
    if cache is not None:
        cache.restore()
    model = backend.prepare(built)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    generator = torch.Generator().manual_seed(config.seed)
    shape = (config.batch_size, config.max_seq_length)
    batch = {
        "input_ids": torch.randint(1, config.vocab_size, shape, generator=generator),
        "attention_mask": torch.ones(shape, dtype=torch.long),
        "labels": torch.randint(0, config.num_labels, (config.batch_size,), generator=generator),
    }
    wait = _waiter(backend)
    step_seconds: list[float] = []
    first_step_done = 0.0
    syncs_before = 0
    model.train()
    for step in range(steps):
        start = time.perf_counter()
        inputs = backend.to_device(batch)
        inputs["attention_mask"] = data.additive_mask(inputs["attention_mask"], torch.float32)
        loss, _ = model(**inputs)
        loss.backward()
        backend.optimizer_step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        backend.mark_step()
        if step == 0:
            syncs_before = backend.counters().get("device_to_host_transfers", 0)
        wait()
        step_seconds.append(time.perf_counter() - start)
        if step == 0:
            first_step_done = time.perf_counter() - began
        print(f"step {step + 1}/{steps}", file=sys.stderr, flush=True)
    counters = backend.counters()
    syncs = counters.get("device_to_host_transfers", 0) - syncs_before
    if cache is not None:
        cache.save()
    return {
        contract.SUMMARY_COMPILER: backend.compiler,
        "steps": steps,
        "batch_size": config.batch_size,
        "step_seconds": step_seconds,
        "counters": counters,
        # The loop's own device-to-host transfers after the first step, per step.
        "host_syncs_per_step": syncs / max(steps - 1, 1),
        "peak_memory_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        # From before the cache's restore (the model built) to the end of the first step:
        # what a job's warm start shortens.
        "seconds_to_first_step": first_step_done,
        contract.SUMMARY_COMPILE_CACHE: cache.summary() if cache is not None else None,
    }


def _waiter(backend: backends.Backend) -> Callable[[], None]:
    if isinstance(backend, backends.XlaBackend):
        # Timing only: waits for the step's graph without moving data to the host.
        return backend.xm.wait_device_ops  # type: ignore[no-any-return]
    if backend.device.type == "cuda":
        return torch.cuda.synchronize
    return lambda: None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--compiler", choices=contract.backend_names(), required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--config", default="{}", help="TrainingConfig fields as JSON")
    parser.add_argument("--compile-cache", metavar="URL",
                        help="restore and save torch.compile's cache there (file:// or s3://)")
    args = parser.parse_args(argv)
    config = TrainingConfig(**json.loads(args.config))
    print(json.dumps(run(args.compiler, args.steps, config, args.compile_cache)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
