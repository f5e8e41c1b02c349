"""A deterministic ``sourcedir.tar.gz``, the code upload the SageMaker training toolkit unpacks.

Sorted entries, mtime 0, no owner names, gzip mtime 0: an unchanged source gives byte-identical
bytes, so the asset hash, and with it the template, stays the same.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

DEFAULT_EXCLUDES = (
    "__pycache__",
    "*.pyc",
    ".*",
    "*.egg-info",
    "cdk.out",
    "node_modules",
    "build",
    "tests",
)


def source_files(source_dir: Path, excludes: Sequence[str] = DEFAULT_EXCLUDES) -> list[Path]:
    """Files under ``source_dir`` that go into the archive, sorted, relative to it."""
    found: list[Path] = []
    for root, dirs, files in os.walk(source_dir):
        dirs[:] = sorted(d for d in dirs if not _excluded(d, excludes))
        for name in sorted(files):
            if not _excluded(name, excludes):
                found.append((Path(root) / name).relative_to(source_dir))
    return sorted(found, key=lambda p: p.as_posix())


def build_sourcedir(source_dir: Path, excludes: Sequence[str] = DEFAULT_EXCLUDES) -> bytes:
    """The archive's bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative in source_files(source_dir, excludes):
            data = (source_dir / relative).read_bytes()
            info = tarfile.TarInfo(relative.as_posix())
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o755 if os.access(source_dir / relative, os.X_OK) else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def write_sourcedir(source_dir: Path, excludes: Sequence[str] = DEFAULT_EXCLUDES) -> Path:
    """Writes the archive to a content-addressed temporary folder and returns its path.

    The folder name is the content hash, so the CDK asset (a single file) hashes the same
    every synth, wherever the temporary folder is.
    """
    data = build_sourcedir(source_dir, excludes)
    digest = hashlib.sha256(data).hexdigest()[:32]
    folder = Path(tempfile.gettempdir()) / "compiled-training-sourcedir" / digest
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "sourcedir.tar.gz"
    if not target.exists() or target.read_bytes() != data:
        tmp = folder / f".sourcedir.{os.getpid()}"
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


def _excluded(name: str, excludes: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in excludes)
