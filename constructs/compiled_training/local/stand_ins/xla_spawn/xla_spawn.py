"""A stand-in for AWS's ``torch_xla.distributed.xla_spawn`` (Training Compiler DLCs only).

It does what AWS's launcher does, as the Training Compiler guide and the toolkit's
``PyTorchXLARunner`` describe it: put the script's folder on ``sys.path``, import the script
as a module by its file stem (so its ``__main__`` block never runs, and its top level runs
here and again in every child), set ``sys.argv`` to the script and its arguments, and call
``xmp.spawn(module._mp_fn, args=(), nprocs=...)``, which passes each child its global ordinal.

One difference, forced by the torch-xla installed here: PJRT (torch-xla 2.x) takes ``nprocs``
1 or None (every local device), so ``--num_gpus N`` becomes None with ``CPU_NUM_DEVICES=N``
CPU devices standing in for the GPUs; those replicas are threads of one process, and XLA:CPU
gives a collective 10 s for every replica to arrive, which a loaded 2-core machine misses
while the replicas compile. The tests therefore launch one replica (``--num_gpus 1``, which
torch-xla 1.13 also runs in the launcher's own process). Each launch is recorded in
``$XLA_SPAWN_RECORD`` (JSON lines) for the test to read.
"""

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import torch_xla.distributed.xla_multiprocessing as xmp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_gpus", type=int, required=True)
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()

    script = Path(args.training_script)
    sys.path.append(str(script.parent.resolve()))
    module = importlib.import_module(script.stem)
    sys.argv = [args.training_script, *args.training_script_args]
    record = os.environ.get("XLA_SPAWN_RECORD")
    if record:
        with open(record, "a") as out:
            out.write(json.dumps({"num_gpus": args.num_gpus, "argv": sys.argv,
                                  "module": module.__name__}) + "\n")
    os.environ["CPU_NUM_DEVICES"] = str(args.num_gpus)
    xmp.spawn(module._mp_fn, args=(), nprocs=1 if args.num_gpus == 1 else None)


if __name__ == "__main__":
    main()
