"""`compiled-training advise`: the table, JSON, the plot, and bad input as one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from compiled_training.cli import main
from tests.helpers import ROOT

WORKLOADS = ROOT / "workloads.yaml"


def test_table_lists_verdicts_and_dollars(capsys):
    assert main(["advise", str(WORKLOADS)]) == 0
    out = capsys.readouterr().out
    assert "document-classification        ENABLE" in out
    assert "creative                       BENCHMARK" in out
    assert "tabular                        SKIP" in out
    assert "$157,538" in out


def test_json_is_for_machines(capsys):
    assert main(["advise", str(WORKLOADS), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [w["verdict"] for w in document] == ["ENABLE", "BENCHMARK", "SKIP", "SKIP"]
    assert document[0]["recommended_batch_size"] == 48


def test_plot_is_a_png(tmp_path, capsys):
    target = tmp_path / "advise.png"
    assert main(["advise", str(WORKLOADS), "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("arguments", "missing", "message"), [
    (["advise", str(WORKLOADS), "--plot", "advise.png"], "matplotlib",
     "compiled-training advise: advise --plot needs matplotlib (not installed): "
     "pip install 'compiled-training[plot]'\n"),
    (["bench", "--ab"], "torch",
     "compiled-training bench: bench --ab needs torch (not installed): "
     "pip install 'compiled-training[bench]'\n"),
    (["bench", "--backends", "eager"], "transformers",
     "compiled-training bench: bench needs transformers (not installed): "
     "pip install 'compiled-training[bench]'\n"),
])
def test_fails_without_an_extra_with_one_line_naming_it(monkeypatch, tmp_path, capsys,
                                                        arguments, missing, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed
    assert main(arguments) == 2
    assert capsys.readouterr().err == message
    assert not list(tmp_path.iterdir())  # failed before writing or running anything


def test_the_installed_command_runs_without_starting_the_cdk():
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "compiled_training.cli",
                             "advise", str(WORKLOADS), "--json"],
                            capture_output=True, text=True, check=True)
    assert "aws_cdk" not in result.stderr and "jsii" not in result.stderr


@pytest.mark.parametrize(("content", "message"), [
    ("workloads: [\n  - name: a\n  framework: [", r"malformed YAML at line \d+"),
    ("workloads:\n  - name: bert\n    framework: pytorch\n", r"workload 'bert': missing field 'model_family'"),
    (WORKLOADS.read_text().replace("ml.m6i.12xlarge", "ml.m99.huge"),
     r"instance_type 'ml.m99.huge' has no price in the table"),
    (WORKLOADS.read_text().replace("hours_per_run: 6.2", "hours_per_run: -6.2"),
     r"workload 'document-classification': hours_per_run must be positive, got -6.2"),
    (WORKLOADS.read_text().replace("instance_count: 8\n", "instance_count: eight\n", 1),
     r"workload 'document-classification': field 'instance_count' must be int, got 'eight'"),
    ("[]", r"expected a list of workloads"),
])
def test_fails_on_bad_input_with_one_line_and_exit_code_2(tmp_path, content, message):
    path = tmp_path / "w.yaml"
    path.write_text(content)
    result = subprocess.run([sys.executable, "-m", "compiled_training.cli", "advise", str(path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(message, result.stderr), result.stderr
