"""Warm starts: the compile cache a ``torch.compile`` job carries from one run to the next.

Inductor keeps what it compiled in ``TORCHINDUCTOR_CACHE_DIR``: FX graphs, AOTAutograd
results, the built kernels and, on GPUs, Triton's binaries and autotuning choices. A SageMaker
job starts in a fresh container, so that folder is empty every run. The job carries it itself:
before the first step, the first process of each host restores the archive the last run saved
under the pipeline's S3 prefix (``COMPILED_TRAINING_COMPILE_CACHE_URL``, set by the
constructs); after training, once every rank is done compiling, rank 0 saves the folder back.

Why the job moves it and not SageMaker: an input channel over a prefix with no object fails the
first run's job, and checkpoints and outputs land under one execution's or one job's key, never
where the next run looks. Why the folder and not the Mega-Cache blob
(``torch.compiler.save_cache_artifacts``, PyTorch 2.7+): the folder works from PyTorch 2.4, and
it holds the built kernels, which loaded Mega-Cache artifacts rebuild (the measurement:
docs/guides/warm-starts.md).

The archive's key is what invalidates it: the instance type, the device, the backend and mode,
and the PyTorch, Triton and Python versions; a changed image or instance type finds no archive
and compiles cold. A missing, corrupt or mismatched archive is a warning and a cold compile; a
failed save is a warning after a finished training, never a failed job.

A script of your own gets it without a line of code: the constructs put `launch` in front of
it. Or, to choose where, with one call (after ``init_process_group`` under torchrun)::

    from compiled_training_runtime.warm_start import compile_cache

    with compile_cache(mode="default", backend="inductor") as cache:
        train()                        # torch.compile(...) inside
    print(cache.summary())
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import contract

ARCHIVE = "inductor-cache.tar.gz"
PREFIX = "compiled-training: compile cache:"


class CacheError(Exception):
    """The archive could not be read or written; the run goes on cold (or unsaved)."""


def cache_key(mode: str, backend: str, environ: Mapping[str, str]) -> str:
    """The archive's folder under the cache URL: everything that makes a compiled graph
    unusable elsewhere."""
    import torch

    device = _device(torch, backend, int(environ.get("LOCAL_RANK", "0")))
    # The world size too: DDP's graphs differ from one process's.
    parts = [environ.get("SM_CURRENT_INSTANCE_TYPE") or "local", device,
             f"{backend}-{mode}", f"torch-{torch.__version__}", f"triton-{_triton_version()}",
             f"py{sys.version_info[0]}.{sys.version_info[1]}",
             f"world{environ.get('WORLD_SIZE', '1')}"]
    return "/".join(re.sub(r"[^A-Za-z0-9._+-]", "_", part) for part in parts)


def _device(torch: Any, backend: str, index: int) -> str:
    if backend == contract.TORCH_COMPILE_NEURON_BACKEND:
        return "neuron"
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(index)
        return f"cuda-{torch.cuda.get_device_name(index)}-sm{major}{minor}"
    return "cpu"


def _triton_version() -> str:
    from importlib import metadata

    for name in ("triton", "pytorch-triton"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "none"


class CompileCache:
    """One job's compile cache: `restore` before the first compile, `save` after the last."""

    def __init__(self, url: str | None, *, key: str, folder: Path, kms_key_id: str | None,
                 environ: Mapping[str, str], off_because: str | None = None,
                 meet: Callable[[], bool] | None = None) -> None:
        self.url = url.rstrip("/") + "/" if url else None
        self.key = key
        self.folder = folder
        self.kms_key_id = kms_key_id
        self.rank = int(environ.get("RANK", "0"))
        self.local_rank = int(environ.get("LOCAL_RANK", "0"))
        self.world_size = int(environ.get("WORLD_SIZE", "1"))
        # How the ranks of a host wait for one another: the process group's barrier, or the
        # launcher's (`launch`), which runs before any process group exists.
        self._given_meet = meet
        self._meet = meet or (lambda: _barrier(self.local_rank))
        # The same on every rank (the job's environment): ranks that take part meet at the
        # same barriers, whatever befalls the cache on one of them.
        self._takes_part = bool(url) and not off_because
        self._restored: set[str] = set()
        self._report: dict[str, Any] = {"state": "off", "why": off_because or "no cache URL"}
        if self._takes_part:
            self._report = {"state": "cold", "location": self.location}

    @staticmethod
    def from_environ(*, mode: str = "default", backend: str = "inductor",
                     environ: Mapping[str, str] | None = None,
                     meet: Callable[[], bool] | None = None) -> CompileCache:
        """The cache the job's environment names, for ``torch.compile(mode=, backend=)``."""
        env = os.environ if environ is None else environ
        url = env.get(contract.ENV_COMPILE_CACHE_URL) or None
        base = env.get("SAGEMAKER_BASE_DIR")  # a local run keeps it in its own folder
        folder = Path(env.get("TORCHINDUCTOR_CACHE_DIR") or (
            Path(base) / "compile-cache" if base else
            Path(tempfile.gettempdir()) / "compiled-training-compile-cache"))
        off_because, key = None, ""
        if url is not None and not url.startswith(("s3://", "file://")):
            off_because = (f"{contract.ENV_COMPILE_CACHE_URL} must be s3:// or file://, got "
                           f"{url!r}")
        elif url:
            try:
                key = cache_key(mode, backend, env)
            except Exception as error:  # a cache must never fail the run
                off_because = f"could not name the device ({type(error).__name__}: {error})"
        return CompileCache(url, key=key, folder=folder,
                            kms_key_id=env.get(contract.ENV_COMPILE_CACHE_KMS_KEY_ID),
                            environ=env, off_because=off_because, meet=meet)

    @property
    def on(self) -> bool:
        return self._report["state"] != "off"

    @property
    def location(self) -> str:
        return f"{self.url}{self.key}/{ARCHIVE}"

    def restore(self) -> None:
        """Points Inductor at the folder and fills it from the last run's archive (the first
        process of each host; the others wait for it). Never raises."""
        if not self._takes_part:
            if self.url:
                _warn(f"off: {self._report['why']}")
            return
        if self.world_size > 1 and self._given_meet is None and not _distributed():
            self._takes_part = False
            self._off("restore() runs before init_process_group: ranks cannot wait for one "
                      "another's restore, so every rank compiles cold")
            return
        try:
            self._ranks_from_process_group()
            self.folder.mkdir(parents=True, exist_ok=True)
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(self.folder)
            triton = os.environ.get("TRITON_CACHE_DIR")
            if triton and not str(Path(triton).resolve()).startswith(str(self.folder.resolve())):
                _warn(f"TRITON_CACHE_DIR={triton} is outside {self.folder}: Triton's kernels "
                      "are not carried between runs (unset it to keep them)")
            _enable_caches()
            self._report["compile_seconds_before"] = _compile_seconds()
            if self.local_rank == 0:
                self._restore_here()
        except Exception as error:  # a cache must never fail the run
            self._off(f"could not prepare {self.folder} ({type(error).__name__}: {error})")
        finally:
            self._meet()

    def _ranks_from_process_group(self) -> None:
        if _distributed():
            import torch.distributed as dist

            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def _restore_here(self) -> None:
        with tempfile.TemporaryDirectory(prefix="compile-cache-",
                                         dir=self.folder.parent) as scratch:
            archive = Path(scratch) / ARCHIVE
            try:
                if not _store(self).get(self.location, archive):
                    print(f"{PREFIX} none yet at {self.location}: compiling cold", flush=True)
                    return
                unpacked = Path(scratch) / "unpacked"
                restored = _unpack(archive, unpacked)
                shutil.copytree(unpacked, self.folder, dirs_exist_ok=True)
            except Exception as error:  # a cache must never fail the run
                _warn(f"could not restore {self.location} ({type(error).__name__}: {error}); "
                      "compiling cold")
                self._report["restore_error"] = f"{type(error).__name__}: {error}"
                return
            self._restored = restored
            self._report.update(state="warm", restored_bytes=archive.stat().st_size)
            print(f"{PREFIX} restored {archive.stat().st_size} bytes from {self.location}",
                  flush=True)

    def save(self) -> None:
        """Saves the folder as the next run's archive: rank 0, once every rank is done. Every
        rank calls it (the others only wait). Never raises."""
        if not self._takes_part:
            return
        try:
            counts = _counts(self._report.pop("compile_seconds_before", None))
            # A hit on a graph this run compiled itself is reuse, not a warm start: loaded
            # counts at most the graphs the archive brought.
            hits, brought = counts["graphs_loaded"], len(_graphs(self._restored))
            counts["graphs_loaded"] = min(hits, brought) if brought else 0
            counts["graphs_reused"] = hits - counts["graphs_loaded"]
            counts["hit"] = counts["graphs_loaded"] > 0
            self._report.update(counts)
        except Exception as error:
            self._report["counts_error"] = f"{type(error).__name__}: {error}"
        met = self._meet()  # no rank still compiles into the folder rank 0 archives
        if self.rank != 0 or self._report["state"] == "off":
            return
        if not met:
            _warn("not saved: the host's ranks did not all finish; the next run compiles cold")
            return
        # Entries restored and not loaded once are another model's or configuration's: a
        # cache that nothing hit starts again from what this run compiled, so it never only
        # grows.
        stale = self._restored if not self._report.get("graphs_loaded") else set()
        archive = self.folder.parent / f".{self.folder.name}-{os.getpid()}.tar.gz"
        try:
            with tarfile.open(archive, "w:gz") as tar:
                tar.add(str(self.folder), arcname=".", filter=lambda info: None if (
                    os.path.normpath(info.name) in stale) else info)
            _store(self).put(archive, self.location)
            self._report["saved_bytes"] = archive.stat().st_size
            print(f"{PREFIX} saved {archive.stat().st_size} bytes to {self.location}",
                  flush=True)
        except Exception as error:  # the training is done: a cache never undoes that
            _warn(f"could not save {self.location} ({type(error).__name__}: {error}); the "
                  "next run compiles cold")
            self._report["save_error"] = f"{type(error).__name__}: {error}"
        finally:
            archive.unlink(missing_ok=True)

    def summary(self) -> dict[str, Any]:
        """What the run summary reports: warm, cold or off (and why), the graphs loaded and
        compiled, and the seconds spent compiling."""
        return {k: v for k, v in self._report.items() if k != "compile_seconds_before"}

    def _off(self, why: str) -> None:
        self._report = {"state": "off", "why": why}
        _warn(f"off: {why}")


