"""The entry-point check: what the training toolkit's launchers demand, read without running."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from compiled_training import Distribution
from compiled_training.definition.entry_point import entry_point_problems

XLA = Distribution.PYTORCHXLA


def _source(tmp_path: Path, script: str, name: str = "train.py") -> Path:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(textwrap.dedent(script))
    return tmp_path


@pytest.mark.parametrize("script", [
    "def _mp_fn(index):\n    main()\n",
    "async def _mp_fn(index):\n    pass\n",
    "def _mp_fn(index, *args):\n    pass\n",
    "def _mp_fn(*args):\n    pass\n",
    "def _mp_fn(index=0, flag=False):\n    pass\n",
    "def _mp_fn(index, *, flag=False):\n    pass\n",
    "from lib import run as _mp_fn\n",
    "from lib import _mp_fn\n",
    "from lib import *  # may bring _mp_fn: not refused\n",
    "_mp_fn = main\n",
    "_mp_fn: object = main\n",
    "first, _mp_fn = main, main\n",
    "try:\n    from lib import _mp_fn\nexcept ImportError:\n    _mp_fn = None\n",
    "if True:\n    def _mp_fn(index):\n        pass\n",
    "if __name__ == '__main__':\n    main()\nelse:\n    _mp_fn = main\n",
])
def test_a_top_level_mp_fn_taking_the_index_passes(tmp_path, script):
    assert entry_point_problems("train.py", XLA, _source(tmp_path, script)) == []


@pytest.mark.parametrize(("script", "problem"), [
    ("def main():\n    pass\n", "defines no top-level _mp_fn(index)"),
    ("def main():\n    def _mp_fn(index):\n        pass\n", "defines no top-level _mp_fn"),
    ("class Job:\n    def _mp_fn(self, index):\n        pass\n", "defines no top-level _mp_fn"),
    ("if __name__ == '__main__':\n    def _mp_fn(index):\n        pass\n",
     "defines no top-level _mp_fn"),
    ("if '__main__' == __name__:\n    _mp_fn = main\n", "defines no top-level _mp_fn"),
    ("registry[_mp_fn] = main\n", "defines no top-level _mp_fn"),
    ("def _mp_fn():\n    pass\n", "defines _mp_fn without the index parameter"),
    ("def _mp_fn(index, world):\n    pass\n", "defines _mp_fn without the index parameter"),
    ("def _mp_fn(index, *, flag):\n    pass\n", "defines _mp_fn without the index parameter"),
    ("def _mp_fn(index:\n", "cannot be parsed ("),
])
def test_a_script_without_a_callable_mp_fn_is_named_with_the_fix(tmp_path, script, problem):
    (message,) = entry_point_problems("train.py", XLA, _source(tmp_path, script))
    assert message.startswith(f"entry_point 'train.py' in {str(tmp_path)!r} {problem}")
    assert message.endswith("calls _mp_fn(index) in each process. Add: def _mp_fn(index): main()")


def test_mp_fn_is_asked_of_pytorchxla_only(tmp_path):
    source = _source(tmp_path, "print('train')\n")
    for distribution in (Distribution.NONE, Distribution.TORCH_DISTRIBUTED,
                         Distribution.SMDISTRIBUTED_DATA_PARALLEL):
        assert entry_point_problems("train.py", distribution, source) == []


def test_without_a_local_source_dir_only_the_name_is_checked():
    assert entry_point_problems("train.py", XLA, None) == []
    (message,) = entry_point_problems("train.sh", XLA, None)
    assert message.startswith("entry_point must be a Python script (.py) for distribution "
                              "'pytorchxla', got 'train.sh'")


def test_a_script_in_a_subfolder_is_found(tmp_path):
    source = _source(tmp_path, "def _mp_fn(index):\n    pass\n", name="src/train.py")
    assert entry_point_problems("src/train.py", XLA, source) == []
