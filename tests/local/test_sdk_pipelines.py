"""``compiled-training run --definition`` on pipelines this repository did not design: built
with the SageMaker SDK v2 after AWS's samples and the SDK's own workflow tests
(`tests.local.sdk_pipelines`). Every pipeline that succeeds has a twin whose script fails.

What stands in for AWS: moto (the SDK's uploads, and the run's S3, registry and endpoint); the
jobs run their scripts in this checkout's Python (scikit-learn, XGBoost and PyTorch images
alike), each in its own mount namespace where ``/opt/ml`` is its folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.local import sdk_pipelines
from tests.local.sdk_pipelines import JOBS, Built


def _run(built: Built, work: Path, *more: str, env: dict[str, str] | None = None,
         cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    definition = work.parent / f"{work.name}-definition.json"
    definition.write_text(json.dumps(built.definition))
    report = work.parent / f"{work.name}-report.json"
    result = subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", "--definition",
         str(definition), *built.arguments, *more, "--workdir", str(work),
         "--json", str(report)], capture_output=True, text=True, timeout=600, check=False,
        env=env, cwd=cwd)
    return result, json.loads(report.read_text()) if report.is_file() else {}


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {step["name"]: step["status"] for step in report["steps"]}


EXPECTED = {
    "abalone": {"Preprocess": "Succeeded", "Train": "Succeeded", "Evaluate": "Succeeded",
                "MseGate": "Succeeded", "TooInaccurate": "Skipped",
                "Register-RepackModel": "Succeeded", "Register-RegisterModel": "Succeeded"},
    "framework_processor": {"Split": "Succeeded", "Publish": "Succeeded"},
    "parameterized_code": {"TrainXgboost": "Succeeded", "Decide": "Succeeded"},
    "pytorch_script": {"TrainTorch": "Succeeded", "RegisterUnversioned-RegisterModel":
                       "Succeeded"},
}
FAILING_STEP = {"abalone": "Evaluate", "framework_processor": "Publish",
                "parameterized_code": "TrainXgboost", "pytorch_script": "TrainTorch"}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_a_pipeline_built_with_the_sdk_runs_every_step(tmp_path, name):
    builder, _ = JOBS[name]
    built = builder(tmp_path)

    result, report = _run(built, tmp_path / "work")

    assert result.returncode == 0, result.stdout + result.stderr
    assert _statuses(report) == EXPECTED[name]
    assert "Traceback" not in result.stderr
    assert report["pipeline"] == "work-definition"
    assert report["named"] == "named after the file work-definition.json: --name names it"
    s3 = tmp_path / "work" / "s3" / sdk_pipelines.BUCKET
    if name == "abalone":  # the property file's value decided the branch
        evaluation = next(s3.glob("**/evaluation/evaluation.json"))
        assert json.loads(evaluation.read_text())["regression_metrics"]["mse"]["value"] > 0
        package = {s["name"]: s for s in report["steps"]}["Register-RegisterModel"]
        assert package["outputs"]["ModelPackageArn"] == (
            "arn:aws:sagemaker:eu-west-1:123456789012:model-package/diabetes-models/1")
    if name == "framework_processor":  # the job's own boto3 call reached the run's S3
        assert json.loads((s3 / "published" / "rows.json").read_text()) == {"rows": 442}
    if name == "pytorch_script":  # archived from SM_MODEL_DIR; checkpoints synced to S3
        model = {s["name"]: s for s in report["steps"]}["TrainTorch"]["outputs"][
            "ModelArtifacts"]["S3ModelArtifacts"]
        with tarfile.open(tmp_path / "work" / "s3" / model.removeprefix("s3://")) as archive:
            assert archive.getnames() == ["model.pt"]
        assert (s3 / "checkpoints" / "torch" / "last.pt").is_file()
        assert report["steps"][0]["image"] == "pytorch-training:2.6.0-gpu-py312"


@pytest.mark.parametrize("name", sorted(JOBS))
def test_fails_where_the_pipelines_script_fails_naming_the_step_and_its_reason(tmp_path, name):
    builder, script = JOBS[name]
    built = builder(tmp_path, failing=script)

    result, report = _run(built, tmp_path / "work")

    assert result.returncode == 1, result.stdout + result.stderr
    step = FAILING_STEP[name]
    statuses = _statuses(report)
    assert statuses[step] == "Failed"
    assert report["failure"].startswith(f"step {step} failed: AlgorithmError: ")
    assert f"boom: {script} was told to fail" in report["failure"]
    if step in ("Evaluate", "Publish"):  # a processing job's reason is its exit message
        assert f"AlgorithmError: ExitMessage: {script} was told to fail (exit code 1" in \
            report["failure"]
    assert set(statuses) == set(EXPECTED[name])  # every step in the table
    after = list(statuses)[list(statuses).index(step) + 1:]
    assert all(statuses[other] in ("Not reached", "Skipped") for other in after), statuses
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("builder", "status", "failure"), [
    (sdk_pipelines.fail_with_string, "Failed", "Failed due to hitting in else branch"),
    (sdk_pipelines.fail_with_parameter, "Failed", "Failed due to hitting in else branch"),
    (sdk_pipelines.fail_without_message, "Failed", ""),
])
def test_the_sdks_fail_steps_end_the_execution_as_its_integration_tests_expect(
        tmp_path, builder, status, failure):
    # tests/integ/sagemaker/workflow/test_fail_steps.py: CondStep Succeeded, FailStep Failed
    # with the message as its FailureReason.
    result, report = _run(builder(tmp_path), tmp_path / "work")
    assert result.returncode == 1
    assert _statuses(report) == {"CondStep": "Succeeded", "FailStep": status}
    assert report["failure"] == f"step FailStep failed: {failure}"


def test_the_sdks_fail_step_with_a_join_reads_the_conditions_outcome(tmp_path):
    result, report = _run(sdk_pipelines.fail_with_join(tmp_path), tmp_path / "work")
    assert result.returncode == 1
    assert report["failure"] == "step FailStep failed: Failed due to xxx == yyy returns: false"


def test_fails_before_anything_runs_on_a_step_that_depends_on_a_fail_step(tmp_path):
    # SageMaker refuses the definition at CreatePipeline: "CondStep can not depends on
    # FailStep" (the SDK's test_invalid_pipeline_depended_on_fail_step).
    result, _ = _run(sdk_pipelines.depends_on_fail(tmp_path), tmp_path / "work")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "compiled-training run: step CondStep depends on FailStep, a Fail step: SageMaker "
        "refuses this definition (a Fail step ends the execution); drop FailStep from its "
        "DependsOn")
    assert not (tmp_path / "work").exists()


def test_fails_before_anything_runs_on_a_step_that_depends_on_a_step_it_lacks(tmp_path):
    # SageMaker refuses it at CreatePipeline (v3's FailStep docstring says as much); the SDK's
    # own pipeline, its condition made to depend on a step the definition does not have.
    built = sdk_pipelines.fail_with_join(tmp_path)
    built.definition["Steps"][0]["DependsOn"] = ["Preprocess"]
    result, _ = _run(built, tmp_path / "work")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "compiled-training run: step CondStep depends on Preprocess, which the pipeline does "
        "not have: SageMaker refuses this definition; name steps it has in DependsOn")
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize(("given", "refusal"), [
    (["--param", "Mode=medium"], "--param Mode: 'medium' is not one of its EnumValues (fast, "
                                 "slow), which SageMaker holds a run to"),
    ([], "parameter Mode's default: 'turbo' is not one of its EnumValues (fast, slow), which "
         "SageMaker holds a run to"),
    (["--param", "Mode=slow"], None),  # the twin: a value it allows runs
])
def test_a_parameter_value_outside_its_enum_values_is_refused_before_anything_runs(
        tmp_path, given, refusal):
    # As SDK v3 writes a ParameterString with enum_values (v2 has no such argument).
    built = sdk_pipelines.fail_with_join(tmp_path)
    built.definition["Parameters"].append({
        "Name": "Mode", "Type": "String", "DefaultValue": "turbo" if not given else "fast",
        "EnumValues": ["fast", "slow"]})
    result, report = _run(built, tmp_path / "work", *given)
    if refusal is None:
        assert result.returncode == 1, result.stderr  # it ran: the pipeline always fails
        assert report["failure"].startswith("step FailStep failed: ")
    else:
        assert result.returncode == 2
        assert result.stderr.strip() == f"compiled-training run: {refusal}"
        assert not (tmp_path / "work").exists()


def test_fails_before_anything_runs_naming_each_step_that_cannot_run_here(tmp_path):
    result, _ = _run(sdk_pipelines.refused_kinds(tmp_path), tmp_path / "work")

    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("compiled-training run: step TrainTensorflow runs a TensorFlow image "
                           "(tensorflow-training:2.14-cpu-py310), whose launcher is not "
                           "emulated here; give its properties with --outputs "
                           "TrainTensorflow=FILE; ")
    assert ("step QueryAthena: input rows is a DatasetDefinition (Athena or Redshift), which "
            "does not exist here; give its properties with --outputs QueryAthena=FILE") in line
    assert ("step OwnEntrypoint runs an image of your own (team-etl:1) with no script or entry "
            "point named: its own program does not exist here") in line
    assert line.endswith("step Score: step type 'Transform' does not run locally; give its "
                         "properties with --outputs Score=FILE")
    assert not (tmp_path / "work").exists()


def test_a_lambda_step_of_a_definition_needs_its_code_before_anything_runs(tmp_path):
    built = sdk_pipelines.parameterized_code(tmp_path)
    built.arguments = built.arguments[:-2]  # without --lambda

    result, _ = _run(built, tmp_path / "work")

    assert result.returncode == 2
    assert result.stderr.strip() == (
        "compiled-training run: step Decide: a Lambda step of a definition file needs its "
        "code: give --lambda Decide=DIR:module.function, or its properties with --outputs "
        "Decide=FILE")


def test_fails_naming_the_data_flag_when_the_runs_s3_lacks_the_code(tmp_path):
    built = sdk_pipelines.parameterized_code(tmp_path)
    built.arguments = built.arguments[2:]  # without the code's --data

    result, report = _run(built, tmp_path / "work")

    assert result.returncode == 1
    code = f"s3://{sdk_pipelines.BUCKET}/team-code/sourcedir.tar.gz"
    assert report["failure"] == (f"step TrainXgboost failed: no object at {code}; put it in the "
                                 f"run's S3 with --data {code}=LOCAL_PATH")


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if "__pycache__" not in p.parts}


def test_two_runs_at_once_do_not_collide_and_write_nothing_outside_their_workdirs(tmp_path):
    built = sdk_pipelines.framework_processor(tmp_path / "pipeline")
    home, temp, here = (tmp_path / name for name in ("home", "tmp", "cwd"))
    for folder in (home, temp, here):
        folder.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(temp)}
    import compiled_training

    package = Path(compiled_training.__file__).parent
    watched = {"/opt": Path("/opt"), "source_dir": tmp_path / "pipeline" / "scripts",
               "package": package}
    before = {name: _files(folder) for name, folder in watched.items()}

    runs = []
    for index in (1, 2):
        definition = tmp_path / f"definition-{index}.json"
        definition.write_text(json.dumps(built.definition))
        runs.append(subprocess.Popen(
            [sys.executable, "-m", "compiled_training.tools.cli", "run", "--definition",
             str(definition), *built.arguments, "--workdir", str(tmp_path / f"work{index}")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=here))
    outputs = [run.communicate(timeout=600)[0] for run in runs]

    assert [run.returncode for run in runs] == [0, 0], outputs
    for index in (1, 2):
        published = tmp_path / f"work{index}" / "s3" / sdk_pipelines.BUCKET / "published"
        assert json.loads((published / "rows.json").read_text()) == {"rows": 442}
    assert not any(home.iterdir()) and not any(temp.iterdir()) and not any(here.iterdir())
    assert {name: _files(folder) for name, folder in watched.items()} == before


def test_without_a_mount_namespace_processing_is_refused_up_front_and_training_runs(tmp_path):
    """An ``unshare`` that cannot make a namespace (as where mounting is not allowed) stands
    first on PATH: the run says so in one line and refuses the steps that name /opt/ml."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "unshare").write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not "
                                  "permitted' >&2\nexit 1\n")
    (fake / "unshare").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}

    processing, _ = _run(sdk_pipelines.framework_processor(tmp_path / "p"), tmp_path / "w1",
                         env=env)
    assert processing.returncode == 2
    assert processing.stderr.strip() == (
        "compiled-training run: step Split: its container names /opt/ml/processing, which this "
        "machine cannot lay over /opt for the job; give its properties with --outputs "
        "Split=FILE; step Publish: its container names /opt/ml/processing, which this machine "
        "cannot lay over /opt for the job; give its properties with --outputs Publish=FILE")

    training, report = _run(sdk_pipelines.parameterized_code(tmp_path / "t"), tmp_path / "w2",
                            env=env)
    assert training.returncode == 0, training.stdout + training.stderr
    assert training.stderr.splitlines()[0] == (
        "compiled-training run: jobs cannot get their own /opt/ml here (unshare could not lay "
        "/opt/ml over /opt: unshare: unshare failed: Operation not permitted), so training runs "
        "through SAGEMAKER_BASE_DIR and a script that names /opt/ml itself fails, and /tmp, "
        "/var/tmp and /dev/shm are this machine's, shared by the jobs. Run as root, or allow "
        "unprivileged user namespaces, to lift this.")
    assert _statuses(report) == EXPECTED["parameterized_code"]


def test_building_a_pipeline_leaves_no_stand_in_credentials_in_the_test_process(tmp_path):
    # Left behind, they reached later tests' subprocesses: the CDK CLI looked up the account
    # with them and printed the AWS SDK's Node version warning into a synth that must be quiet.
    before = {key: os.environ.get(key) for key in sdk_pipelines.SDK_ENVIRONMENT}
    sdk_pipelines.fail_with_join(tmp_path)
    assert {key: os.environ.get(key) for key in sdk_pipelines.SDK_ENVIRONMENT} == before