@contextmanager
def compile_cache(*, mode: str = "default", backend: str = "inductor",
                  environ: Mapping[str, str] | None = None) -> Iterator[CompileCache]:
    """Restores the job's compile cache, runs the block, saves the cache if the block
    finished. ``mode`` and ``backend`` are those ``torch.compile`` gets."""
    cache = CompileCache.from_environ(mode=mode, backend=backend, environ=environ)
    cache.restore()
    yield cache
    cache.save()


def _warn(message: str) -> None:
    print(f"{PREFIX} warning: {message}", file=sys.stderr, flush=True)


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _barrier(local_rank: int) -> bool:
    """Waits for every rank (where a process group exists); whether they all came."""
    if not _distributed():
        return True
    import torch.distributed as dist

    try:
        if dist.get_backend() == "nccl":  # on this process's GPU, not one NCCL guesses
            dist.barrier(device_ids=[local_rank])
        else:
            dist.barrier()
    except Exception as error:  # a rank that left ends the job through torchrun anyway
        _warn(f"the ranks could not meet ({type(error).__name__}: {error})")
        return False
    return True


def _enable_caches() -> None:
    """The FX graph cache is off by default in PyTorch 2.4, the AOTAutograd one until 2.6."""
    import torch._inductor.config as inductor

    for name in ("fx_graph_cache", "autograd_cache"):
        if hasattr(inductor, name):
            setattr(inductor, name, True)


