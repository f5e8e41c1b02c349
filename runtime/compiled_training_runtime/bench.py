"""One compiler's side of ``compiled-training bench``: train a model (the bench gives a tiny
BERT) for N steps, report.

Run as its own process per compiler (importing torch_xla changes torch._dynamo defaults).
Step times need the step to have finished: on XLA that means waiting for the device after
each step, a host sync the training loop never makes; the bench makes it to time, and counts
the training loop's own syncs separately.

    python -m compiled_training_runtime.bench --compiler training-compiler --steps 20 > result.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable

import torch

from . import backends, contract, data, models
from .env import TrainingConfig


def run(compiler: str, steps: int, config: TrainingConfig) -> dict[str, object]:
    torch.manual_seed(config.seed)
    backend = backends.create(compiler)
    model = backend.prepare(models.build(config))
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
        print(f"step {step + 1}/{steps}", file=sys.stderr, flush=True)
    counters = backend.counters()
    syncs = counters.get("device_to_host_transfers", 0) - syncs_before
    return {
        contract.SUMMARY_COMPILER: backend.compiler,
        "steps": steps,
        "batch_size": config.batch_size,
        "step_seconds": step_seconds,
        "counters": counters,
        # The loop's own device-to-host transfers after the first step, per step.
        "host_syncs_per_step": syncs / max(steps - 1, 1),
        "peak_memory_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
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
    parser.add_argument("--compiler", choices=contract.COMPILERS, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--config", default="{}", help="TrainingConfig fields as JSON")
    args = parser.parse_args(argv)
    config = TrainingConfig(**json.loads(args.config))
    print(json.dumps(run(args.compiler, args.steps, config)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
