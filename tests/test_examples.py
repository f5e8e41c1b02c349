"""examples/team-app: a team's own app and entry point, as the README points newcomers to.

Synthesized as a user runs it (its own process, its own cdk.json's flags) through the same
validators as the reference platform; its ``train.py`` trained as SageMaker launches it: the
real training toolkit with the PyTorch DLCs' launcher logic, under torchrun with two ranks on
this CPU (a stand-in ``nvidia-smi`` gives the toolkit its GPU count; gloo stands in for NCCL),
on scikit-learn's bundled digits.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from compiled_training_runtime import contract
from compiled_training_runtime.local import digits, job_folder
from tests.helpers import (
    ROOT,
    cfn_lint,
    definitions,
    substitute_expressions,
    synth_example,
)
from tests.runtime.harness import run_with_toolkit

EXAMPLE = ROOT / "examples" / "team-app"


@pytest.fixture(scope="module")
def example_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example synthesized in its own process, as ``cdk synth`` runs it."""
    return synth_example(EXAMPLE, tmp_path_factory.mktemp("example.out"))


def _template(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "RankingTraining.template.json").read_text()))


def test_its_cdk_json_carries_every_flag_the_pinned_cdk_recommends():
    import aws_cdk

    jsii = Path(aws_cdk.__file__).parent / "_jsii"
    (bundle,) = jsii.glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        recommended = json.loads(member.read())
    assert json.loads((EXAMPLE / "cdk.json").read_text())["context"] == recommended


def test_the_example_synthesizes_clean(example_out):
    template_path = example_out / "RankingTraining.template.json"
    assert cfn_lint(str(template_path)) == []
    report = json.loads((example_out / "validation-report.json").read_text())
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    assert {name: p["conclusion"] for name, p in plugins.items()} == {
        "AwsSolutions": "success", "CompiledTraining": "success"}
    # The pack ran and found nothing: its summary line says so.
    assert [v["ruleName"] for v in plugins["CompiledTraining"]["violations"]] == [
        "CompiledTraining-Summary"]
    # No synth warning was left to acknowledge (no idle GPU, no folder-like channel URI).
    metadata = json.loads((example_out / "RankingTraining.metadata.json").read_text())
    assert not [entry for entries in metadata.values() for entry in entries
                if entry["type"] == "aws:cdk:warning"]


def test_its_entry_point_trains_under_torchrun_as_the_pipeline_launches_it(example_out,
                                                                          tmp_path):
    (definition,) = definitions(_template(example_out))
    defaults = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
    (step,) = [s for s in definition["Steps"] if s["Type"] == "Training"]
    arguments = substitute_expressions(step["Arguments"], defaults)
    hyperparameters = dict(arguments["HyperParameters"])
    assert hyperparameters[contract.HP_TORCH_DISTRIBUTED] == "true"
    # The script imports nothing of the library's: the runtime's launcher goes in front of it,
    # and the switches are in the environment.
    assert hyperparameters["sagemaker_program"] == json.dumps(contract.LAUNCHER)
    assert arguments["Environment"][contract.ENV_ENTRY_POINT] == "train.py"
    assert arguments["Environment"][contract.ENV_TORCH_COMPILE] == "true"
    # The code archive the pipeline uploads: train.py, and the runtime beside it.
    (code,) = example_out.glob("asset.*.tar.gz")
    with tarfile.open(code) as archive:
        assert {"train.py", contract.LAUNCHER} <= set(archive.getnames())
    hyperparameters["sagemaker_submit_directory"] = json.dumps(str(code))
    # Fewer steps than the pipeline's 3 epochs; everything else as the pipeline sends it.
    hyperparameters.update(max_steps="40", log_every="10", checkpoint_every="20")
    train, validation = digits()
    base = job_folder(tmp_path / "opt_ml", hyperparameters, train=train, validation=validation)

    # The job's environment, its compile cache's S3 prefix moved to a folder (no S3 here).
    environment = {**arguments["Environment"],
                   contract.ENV_COMPILE_CACHE_URL: f"file://{tmp_path}/compile-cache/"}
    assert arguments["Environment"][contract.ENV_COMPILE_CACHE_URL].endswith(
        "/ltr-ranker/compile-cache/Train/")

    result = run_with_toolkit(base, gpus=2, environment=environment)

    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-6000:]
    assert re.search(r"torchrun --nnodes 1 --nproc_per_node 2 "
                     r"compiled_training_runtime/launch\.py ", logs)
    # The compiler switch reached the script, which compiled its step with the job's settings;
    # the launcher saved what it compiled for the next run, once (rank 0, after both ranks).
    assert "compiling the step with torch.compile (mode=default, backend=inductor)" in logs
    assert logs.count("compiled-training: compile cache: saved ") == 1, logs[-6000:]
    summary = json.loads((base / "output" / "data" / contract.COMPILE_CACHE_SUMMARY_FILE
                          ).read_text())
    assert summary["state"] == "cold" and summary["graphs_compiled"] > 0, (summary, logs[-3000:])
    assert list((tmp_path / "compile-cache").rglob("*.tar.gz"))
    # SageMaker's metric extraction: each declared regex over the logs, the last match final.
    declared = {m["Name"]: m["Regex"] for m in arguments["AlgorithmSpecification"][
        "MetricDefinitions"]}
    final = {name: float(re.findall(regex, logs)[-1]) for name, regex in declared.items()}
    assert set(final) == set(contract.METRIC_NAMES)
    # The gate compares validation_accuracy: digits are learnt well past chance in 40 steps.
    assert final["validation_accuracy"] > 0.5
    assert (base / "model" / "model.pt").is_file()
    assert (base / "checkpoints" / "checkpoint.pt").is_file()
    # Rank 0 alone reports: one final line, not one a rank.
    assert len(re.findall(declared["validation_accuracy"], logs)) == 1


