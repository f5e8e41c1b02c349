"""Shared fixtures: offline SDK settings, a synthesized reference app, sample sources; the
run's Inductor settings and its order, the long tests first."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # app.py and benchmarks/ live at the repository root

# No AWS account here: the SDK must never reach for credentials or instance metadata.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["SAGEMAKER_SUPPRESS_V2_WARNING"] = "1"
os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"


@pytest.fixture(scope="session")
def source_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers import SAMPLE_ENTRY_POINT

    folder = tmp_path_factory.mktemp("source")
    (folder / "train.py").write_text(SAMPLE_ENTRY_POINT)
    (folder / "lib").mkdir()
    (folder / "lib" / "model.py").write_text("LAYERS = 2\n")
    return folder


@pytest.fixture(scope="session")
def reference_assembly(tmp_path_factory: pytest.TempPathFactory):
    """The reference platform (app.py + cdk.json), synthesized once with cdk-nag on."""
    from tests.helpers import synth_reference_app

    return synth_reference_app(tmp_path_factory.mktemp("cdk.out"))


# Inductor compiles in the compiling process: its pool of compile workers starts a torch
# process per core for each compiling process, which on two cores shared by two test workers
# only adds start-up (the pool's size is no part of a cache key).
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
# Inductor's probe of the CPU's vector instructions compiles and runs a C++ file in every new
# cache folder, seconds of each local job; set alike in every process of the run, cold and warm,
# it keys their caches alike.
os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
DURATIONS = Path(__file__).with_name("durations.json")
_XDIST_GROUP = re.compile(r"@[\w-]+$")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with the longest tests first, each kept whole (its module fixtures built
    once a worker), so that the two workers end together rather than one waiting on a late
    long test. The seconds are a full run's (``scripts/suite_report.py --durations``)."""
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    # xdist names a grouped test's group after its id (``...@packaging``).
    longest = {name: max(known.get(_XDIST_GROUP.sub("", item.nodeid), 0.0) for item in own)
               for name, own in modules.items()}
    items[:] = [item for name in sorted(modules, key=lambda name: -longest[name])
                for item in modules[name]]
