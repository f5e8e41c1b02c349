"""The test environments keep identical files once (tests/environments.py): the NVIDIA libraries
of the CUDA builds of torch that PyPI has for x86_64 would not fit on CI's disk three times."""

from __future__ import annotations

import os
from pathlib import Path

from tests.environments import share_identical_files

MIB = 1 << 20


def _write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_identical_libraries_in_two_environments_become_one_file(tmp_path: Path) -> None:
    library = os.urandom(2 * MIB)
    first = _write(tmp_path / "a/nvidia/cublas/lib/libcublas.so.12", library)
    second = _write(tmp_path / "b/nvidia/cublas/lib/libcublas.so.12", library)

    assert share_identical_files([tmp_path / "a", tmp_path / "b"]) == 2 * MIB

    assert first.stat().st_ino == second.stat().st_ino
    assert second.read_bytes() == library
    # A second run finds them shared already.
    assert share_identical_files([tmp_path / "a", tmp_path / "b"]) == 0


def test_files_that_differ_in_content_mode_or_are_small_stay_apart(tmp_path: Path) -> None:
    tool = os.urandom(MIB)
    pairs = [
        (_write(tmp_path / "a/one.so", os.urandom(MIB)), _write(tmp_path / "b/one.so", os.urandom(MIB))),
        # Hard links share a mode, so files that differ in theirs are left as they are.
        (_write(tmp_path / "a/tool", tool, 0o755), _write(tmp_path / "b/tool", tool)),
        (_write(tmp_path / "a/small.py", b"x" * 1000), _write(tmp_path / "b/small.py", b"x" * 1000)),
    ]

    assert share_identical_files([tmp_path / "a", tmp_path / "b"]) == 0

    for first, second in pairs:
        assert first.stat().st_ino != second.stat().st_ino
    assert pairs[1][0].stat().st_mode & 0o777 == 0o755
    assert pairs[1][1].stat().st_mode & 0o777 == 0o644
