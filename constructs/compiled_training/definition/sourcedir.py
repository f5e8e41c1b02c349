"""A deterministic ``sourcedir.tar.gz``, the code upload the SageMaker training toolkit unpacks.

Sorted entries, mtime 0, no owner names, gzip mtime 0: an unchanged source gives byte-identical
bytes, so the asset hash, and with it the template, stays the same.
"""

from __future__ import annotations

import fnmatch
import functools
import gzip
import hashlib
import io
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

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
    return [Path(name) for name in _source_names(source_dir, excludes)]


def _source_names(source_dir: Path, excludes: Sequence[str]) -> list[str]:
    """`source_files` as sorted POSIX paths (strings: every pipeline walks its source)."""
    excluded = _excluded(tuple(excludes))
    top = os.fspath(source_dir)
    found: list[str] = []
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not excluded(d)]
        folder = os.path.relpath(root, top).replace(os.sep, "/")
        prefix = "" if folder == "." else f"{folder}/"
        found += (prefix + name for name in files if not excluded(name))
    return sorted(found)


class _Entry(NamedTuple):
    """One archive member: all the archive holds of a file."""
    name: str
    mode: int
    data: bytes


def _entries(source_dir: Path, excludes: Sequence[str],
             packages: Sequence[Path] = ()) -> list[_Entry]:
    """The folder's files, and each of ``packages`` (folders) under its own name beside them."""
    entries = []
    trees = [(source_dir, "")] + [(package, f"{package.name}/") for package in packages]
    for folder, prefix in trees:
        for name in _source_names(folder, excludes):
            path = os.path.join(folder, name)
            with open(path, "rb") as file:
                entries.append(_Entry(prefix + name, 0o755 if os.access(path, os.X_OK)
                                      else 0o644, file.read()))
    return sorted(entries, key=lambda entry: entry.name)


def build_sourcedir(source_dir: Path, excludes: Sequence[str] = DEFAULT_EXCLUDES, *,
                    packages: Sequence[Path] = ()) -> bytes:
    """The archive's bytes."""
    return _archive(_entries(source_dir, excludes, packages))


def _archive(entries: list[_Entry]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.size = len(entry.data)
            info.mtime = 0
            info.mode = entry.mode
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(entry.data))
    compressed = bytearray(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0))
    # The header's OS byte: Python 3.13 writes 255 (unknown) where earlier ones write 3 (Unix);
    # one value keeps the archive, its asset hash and the template the same on every Python.
    compressed[_GZIP_OS] = _GZIP_OS_UNIX
    return bytes(compressed)


_GZIP_OS, _GZIP_OS_UNIX = 9, 3  # RFC 1952, section 2.3


# Archives written by this process, by the digest of their entries: pipelines that share a
# source folder would otherwise compress the same bytes once each.
_WRITTEN: dict[str, Path] = {}


def write_sourcedir(source_dir: Path, excludes: Sequence[str] = DEFAULT_EXCLUDES, *,
                    packages: Sequence[Path] = ()) -> Path:
    """Writes the archive (``packages`` beside the folder's files) to a content-addressed
    temporary folder and returns its path.

    The folder name is the content hash, so the CDK asset (a single file) hashes the same
    every synth, wherever the temporary folder is.
    """
    entries = _entries(source_dir, excludes, packages)
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(f"{entry.name}\0{entry.mode}\0{len(entry.data)}\0".encode())
        digest.update(entry.data)
    written = _WRITTEN.get(digest.hexdigest())
    if written is not None and written.is_file():
        return written
    target = _write(_archive(entries))
    _WRITTEN[digest.hexdigest()] = target
    return target


def _write(data: bytes) -> Path:
    digest = hashlib.sha256(data).hexdigest()[:32]
    folder = Path(tempfile.gettempdir()) / "compiled-training-sourcedir" / digest
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "sourcedir.tar.gz"
    if not target.exists() or target.read_bytes() != data:
        tmp = folder / f".sourcedir.{os.getpid()}"
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


@functools.cache
def _excluded(excludes: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a file or folder name matches one of the patterns (``fnmatch``'s, all in one
    expression)."""
    if not excludes:
        return lambda name: False
    pattern = re.compile("|".join(fnmatch.translate(p) for p in excludes))
    return lambda name: pattern.match(name) is not None
