"""A job's /tmp, /var/tmp and /dev/shm are its own, as in a container: a script that writes
fixed paths there leaves nothing on this machine, and two runs at once, each with such a job,
never see each other's files. Tried with the workdir under /tmp (bound back into the job's own
/tmp) and outside it. What stands in for AWS: moto's S3; the training toolkit is the real one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import aws_cdk as cdk
import pytest

from compiled_training import Compiler, Framework, TrainingPipeline
from compiled_training.local.container import isolation_problem

SCRIPT = """
import os, sys, time
paths = [os.path.join(folder, "{marker}") for folder in ("/tmp", "/var/tmp", "/dev/shm")]
for path in paths:
    if os.path.exists(path):
        sys.exit(f"{{path}} was there before this job wrote it")
    with open(path, "w") as out:
        out.write(os.environ["TRAINING_JOB_NAME"])
time.sleep(2)  # long enough for the other run's job to write the same paths
for path in paths:
    if open(path).read() != os.environ["TRAINING_JOB_NAME"]:
        sys.exit(f"{{path}} holds another job's file")
print("fixed paths written and read back:", ", ".join(paths))
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("weights")
"""


@pytest.mark.skipif(isolation_problem() is not None, reason="no mount namespace here: the "
                    "runner says /tmp is shared")
@pytest.mark.parametrize("placement", ["under /tmp", "elsewhere"])
def test_fixed_temporary_paths_are_the_jobs_own(tmp_path, placement):
    marker = f"ct-fixed-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "training"
    source.mkdir()
    (source / "train.py").write_text(SCRIPT.format(marker=marker))
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    TrainingPipeline(cdk.Stack(app, "Team", env=cdk.Environment(region="eu-west-1")), "Tmp",
                     pipeline_name="fixed-paths", framework=Framework.pytorch("2.9.0"),
                     compiler=Compiler.none(), instance_type="ml.m5.large",
                     source_dir=str(source), entry_point="train.py")
    app.synth()
    # Elsewhere: the user's home, whichever folder the checkout is in (a clone may be in /tmp).
    base = tmp_path if placement == "under /tmp" else Path(tempfile.mkdtemp(
        prefix="compiled-training-job-tmp-", dir=Path.home()))
    if str(base).startswith("/tmp/") is not (placement == "under /tmp"):
        pytest.skip(f"{base} is not {placement} on this machine")
    try:
        runs = [subprocess.Popen(
            [sys.executable, "-m", "compiled_training.tools.cli", "run",
             str(tmp_path / "cdk.out"), "--pipeline", "fixed-paths",
             "--workdir", str(base / f"work{i}"), "--json", str(base / f"report{i}.json")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in (1, 2)]
        outputs = [run.communicate(timeout=600)[0] for run in runs]
        for i, (run, output) in enumerate(zip(runs, outputs, strict=True), start=1):
            assert run.returncode == 0, output[-3000:]
            log = (base / f"work{i}" / "steps" / "Train" / "training.log").read_text()
            assert "fixed paths written and read back:" in log  # the relay may break the line
            assert json.loads((base / f"report{i}.json").read_text())["status"] == "Succeeded"
        for folder in ("/tmp", "/var/tmp", "/dev/shm"):
            assert not (Path(folder) / marker).exists()  # nothing left on this machine
    finally:
        if placement == "elsewhere":
            shutil.rmtree(base, ignore_errors=True)
