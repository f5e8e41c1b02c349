"""Serves ``torch_xla.distributed.xla_spawn`` from ``xla_spawn.py`` beside this file.

AWS's launcher exists only inside the Training Compiler DLCs (open-source torch-xla has no
``xla_spawn``), so a local run (``compiled-training run``) and the tests that launch the way
SageMaker does put this folder on PYTHONPATH.
Nothing else is replaced: ``torch_xla`` and every other module import as installed.
"""

import importlib.abc
import importlib.util
import sys
from pathlib import Path

_NAME = "torch_xla.distributed.xla_spawn"
_FILE = Path(__file__).with_name("xla_spawn.py")


class _XlaSpawnFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname != _NAME:
            return None
        return importlib.util.spec_from_file_location(fullname, _FILE)


sys.meta_path.insert(0, _XlaSpawnFinder())
