"""The warm start in front of a script that knows nothing of this library.

The constructs make this file the job's entry point (``sagemaker_program``) and name the
team's script in ``COMPILED_TRAINING_ENTRY_POINT``. It restores the compile cache, runs the
script in this process with the job's arguments, as ``__main__``, and saves the cache once the
script succeeds. A script that fails ends the job as it would have alone, and nothing is saved.

Under torchrun it runs once per rank, before the script's ``init_process_group``: the ranks of
a host meet in a folder instead of a process group (`HostBarrier`), so one restore comes before
any rank compiles and rank 0 saves after every rank of its host is done.

Before the script, it imports torch and names the device (CUDA's, to key the cache), and it
sets ``TORCHINDUCTOR_CACHE_DIR``: a script that sets Inductor's folder itself is overruled.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

if not __package__:  # run as a file: the package's folder, not its modules, goes on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from compiled_training_runtime import contract  # noqa: E402 (the path above comes first)
from compiled_training_runtime.warm_start import PREFIX, CompileCache  # noqa: E402

WAIT_SECONDS = 30 * 60
"""How long a rank waits for the others of its host before going on without them."""
POLL_SECONDS = 0.05


class HostBarrier:
    """The ranks of one host (torchrun's ``LOCAL_RANK`` of ``LOCAL_WORLD_SIZE``) waiting for
    one another: each call is a meeting, held in a folder their launcher process names."""

    def __init__(self, environ: Mapping[str, str], wait_seconds: float = WAIT_SECONDS) -> None:
        self.local_rank = int(environ.get("LOCAL_RANK", "0"))
        self.ranks = int(environ.get("LOCAL_WORLD_SIZE", "1"))
        run = f"{environ.get('TORCHELASTIC_RUN_ID', 'none')}-" \
              f"{environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        parent = os.getppid()
        self.folder = Path(tempfile.gettempdir()) / (
            f"compiled-training-ranks-{parent}-{_started(parent)}-{run}")
        self.wait_seconds = wait_seconds
        self.meetings = 0

    def __call__(self) -> bool:
        """Waits until every rank of the host has come to this meeting; whether they did."""
        self.meetings += 1
        if self.ranks <= 1:
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{self.meetings}.{self.local_rank}").touch()
        deadline = time.monotonic() + self.wait_seconds
        while len(list(self.folder.glob(f"{self.meetings}.*"))) < self.ranks:
            if time.monotonic() > deadline:
                print(f"{PREFIX} warning: the host's other ranks did not come within "
                      f"{self.wait_seconds:.0f} s; going on without them", file=sys.stderr,
                      flush=True)
                return False
            time.sleep(POLL_SECONDS)
        return True


def _started(pid: int) -> str:
    """When a process started (clock ticks since boot, from /proc), so that a later launcher
    given the same process id never meets in an old one's folder; "0" without /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def run_script(script: Path, arguments: Sequence[str]) -> None:
    """Runs ``script`` as ``python script arguments...`` would, in this process; a non-zero
    ``sys.exit`` or an exception leaves as it came."""
    sys.argv = [str(script), *arguments]
    sys.path[0] = str(script.parent)
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as end:
        if end.code not in (None, 0):
            raise


def main(arguments: Sequence[str] | None = None,
         environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    name = env.get(contract.ENV_ENTRY_POINT)
    if not name:
        raise SystemExit(f"compiled-training: {contract.ENV_ENTRY_POINT} names no script; "
                         "the launcher runs the job's own entry point")
    script = Path(name) if Path(name).is_absolute() else Path.cwd() / name
    cache = CompileCache.from_environ(
        mode=env.get(contract.ENV_TORCH_COMPILE_MODE, "default"),
        backend=env.get(contract.ENV_TORCH_COMPILE_BACKEND, "inductor"),
        environ=env, meet=HostBarrier(env))
    cache.restore()
    run_script(script, sys.argv[1:] if arguments is None else arguments)
    cache.save()
    if cache.rank == 0:
        summary = cache.summary()
        if summary.get("state") != "off" and not (summary.get("graphs_compiled")
                                                  or summary.get("graphs_loaded")):
            print(f"{PREFIX} warning: the script compiled no graph with Inductor, so there is "
                  "nothing to carry; compile the model before DistributedDataParallel wraps "
                  "it (Dynamo does not trace DDP's forward)", file=sys.stderr, flush=True)
        write_summary(summary, env)


def write_summary(summary: Mapping[str, object], environ: Mapping[str, str]) -> None:
    """The cache's summary where SageMaker keeps the job's output data (``output.tar.gz``)."""
    base = Path(environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
    folder = Path(environ.get("SM_OUTPUT_DATA_DIR", base / "output" / "data"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / contract.COMPILE_CACHE_SUMMARY_FILE).write_text(
            json.dumps(summary, indent=2, sort_keys=True))
    except OSError as error:  # the training is done: a report never undoes that
        print(f"{PREFIX} warning: could not write its summary ({error})", file=sys.stderr)


if __name__ == "__main__":
    main()
