"""Stands in for what only a Trainium instance has, in the torchrun workers of a test; the
rest (torch, torch-xla on the CPU, the toolkit, torchrun, the runtime) runs as installed.

On Trainium, the Neuron PJRT plugin makes every torchrun process one replica of a
multi-process XLA world: ``xla://`` gives each its rank, and the gradients' all-reduce runs
inside the step's graph over the NeuronCores. torch-xla 2.9's CPU client is single-process:
under torchrun each rank's XLA world has size 1 (``xla://`` would give every rank rank 0 of
1). So, and only in processes torchrun starts:

- the ``xla`` process group with ``init_method="xla://"`` is gloo over torchrun's ``env://``
  rendezvous, and ``torch_xla.runtime``'s world size and ordinals read that group;
- ``xm.all_reduce`` (what ``xm.optimizer_step`` reduces gradients with) copies the tensors
  to the host, all-reduces them with gloo and copies them back; ``xm.rendezvous`` is a gloo
  barrier. Gloo stands in for the collectives; the XLA device (CPU) still computes.

Each stand-in call appends one JSON line to ``$NEURON_SHIM_RECORD``, so a test can tell
the runtime's own work from the stand-in's (its host copies are not the runtime's); so does
each ``torch.save`` (only recorded, then saved), so a test can count who wrote checkpoints.
"""

from __future__ import annotations

import json
import os

if "TORCHELASTIC_RUN_ID" in os.environ and os.environ.get("PJRT_DEVICE") == "CPU":
    import torch
    import torch.distributed as dist
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    def _record(**event: object) -> None:
        path = os.environ.get("NEURON_SHIM_RECORD")
        if path:
            with open(path, "a") as record:
                record.write(json.dumps({"rank": os.environ["RANK"], **event}) + "\n")

    _init_process_group = dist.init_process_group

    def init_process_group(backend=None, init_method=None, **kwargs):  # type: ignore[no-untyped-def]
        _record(call="init_process_group", backend=backend, init_method=init_method)
        if backend == "xla" and init_method == "xla://":
            return _init_process_group("gloo", init_method="env://", **kwargs)
        return _init_process_group(backend, init_method=init_method, **kwargs)

    def _world_size() -> int:
        return dist.get_world_size() if dist.is_initialized() else 1

    def _global_ordinal() -> int:
        return dist.get_rank() if dist.is_initialized() else 0

    def _local_ordinal() -> int:
        return int(os.environ.get("LOCAL_RANK", "0"))

    def all_reduce(reduce_type, inputs, scale=1.0, groups=None, pin_layout=True):  # type: ignore[no-untyped-def]
        assert reduce_type == xm.REDUCE_SUM, reduce_type
        tensors = inputs if isinstance(inputs, list) else [inputs]
        xm.mark_step()  # the step's graph runs before its gradients leave the device
        for tensor in tensors:
            host = tensor.detach().cpu()
            dist.all_reduce(host)
            tensor.copy_((host * scale).to(tensor.device))
        _record(call="all_reduce", tensors=len(tensors))
        return inputs

    def rendezvous(tag, payload=b"", replicas=None):  # type: ignore[no-untyped-def]
        _record(call="rendezvous", tag=tag)
        if dist.is_initialized():
            dist.barrier()
        return [payload]

    _save = torch.save

    def save(obj, f, *args, **kwargs):  # type: ignore[no-untyped-def]
        _record(call="save", path=os.path.basename(str(f)))
        return _save(obj, f, *args, **kwargs)

    torch.save = save
    dist.init_process_group = init_process_group
    xr.world_size = _world_size
    xr.global_ordinal = _global_ordinal
    xr.local_ordinal = _local_ordinal
    xm.all_reduce = all_reduce
    xm.rendezvous = rendezvous
