"""How a local run reports a script that ends early, through SageMaker's training toolkit (the
real one; moto stands in for S3): its last line of its own, never a progress bar, and a signal
named as a signal, apart from the toolkit's own exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from compiled_training import Compiler, Framework, TrainingPipeline

SCRIPT = Path(__file__).parent / "team_scripts" / "ends_early"


@pytest.mark.parametrize(("end", "reason", "ended"), [
    ("killed", "ExecuteUserScriptError: the script was killed by SIGKILL (signal 9; often "
               "the kernel's out-of-memory killer's)", "the toolkit exited 1"),
    ("raises", "ExecuteUserScriptError: ExitCode 1 ", "exit code 1"),  # its twin
])
def test_a_script_that_ends_early_is_reported_by_its_own_last_line(tmp_path, end, reason, ended):
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    TrainingPipeline(cdk.Stack(app, "Team", env=cdk.Environment(region="eu-west-1")), "Early",
                     pipeline_name="ends-early", framework=Framework.pytorch("2.9.0"),
                     compiler=Compiler.none(), instance_type="ml.m5.large",
                     source_dir=str(SCRIPT), entry_point="train.py", hyperparameters={"end": end})
    app.synth()
    result = subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(tmp_path / "cdk.out"),
         "--pipeline", "ends-early", "--workdir", str(tmp_path / "work"), "--json",
         str(tmp_path / "report.json")], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    failure = json.loads((tmp_path / "report.json").read_text())["failure"]
    assert failure.startswith(f"step Train failed: AlgorithmError: {reason}"), failure
    assert f"({ended}; the script's last line: " in failure
    # The toolkit relays the script's stderr in the pieces it reads, so a traceback's last line
    # may come as "RuntimeError", ":" and the message, each a line of its own.
    last = "loaded 150 rows" if end == "killed" else "(RuntimeError: )?the team script failed"
    assert re.search(f"the script's last line: {last}; log: ", failure), failure
    assert "it/s]" not in failure and "ExitCode -9" not in failure