def _torchrun(hyperparameters: dict[str, str]) -> list[str]:
    """The example's script under torchrun with two ranks, its hyperparameters as SageMaker's
    toolkit passes them (``--name value``)."""
    from tests.runtime.harness import free_port

    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
            "--master_addr=127.0.0.1", f"--master_port={free_port()}",
            str(EXAMPLE / "training" / "train.py"),
            *[arg for name, value in hyperparameters.items() for arg in (f"--{name}", value)]]


def test_its_entry_point_checkpoints_on_sigterm_and_resumes(tmp_path):
    """A spot interruption: SIGTERM to every process of a two-rank torchrun job (as SageMaker
    signals the container); the ranks agree to stop, rank 0 checkpoints, the job exits; the
    restarted job resumes from that step instead of step 0."""
    import signal

    import torch

    from compiled_training_runtime.local import job_env

    hyperparameters = {"max_steps": "400", "log_every": "5", "checkpoint_every": "1000",
                       "batch_size": "16"}
    train, validation = digits()
    base = job_folder(tmp_path / "opt_ml", hyperparameters, train=train, validation=validation)
    process = subprocess.Popen(_torchrun(hyperparameters), env=job_env(base, hyperparameters),
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    assert process.stdout is not None
    for line in process.stdout:
        if "[metrics] step=10 " in line:
            os.killpg(process.pid, signal.SIGTERM)  # the container's processes, all at once
            break
    logs = process.stdout.read()
    assert process.wait(timeout=300) != 0, logs
    checkpoint = base / "checkpoints" / "checkpoint.pt"
    stopped_at = torch.load(checkpoint)["step"]  # saved at the step the ranks agreed on
    assert 10 <= stopped_at < 400
    assert "validation_accuracy" not in logs  # stopped, not finished

    hyperparameters["max_steps"] = str(stopped_at + 5)
    resumed = subprocess.run(_torchrun(hyperparameters), env=job_env(base, hyperparameters),
                             capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # Five steps after the checkpoint, not 400 from the start: one logged step, then the end.
    assert re.findall(r"\[metrics\] step=(\d+) train_loss", resumed.stdout) == [
        str(stopped_at + 5)]
    assert "validation_accuracy=" in resumed.stdout


def test_its_pipeline_runs_locally_in_the_stacks_account(example_out, tmp_path):
    """compiled-training run on the example's assembly, its training step given (the gate and
    the registration run): the version is made in the stack's account, as the template's
    references are, not in the stand-in AWS's default one."""
    given = tmp_path / "train.json"
    given.write_text(json.dumps({
        "TrainingJobName": "train-given", "ModelArtifacts": {
            "S3ModelArtifacts": "s3://acme-ltr-data/models/model.tar.gz"},
        "FinalMetricDataList": [{"MetricName": "validation_accuracy", "Value": 0.92},
                                {"MetricName": "validation_loss", "Value": 0.3}]}))
    result = subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(example_out),
         "--pipeline", "ltr-ranker", "--outputs", f"Train={given}",
         "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = {s["name"]: s for s in json.loads((tmp_path / "report.json").read_text())["steps"]}
    assert steps["RegisterModel"]["outputs"]["ModelPackageArn"] == (
        "arn:aws:sagemaker:us-east-1:111122223333:model-package/ltr-ranker/1")