def _counts(seconds_before: float | None) -> dict[str, Any]:
    """The compiler's own hit and miss counters, and its compile seconds since restore."""
    from torch._dynamo.utils import counters

    seconds = _compile_seconds()
    loaded = int(counters["inductor"]["fxgraph_cache_hit"])
    return {"hit": loaded > 0, "graphs_loaded": loaded,
            "graphs_compiled": int(counters["inductor"]["fxgraph_cache_miss"]),
            "compile_seconds": None if seconds is None or seconds_before is None
            else round(seconds - seconds_before, 3)}


def _graphs(restored: set[str]) -> set[tuple[str, ...]]:
    """The FX graph entries among restored paths (``fxgraph/<xx>/<key>/...``)."""
    return {Path(path).parts[:3] for path in restored
            if Path(path).parts[:1] == ("fxgraph",) and len(Path(path).parts) >= 3}


def _compile_seconds() -> float | None:
    """Dynamo's wall time in ``compile_inner`` (tracing through Inductor), or None where this
    PyTorch does not record it so."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return None
    times = [sum(v) for k, v in compilation_time_metrics.items() if k.endswith("compile_inner")]
    return float(times[0]) if times else 0.0


def _unpack(archive: Path, target: Path) -> set[str]:
    """Unpacks an archive this module wrote (regular files and folders inside ``target``);
    returns its files' names."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                name = Path(member.name)
                if name.is_absolute() or ".." in name.parts or not (member.isfile()
                                                                      or member.isdir()):
                    raise CacheError(f"unexpected entry {member.name!r}")
            # Python's own filter where it has one (3.12, and back-ported patch releases).
            if hasattr(tarfile, "data_filter"):
                tar.extractall(target, members=members, filter="data")
            else:
                tar.extractall(target, members=members)  # noqa: S202 (checked above)
    except (tarfile.TarError, OSError, EOFError) as error:
        raise CacheError(f"not a readable archive: {error}") from None
    return {os.path.normpath(m.name) for m in members if m.isfile()}


