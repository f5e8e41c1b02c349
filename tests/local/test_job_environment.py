"""A local job's environment is the step's: variables of the library that this shell exports
(a switch, a cache URL) never reach it, and the step's own do."""

from __future__ import annotations

import sys

from compiled_training.local.container import Job
from compiled_training_runtime import contract
from compiled_training_runtime.local import job_env


def test_the_shells_switches_stay_out_and_the_steps_own_go_in(tmp_path, monkeypatch):
    monkeypatch.setenv(contract.ENV_TORCH_COMPILE, "true")
    monkeypatch.setenv(contract.ENV_COMPILE_CACHE_URL, "s3://someone-elses/cache/")
    job = Job(tmp_path / "steps" / "Train", "train-local", isolated=False)
    eager = job.environment(python=sys.executable, region="eu-west-1", endpoint=None,
                            variables={})
    assert contract.ENV_TORCH_COMPILE not in eager
    assert contract.ENV_COMPILE_CACHE_URL not in eager
    compiled = job.environment(python=sys.executable, region="eu-west-1", endpoint=None,
                               variables={contract.ENV_TORCH_COMPILE: "true"})
    assert compiled[contract.ENV_TORCH_COMPILE] == "true"


def test_bench_abs_baseline_arm_is_eager_whatever_the_shell_exports(tmp_path, monkeypatch):
    monkeypatch.setenv(contract.ENV_TORCH_COMPILE, "true")
    assert contract.ENV_TORCH_COMPILE not in job_env(tmp_path, {})
