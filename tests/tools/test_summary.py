"""The synth summary: stacks, pipelines, compiler settings, templates, next start times."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

from compiled_training.tools.summary import main, render


def test_summary_names_every_stack_pipeline_compiler_and_template(reference_assembly):
    text = render(Path(reference_assembly.directory), now=datetime(2026, 11, 22, tzinfo=timezone.utc))
    for stack in ("DocumentClassification", "Creative", "Tabular"):
        assert f"{stack}.template.json" in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert any(row.endswith("Training Compiler pytorchxla 8 x ml.g5.48xlarge") for row in rows)
    assert any(row.endswith("XGBoost 1.7-1 none none 1 x ml.m6i.12xlarge") for row in rows)
    assert any(row.startswith("Creative Creative-Benchmark-") and row.endswith(
        "A/B: Training Compiler vs none pytorchxla / torch_distributed 16 x ml.g5.12xlarge "
        "per arm") for row in rows)
    assert ("DocumentClassification: cron(0 1 ? * MON,WED,FRI *) Europe/Berlin; next: "
            "Mon 23 Nov 01:00, Wed 25 Nov 01:00, Fri 27 Nov 01:00, Mon 30 Nov 01:00, "
            "Wed 02 Dec 01:00") in text
    assert "cdk-nag: AwsSolutions: success" in text
    assert len(text.splitlines()) <= 24  # one screen


def test_summary_without_an_assembly_says_what_to_run(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "run 'npx cdk synth' first" in capsys.readouterr().err


def test_an_app_no_pack_checked_is_not_called_clean(reference_assembly, tmp_path):
    copied = tmp_path / "cdk.out"
    shutil.copytree(reference_assembly.directory, copied)
    assert "cdk-nag: AwsSolutions: success" in render(copied)  # its twin: the packs ran
    (copied / "validation-report.json").unlink()  # as an app without validation plugins
    (line,) = [line for line in render(copied).splitlines() if line.startswith("cdk-nag:")]
    assert line.startswith("cdk-nag: no pack ran, so nothing was checked; add them with ")
