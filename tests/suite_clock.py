"""A pytest plugin: what each test costs, and which real processes it starts.

``pytest -p tests.suite_clock --suite-clock=DIR`` writes one JSON line per test into
``DIR/<worker>.jsonl``: its id, the seconds of its setup, call and teardown, and every process
it started (``subprocess.Popen`` and ``multiprocessing``), session fixtures counted against the
test whose setup built them. ``scripts/suite_report.py`` turns the lines into the suite's report
and compares two runs' processes. Without the option the plugin records nothing.
"""

from __future__ import annotations

import json
import multiprocessing.process
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

_current: dict[str, Any] = {}
_out: list[Path] = []
_original_popen_init = subprocess.Popen.__init__
_original_process_start = multiprocessing.process.BaseProcess.start


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-clock", metavar="DIR", default=None,
                     help="record each test's phases and the processes it starts into DIR")


def pytest_configure(config: pytest.Config) -> None:
    folder = config.getoption("--suite-clock")
    if not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # the run itself (xdist's controller, or the one process): a new record
        shutil.rmtree(folder, ignore_errors=True)
    Path(folder).mkdir(parents=True, exist_ok=True)
    worker = worker or "main"
    _out.append(Path(folder) / f"{worker}.jsonl")
    subprocess.Popen.__init__ = _recording_popen_init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = _recording_process_start  # type: ignore[method-assign]


def _record(argv: Any) -> None:
    if not _current:
        return
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    _current["processes"].append([os.fsdecode(part) for part in argv])


def _recording_popen_init(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
    _record(args if not kwargs.get("shell") else ["sh", "-c", args])
    _original_popen_init(self, args, *rest, **kwargs)


def _recording_process_start(self: multiprocessing.process.BaseProcess) -> None:
    target = getattr(self, "_target", None)
    _record(["multiprocessing", getattr(target, "__qualname__", repr(target))])
    _original_process_start(self)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if not _out:
        yield
        return
    _current.update(nodeid=item.nodeid, worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
                    started=time.time(), processes=[], phases={}, outcome="passed")
    yield
    line = json.dumps(dict(_current)) + "\n"
    _current.clear()
    with _out[0].open("a") as out:
        out.write(line)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if _current:
        _current["phases"][report.when] = round(report.duration, 3)
        if report.outcome != "passed":
            _current["outcome"] = report.outcome
