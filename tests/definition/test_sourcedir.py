"""sourcedir.tar.gz: deterministic, and what the training toolkit can unpack."""

from __future__ import annotations

import os
import tarfile
import time

from compiled_training.definition.sourcedir import build_sourcedir, write_sourcedir


def _tree(root):
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("")
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("")
    return root


def test_same_source_gives_identical_bytes_whatever_the_mtimes(tmp_path):
    a = _tree(tmp_path / "a")
    b = _tree(tmp_path / "b")
    later = time.time() + 3600
    os.utime(b / "train.py", (later, later))
    assert build_sourcedir(a) == build_sourcedir(b)


def test_changed_source_gives_different_bytes(tmp_path):
    a = _tree(tmp_path / "a")
    before = build_sourcedir(a)
    (a / "train.py").write_text("print('changed')\n")
    assert build_sourcedir(a) != before


def test_archive_holds_sorted_code_without_caches_tests_or_dotfiles(tmp_path):
    path = write_sourcedir(_tree(tmp_path / "src"))
    assert path.name == "sourcedir.tar.gz"
    with tarfile.open(path, "r:gz") as tar:  # what the toolkit does with it
        members = tar.getmembers()
    assert [m.name for m in members] == ["pkg/__init__.py", "train.py"]
    assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members)


def test_written_path_is_content_addressed(tmp_path):
    first = write_sourcedir(_tree(tmp_path / "a"))
    second = write_sourcedir(_tree(tmp_path / "b"))
    assert first == second


def test_a_changed_source_is_archived_anew_in_the_same_process(tmp_path):
    # Same size, same mtime: only the content says the source changed.
    source = _tree(tmp_path / "src")
    first = write_sourcedir(source)
    stat = (source / "train.py").stat()
    (source / "train.py").write_text("print('TRAIN')\n")
    os.utime(source / "train.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = write_sourcedir(source)
    assert second != first
    assert second.read_bytes() == build_sourcedir(source)


def test_an_archive_removed_from_the_temporary_folder_is_written_again(tmp_path):
    source = _tree(tmp_path / "src")
    path = write_sourcedir(source)
    path.unlink()
    assert write_sourcedir(source) == path
    assert path.read_bytes() == build_sourcedir(source)
