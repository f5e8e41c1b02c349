"""Two loss-scaled optimizer steps through the runtime's own step function: one whose
gradients are not finite, then a normal one. Prints what happened as JSON.

Run as ``python scaler_probe.py COMPILER`` with an image's interpreter (each compiler in its own
process: importing torch_xla changes torch defaults for the process).
"""

import json
import sys

import torch

from compiled_training_runtime import backends, loop


def main(name: str) -> None:
    backend = backends.create(name)
    precision = backend.mixed_precision("fp16")
    scaler = precision.scaler
    torch.manual_seed(0)
    model = backend.prepare(torch.nn.Linear(4, 2))
    optimizer = backend.optimizer(model.parameters(), 0.1, scaled=True)
    features = torch.ones(8, 4).to(backend.device)

    def step(poison: bool) -> None:
        with precision.autocast():
            loss = model(features).float().pow(2).mean()
        if poison:  # an overflow: every gradient becomes inf or nan
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        loop._optimizer_step(backend, optimizer, scaler, model, None)

    def weights() -> list[list[float]]:
        return model.weight.detach().cpu().tolist()

    def transfers() -> int:
        return backend.counters().get("device_to_host_transfers", 0)

    start, scale = weights(), scaler.get_scale()
    before = transfers()
    step(poison=True)
    syncs_skipped_step = transfers() - before
    after_overflow, scale_after_overflow = weights(), scaler.get_scale()
    before = transfers()
    step(poison=False)
    syncs_normal_step = transfers() - before
    print(json.dumps({
        "optimizer": type(optimizer).__module__ + "." + type(optimizer).__name__,
        "scaler": type(scaler).__module__ + "." + type(scaler).__name__,
        "skipped_step_left_weights": after_overflow == start,
        "scale": scale, "scale_after_overflow": scale_after_overflow,
        "normal_step_changed_weights": weights() != after_overflow,
        "host_syncs": [syncs_skipped_step, syncs_normal_step],
    }))


if __name__ == "__main__":
    main(sys.argv[1])
