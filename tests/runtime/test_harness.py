"""The harness's runs of the runtime: a run that hangs fails with the stacks of its processes."""

from __future__ import annotations

import sys

import pytest

from tests.runtime.harness import run_bounded

HANGS = ("import subprocess, sys\n"
         "subprocess.run([sys.executable, '-c', "
         "'import time\\ndef waits_forever():\\n    time.sleep(600)\\nwaits_forever()'])")


def test_a_run_past_its_timeout_fails_with_the_stack_of_the_process_that_hangs():
    with pytest.raises(AssertionError, match="ran past 3 s") as failure:
        run_bounded([sys.executable, "-c", HANGS], {}, 3)
    assert "in waits_forever" in str(failure.value)


def test_a_run_within_its_timeout_gives_its_output_and_exit_code():
    done = run_bounded([sys.executable, "-c", "print('trained'); raise SystemExit(3)"], {}, 60)
    assert (done.returncode, done.stdout) == (3, "trained\n")