class _S3:
    """The job's own S3 calls (boto3, which the training toolkit brings into every DLC)."""

    def __init__(self, kms_key_id: str | None) -> None:
        import boto3

        self.client = boto3.client("s3")
        self.kms_key_id = kms_key_id

    def get(self, uri: str, target: Path) -> bool:
        bucket, key = _split(uri)
        # Listed first: for a key that is not there S3 answers GetObject with 403, not 404,
        # "if you don't have the s3:ListBucket permission" (S3 API reference, GetObject, read
        # 2026-11-26); the role may list only under its own prefix (an s3:prefix condition),
        # which a ListObjectsV2 with that Prefix meets and a GetObject carries no key for.
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        if not any(item["Key"] == key for item in listed.get("Contents", [])):
            return False
        self.client.download_file(bucket, key, str(target))
        return True

    def put(self, source: Path, uri: str) -> None:
        bucket, key = _split(uri)
        extra = ({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.kms_key_id}
                 if self.kms_key_id else {})
        self.client.upload_file(str(source), bucket, key, ExtraArgs=extra)


class _Folder:
    """A ``file://`` URL: a folder (the compile benchmark; a shared file system)."""

    def get(self, uri: str, target: Path) -> bool:
        source = Path(uri[len("file://"):])
        if not source.is_file():
            return False
        shutil.copyfile(source, target)
        return True

    def put(self, source: Path, uri: str) -> None:
        target = Path(uri[len("file://"):])
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.{time.monotonic_ns()}")
        shutil.copyfile(source, partial)
        partial.replace(target)


def _store(cache: CompileCache) -> Any:
    return _Folder() if str(cache.url).startswith("file://") else _S3(cache.kms_key_id)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key
