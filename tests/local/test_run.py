"""``compiled-training run``: the reference platform's pipelines executed whole on this machine.

Each run is the installed command in its own process, on the assembly the reference app
synthesizes. What stands in for AWS: moto's in-process S3, SSM and SageMaker registry (the one
S3 every step and handler sees), an ``nvidia-smi`` listing ``--processes`` GPUs, AWS's
``xla_spawn`` (the runner's stand-in), and one host for the instances. The training steps run
SageMaker's training toolkit with the PyTorch DLCs' launcher logic, on a tiny BERT (``--set``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compiled_training_runtime.local import write_examples
from tests.environments import XLA_WITH_GRAD_SCALER, require
from tests.helpers import TINY_BERT

TINY = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}
DOCUMENTS = "DocumentClassification/Pipeline"
DATA = "s3://example-document-classification-data/bert"


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    # Python may write bytecode, as on a user's machine: the handlers' imports must not leave
    # it in the assembly.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", "run",
                           *arguments], capture_output=True, text=True, timeout=900,
                          check=False, env=env)


def _tiny(step: str, **more: Any) -> list[str]:
    """``--set`` for a tiny model that trains in seconds on this CPU."""
    values = {**TINY, "max_steps": 4, "log_every": 2, **more}
    return [arg for name, value in values.items() for arg in ("--set", f"{step}.{name}={value}")]


def _data(tmp_path: Path, prefix: str) -> list[str]:
    write_examples(tmp_path / "train", 64, seed=0)
    write_examples(tmp_path / "validation", 16, seed=1)
    return ["--data", f"{prefix}/train/={tmp_path / 'train'}",
            "--data", f"{prefix}/validation/={tmp_path / 'validation'}"]


def _report(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _assembly_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def assembly(reference_assembly) -> Path:
    return Path(reference_assembly.directory)


def test_document_classification_trains_passes_its_gate_and_registers(assembly, tmp_path):
    # The team trains fp16 under XLA: torch-xla 2.8 has the GradScaler (as `make test-envs`
    # builds it), so the training step runs in that environment's Python.
    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    before = _assembly_digest(assembly)

    result = _run(str(assembly), "--pipeline", DOCUMENTS, "--python", python,
                  *_data(tmp_path, DATA), *_tiny("Train"), "--param", "MinValidationAccuracy=0.1",
                  "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json"))

    assert result.returncode == 0, result.stdout + result.stderr
    report = _report(tmp_path / "report.json")
    steps = {step["name"]: step for step in report["steps"]}
    assert [(s["name"], s["status"]) for s in report["steps"]] == [
        ("Train", "Succeeded"), ("ModelMetrics", "Succeeded"), ("QualityGate", "Succeeded"),
        ("QualityGateFailed", "Skipped"), ("RegisterModel", "Succeeded")]
    # The metrics SageMaker would extract with the step's own regexes, read by the gate.
    metrics = steps["Train"]["outputs"]["FinalMetricDataList"]
    assert set(metrics) == {"train_loss", "samples_per_second", "validation_loss",
                            "validation_accuracy"}
    assert steps["QualityGate"]["outputs"]["Outcome"] is True
    # The team's RuntimeImage, not built here: named as the custom image the job stood in for.
    assert steps["Train"]["image"].startswith("runtimeimage")
    assert steps["Train"]["image"].endswith(":local (custom)")
    # The version, in the stand-in registry, with the model the training step packed.
    package = steps["RegisterModel"]["outputs"]
    assert package["ModelPackageArn"].endswith(":model-package/document-classification-bert/1")
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    model = steps["Train"]["outputs"]["ModelArtifacts"]["S3ModelArtifacts"]
    bucket, key = model.removeprefix("s3://").split("/", 1)
    assert (tmp_path / "work" / "s3" / bucket / key).is_file()
    # The Lambda step's report, written by the handler from the assembly into the same S3.
    statistics = steps["ModelMetrics"]["outputs"]["OutputParameters"]["statistics"]
    report_path = tmp_path / "work" / "s3" / statistics.removeprefix("s3://")
    accuracy = json.loads(report_path.read_text())["binary_classification_metrics"]["accuracy"]
    assert accuracy["value"] == metrics["validation_accuracy"]["Value"]
    # The definition's own hyperparameters overridden; those it does not have, told apart.
    (overridden,) = [n for n in report["notes"] if n.startswith("Train: hyperparameters overr")]
    assert "batch_size=4" in overridden.split(": ", 2)[2].split(", ")
    (added,) = [n for n in report["notes"] if n.startswith("Train: hyperparameters the defin")]
    assert added.startswith("Train: hyperparameters the definition does not have, added for "
                            "this run (--set; check their spelling): ")
    assert "max_steps=4" in added.split(": ", 1)[1].split(", ")
    assert "Train.ProfilerConfig" in report["not_emulated"]
    assert _assembly_digest(assembly) == before  # nothing in the assembly is changed
    # The job's and the runner's S3 calls for it, decided as its execution role's.
    (roles,) = [n for n in report["notes"] if n.startswith("roles checked: ")]
    decided = int(roles.split()[2])
    assert decided >= 8 and " calls decided (0 denied): " in roles


def test_a_gate_it_cannot_pass_fails_the_execution_with_its_message(assembly, tmp_path):
    python = str(require(XLA_WITH_GRAD_SCALER).executable)

    result = _run(str(assembly), "--pipeline", DOCUMENTS, "--python", python,
                  *_data(tmp_path, DATA), *_tiny("Train"), "--param", "MinValidationAccuracy=1.0",
                  "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json"))

    # 1.0 is the most an accuracy allows (1.01 stops the run before it starts): 16 random
    # labels all right after 4 steps does not happen with these seeds.
    assert result.returncode == 1, result.stdout + result.stderr
    report = _report(tmp_path / "report.json")
    assert report["status"] == "Failed"
    assert report["failure"].startswith("step QualityGateFailed failed: Model not registered: "
                                        "validation_accuracy ")
    assert report["failure"].endswith(" is below the threshold MinValidationAccuracy 1.0")
    assert "RegisterModel" in {s["name"] for s in report["steps"] if s["status"] == "Skipped"}
    assert "QualityGateFailed (Fail): Failed" in result.stdout


def test_the_creative_pipeline_trains_under_torchrun_on_two_ranks(assembly, tmp_path):
    # The team's own model comes from its model_factory: overridden with one the runtime builds.
    result = _run(str(assembly), "--pipeline", "Creative/Pipeline", "--processes", "2",
                  *_data(tmp_path, "s3://example-creative-data/images"),
                  *_tiny("Train", model_factory='""', model_family="bert"),
                  "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json"))

    assert result.returncode == 0, result.stdout + result.stderr
    log = (tmp_path / "work" / "steps" / "Train" / "training.log").read_text()
    assert "torchrun --nnodes 1 --nproc_per_node 2 train.py" in log
    summary = json.loads((tmp_path / "work" / "steps" / "Train" / "opt_ml" / "output" / "data"
                          / "metrics.json").read_text())
    assert summary["world_size"] == 2


def _changed(assembly: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the assembly with ``change`` made to the DocumentClassification template."""
    copy = tmp_path / "cdk.out"
    shutil.copytree(assembly, copy)
    template = copy / "DocumentClassification.template.json"
    changed = json.loads(template.read_text())
    change(changed["Resources"])
    template.write_text(json.dumps(changed))
    return copy


def _statements(resources: dict[str, Any]) -> list[dict[str, Any]]:
    """The execution role's statements."""
    role = resources["PipelineExecutionRoleA23949A9"]["Properties"]
    return list(role["Policies"][0]["PolicyDocument"]["Statement"])


def _without_output_prefix(resources: dict[str, Any]) -> None:
    role = resources["PipelineExecutionRoleA23949A9"]["Properties"]
    role["Policies"][0]["PolicyDocument"]["Statement"] = [
        s for s in _statements(resources) if "s3:PutObject" not in s["Action"]]


def _outputs_under_a_key(resources: dict[str, Any]) -> None:
    """The output bucket encrypted with a key of the stack that the role was not given."""
    resources["TrainingOutputs2E2B6C5F"]["Properties"]["BucketEncryption"] = {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {
                "Fn::GetAtt": ["CompiledTrainingImageBuilderKey52A9A7B6", "Arn"]}}}]}


@pytest.mark.parametrize("change, action, resource", [
    (_without_output_prefix, "s3:PutObject",
     "arn:aws:s3:::trainingoutputs2e2b6c5f/DocumentClassification-Pipeline-"),
    (_outputs_under_a_key, "kms:GenerateDataKey",
     "arn:aws:kms:us-east-1:123456789012:key/CompiledTrainingImageBuilderKey52A9A7B6"),
], ids=["output-prefix", "bucket-key"])
def test_a_role_that_cannot_write_its_outputs_fails_the_step_with_access_denied(
        assembly, tmp_path, change, action, resource):
    """The twins of the reference run: AWS's AccessDenied, as the runner's upload of the job's
    checkpoints meets it (SageMaker syncs them as the role), before any model is written."""
    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    changed = _changed(assembly, tmp_path, change)

    result = _run(str(changed), "--pipeline", DOCUMENTS, "--python", python,
                  *_data(tmp_path, DATA), *_tiny("Train", max_steps=1),
                  "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json"))

    assert result.returncode == 1, result.stdout + result.stderr
    failure = _report(tmp_path / "report.json")["failure"]
    assert failure.startswith(
        "step Train failed: ClientError: AccessDenied: User: arn:aws:sts::123456789012:"
        "assumed-role/PipelineExecutionRoleA23949A9/SageMaker is not authorized to perform: "
        f"{action} on resource: \"{resource}"), failure
    assert failure.endswith(f"because no identity-based policy allows the {action} action")
    assert "Traceback" not in result.stdout + result.stderr


def test_a_built_in_algorithm_is_refused_then_runs_from_its_given_outputs(assembly, tmp_path):
    refused = _run(str(assembly), "--pipeline", "Tabular/Pipeline",
                   "--workdir", str(tmp_path / "work"))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "compiled-training run: step Train runs a built-in algorithm (sagemaker-xgboost:1.7-1), "
        "whose container does not exist here; give its properties with --outputs Train=FILE"]

    outputs = tmp_path / "train.json"
    # As DescribeTrainingJob lists a finished job's metrics.
    outputs.write_text(json.dumps({
        "TrainingJobName": "xgboost-given",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://given-models/xgboost/model.tar.gz"},
        "FinalMetricDataList": [{"MetricName": "validation:auc", "Value": 0.91}]}))
    result = _run(str(assembly), "--pipeline", "Tabular/Pipeline", "--outputs",
                  f"Train={outputs}", "--workdir", str(tmp_path / "work"), "--no-roles",
                  "--json", str(tmp_path / "report.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    report = _report(tmp_path / "report.json")
    assert "roles not checked: --no-roles" in report["notes"]
    assert [(s["name"], s["status"]) for s in report["steps"]][-1] == ("RegisterModel",
                                                                       "Succeeded")
    assert report["steps"][0] == {**report["steps"][0], "name": "Train", "status": "Given"}


def test_what_cannot_run_here_is_refused_naming_the_step_before_anything_runs(assembly,
                                                                            tmp_path):
    trainium = _run(str(assembly), "--pipeline", "DocumentClassification/Benchmark",
                    "--workdir", str(tmp_path / "work"))
    assert trainium.returncode == 2
    assert trainium.stderr.strip().splitlines() == ["compiled-training run: " + "; ".join(
        f"step {step} trains on Trainium (ml.trn1.32xlarge): NeuronCores and neuronx-cc do not "
        f"exist here (the tests' stand-ins for them stay in the tests); give its properties "
        f"with --outputs {step}=FILE" for step in ("PrecompileTrainium", "TrainTrainium"))]
    assert not (tmp_path / "work" / "steps").exists()

    definition = tmp_path / "transform.json"
    definition.write_text(json.dumps({"Version": "2020-12-01", "Parameters": [], "Steps": [
        {"Name": "Score", "Type": "Transform", "Arguments": {}}]}))
    transform = _run("--definition", str(definition), "--workdir", str(tmp_path / "work"))
    assert transform.returncode == 2
    assert transform.stderr.strip() == (
        "compiled-training run: step Score: step type 'Transform' does not run locally; "
        "give its properties with --outputs Score=FILE")


@pytest.mark.parametrize(("arguments", "message"), [
    (["--pipeline", "Nope"], r"--pipeline 'Nope' is no pipeline of the assembly; the assembly "
                             r"has: Creative-Benchmark-\w+ \(Creative/Benchmark\); "),
    ([], r"name a pipeline with --pipeline: Creative-Benchmark-"),
    (["--pipeline", DOCUMENTS, "--param", "Epochs=three"], r"--param Epochs: 'three' is not "
                                                           r"an Integer$"),
    (["--pipeline", DOCUMENTS, "--param", "Epoch=3"],
     r"--param Epoch: the pipeline declares no such parameter \(declared: Epochs, "
     r"MinValidationAccuracy, TrainDataUri, ValidationDataUri\)$"),
    (["--pipeline", DOCUMENTS, "--data", "s3://b/train/=/no/such/folder"],
     r"--data s3://b/train/=/no/such/folder: 's3://b/train/' is not an S3 URI \(s3://bucket/key\): its bucket name 'b' must be 3 to 63 characters \(it has 1\)$"),
    (["--pipeline", DOCUMENTS, "--data", "s3://team-bucket/train/=/no/such/folder"],
     r"--data s3://team-bucket/train/=/no/such/folder: no local folder or file /no/such/folder$"),
    (["--pipeline", DOCUMENTS, "--data", "team-bucket/train"], r"--data 'team-bucket/train': write S3_URI=LOCAL_DIR$"),
    (["--pipeline", DOCUMENTS, "--set", "Train.max_steps=4", "--outputs", "Train=/dev/null"],
     r"--outputs /dev/null: not JSON"),
    (["--pipeline", DOCUMENTS, "--python", "/bin/true"],
     r"--python /bin/true: not a Python 3 interpreter$"),
    (["--pipeline", DOCUMENTS, "--python", f"torch={sys.executable}"],
     r"--python torch=\S+: 'torch' is no image kind; write --python PYTHON or --python "
     r"KIND=PYTHON with KIND one of pytorch, sklearn, xgboost, custom$"),
    (["--pipeline", DOCUMENTS, "--lambda", "ModelMetrics=handler.main"],
     r"--lambda ModelMetrics=handler.main: write STEP=DIR:module.function with DIR an "
     r"existing folder$"),
    (["--pipeline", DOCUMENTS, "--lambda", "Train=/tmp:handler.main"],
     r"--lambda Train=...: Train is a Training step, not a Lambda step$"),
    (["--pipeline", DOCUMENTS, "--name", "mine"],
     r"--name names a --definition run's pipeline; an assembly's pipelines have their own "
     r"names$"),
    (["--pipeline", DOCUMENTS, "--set", "Training.max_steps=4"],
     r"step 'Training' is not in the pipeline \(steps: ModelMetrics, QualityGate, "
     r"QualityGateFailed, RegisterModel, Train\)$"),
])
def test_bad_input_is_one_line_and_exit_code_2(assembly, tmp_path, arguments, message):
    import re

    result = _run(str(assembly), *arguments, "--workdir", str(tmp_path / "work"))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert re.search(message, line), line


def test_every_step_the_training_python_cannot_run_is_named_in_one_line(assembly, tmp_path):
    from tests.environments import IMAGE_CONFIG

    python = str(require(IMAGE_CONFIG).executable)  # a Python without torch
    result = _run(str(assembly), "--pipeline", "Creative/Benchmark", "--python", python,
                  "--workdir", str(tmp_path / "work"))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("compiled-training run: step TrainBaseline needs ")
    assert f"step TrainCompiler compiles through XLA and {python} has no torch_xla; pass " \
           "--python an environment that has it (make test-envs builds " \
           ".venvs/py311-torch-xla2.8)" in line
    assert "step TrainCompilerLargeBatch " in line
    assert not (tmp_path / "work").exists()  # refused before the run made anything


def test_a_workdir_under_opt_is_refused(assembly):
    # Jobs see /opt through an overlay of their own: a workdir there would hide their writes.
    result = _run(str(assembly), "--pipeline", DOCUMENTS, "--workdir", "/opt/run")
    assert result.returncode == 2
    assert result.stderr.strip() == ("compiled-training run: --workdir /opt/run: jobs see /opt "
                                     "through an overlay of their own; give a folder outside /opt")
    assert not Path("/opt/run").exists()


def test_a_workdir_of_the_users_own_is_refused_not_cleared(assembly, tmp_path):
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "notes.txt").write_text("mine")
    result = _run(str(assembly), "--pipeline", DOCUMENTS, "--workdir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"compiled-training run: --workdir {tmp_path} holds files of its own; give an empty or "
        f"new folder (the runner clears the steps it wrote there before)")
    assert (tmp_path / "steps" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(("content", "message"), [
    ('{"FinalMetricDataList": [{"Value": 0.9}]}',
     r"FinalMetricDataList entries need a MetricName and a numeric Value, got \{'Value': 0.9\}"),
    ("[]", r"expected a JSON object of the step's properties"),
])
def test_bad_outputs_are_one_line(assembly, tmp_path, content, message):
    import re

    given = tmp_path / "train.json"
    given.write_text(content)
    result = _run(str(assembly), "--pipeline", "Tabular/Pipeline", "--outputs",
                  f"Train={given}", "--workdir", str(tmp_path / "work"))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert re.search(message, line), line


def test_a_folder_that_is_no_assembly_is_one_line(tmp_path):
    result = _run(str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"compiled-training run: {tmp_path} is not a cloud "
                                     f"assembly (no manifest.json): run `cdk synth` (or `make "
                                     f"synth`) first")


ARMS = ("TrainBaseline", "TrainCompiler", "TrainCompilerLargeBatch")
CREATIVE_DATA = "s3://example-creative-data/images"


def test_the_benchmark_runs_its_arms_compares_them_and_holds_as_sagemaker_would(assembly,
                                                                               tmp_path):
    """On this CPU the compiled arms (XLA) are slower than eager: the comparison holds, the
    decision is recorded, and the execution fails with the comparison's reason."""
    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    sets = [arg for arm in ARMS for arg in _tiny(arm, model_factory='""', model_family="bert")]

    result = _run(str(assembly), "--pipeline", "Creative/Benchmark", "--python", python,
                  *_data(tmp_path, CREATIVE_DATA), *sets, "--workdir", str(tmp_path / "work"),
                  "--json", str(tmp_path / "report.json"))

    assert result.returncode == 1, result.stdout + result.stderr
    report = _report(tmp_path / "report.json")
    assert [(s["name"], s["status"]) for s in report["steps"]] == [
        *[(arm, "Succeeded") for arm in ARMS], ("Compare", "Succeeded"),
        ("RecordDecision", "Succeeded"), ("ShipDecision", "Succeeded"),
        ("CompilerDoesNotShip", "Failed")]
    comparison = {s["name"]: s for s in report["steps"]}["Compare"]["outputs"]
    decision = comparison["PropertyFiles"]["Comparison"]["decision"]
    assert decision["verdict"] == "hold"
    assert report["failure"] == (f"step CompilerDoesNotShip failed: The compiler does not "
                                 f"ship: {decision['reason']}")
    # The decision function wrote the verdict where the team's deployments read it.
    (recorded,) = json.loads((tmp_path / "work" / "ssm.json").read_text()).values()
    assert json.loads(recorded)["verdict"] == "hold"


def test_the_benchmark_ships_on_a_given_comparison(assembly, tmp_path):
    """The ship branch, reached deterministically: the arms' and the comparison's properties
    given with --outputs (a compiled arm is not faster on this CPU); the decision function and
    the condition run as they would."""
    outputs = []
    for arm in ARMS:
        path = tmp_path / f"{arm}.json"
        path.write_text(json.dumps({"TrainingJobName": arm.lower(), "TrainingTimeInSeconds": 600,
                                    "BillableTimeInSeconds": 9600}))
        outputs += ["--outputs", f"{arm}={path}"]
    decision = {"arm": "compiler-large-batch", "basis": "wall-clock", "gain": 0.35,
                "speedup": 0.35, "global_batch_size": 48, "instance_count": 16,
                "instance_type": "ml.g5.12xlarge", "learning_rate": 7.5e-5,
                "quality_drop": 0.0, "verdict": "ship",
                "reason": "ship: compiler-large-batch is 35% faster than the baseline"}
    compare = tmp_path / "compare.json"
    compare.write_text(json.dumps({"PropertyFiles": {"Comparison": {
        "decision": decision, "thresholds": {"speedup": 0.2, "quality_tolerance": 0.01}}}}))

    result = _run(str(assembly), "--pipeline", "Creative/Benchmark", *outputs,
                  "--outputs", f"Compare={compare}", "--workdir", str(tmp_path / "work"),
                  "--json", str(tmp_path / "report.json"))

    assert result.returncode == 0, result.stdout + result.stderr
    report = _report(tmp_path / "report.json")
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["ShipDecision"]["outputs"]["Outcome"] is True
    assert steps["CompilerDoesNotShip"]["status"] == "Skipped"
    (recorded,) = json.loads((tmp_path / "work" / "ssm.json").read_text()).values()
    assert json.loads(recorded)["verdict"] == "ship"


@pytest.mark.parametrize(("minimum", "status"), [("0.1", 0), ("1.01", 1)])
def test_a_definition_the_sagemaker_sdk_builds_runs_too(tmp_path, minimum, status):
    """SDK v2 (the test oracle) builds parameters, a training step, a condition and a Fail;
    its code and data are put in the run's S3 where the definition names them."""
    from compiled_training.definition.sourcedir import write_sourcedir
    from tests.definition.sdk_oracle import sdk_gated_training_definition
    from tests.runtime.harness import RUNTIME

    code = "s3://sdk-code/team/sourcedir.tar.gz"
    definition = sdk_gated_training_definition(code, "s3://sdk-data/digits", {
        name: value for name, value in TINY.items()})
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(definition))

    result = _run("--definition", str(path), "--data", f"{code}={write_sourcedir(RUNTIME)}",
                  *_data(tmp_path, "s3://sdk-data/digits"), "--param", f"MinAccuracy={minimum}",
                  "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json"))

    assert result.returncode == status, result.stdout + result.stderr
    report = _report(tmp_path / "report.json")
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["Train"]["status"] == "Succeeded"
    assert steps["Gate"]["outputs"]["Outcome"] is (status == 0)
    if status:
        assert report["failure"].startswith("step TooInaccurate failed: validation_accuracy ")
        assert report["failure"].endswith(" is below 1.01")


def test_the_benchmark_with_a_trainium_arm_runs_to_its_end_from_the_arms_given_outputs(
        assembly, tmp_path):
    """The document-classification benchmark's Trainium arm cannot run here (NeuronCores and
    neuronx-cc do not exist; the tests' stand-ins stay in the tests): its two steps come from
    --outputs and its run summary from --data, as a team would give them from a run on AWS.
    The GPU arms train here; the comparison reads all three; the decision and its branch run."""
    import io
    import tarfile

    from compiled_training.local.assembly import pick, read_assembly

    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    steps = {s["Name"]: s for s in pick(read_assembly(assembly), "DocumentClassification/"
                                                                 "Benchmark").definition["Steps"]}
    output = steps["TrainTrainium"]["Arguments"]["OutputDataConfig"]["S3OutputPath"]
    given = []
    for name, seconds in (("PrecompileTrainium", 120), ("TrainTrainium", 600)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"TrainingJobName": name.lower(),
                                    "TrainingTimeInSeconds": seconds,
                                    "BillableTimeInSeconds": 2 * seconds}))
        given += ["--outputs", f"{name}={path}"]
    summary = json.dumps({"compiler": "neuron-xla", "global_batch_size": 64,
                          "learning_rate": 5e-5, "samples_per_second": 900.0, "epochs": 1.0,
                          "validation_accuracy": 0.6875, "validation_loss": 0.69}).encode()
    archive = tmp_path / "trainium" / "output.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        member = tarfile.TarInfo("metrics.json")
        member.size = len(summary)
        tar.addfile(member, io.BytesIO(summary))
    given += ["--data", f"{output}/traintrainium/output/={archive.parent}"]
    sets = [arg for arm in ("TrainBaseline", "TrainCompiler") for arg in _tiny(arm)]

    result = _run(str(assembly), "--pipeline", "DocumentClassification/Benchmark",
                  "--python", python, *_data(tmp_path, DATA), *sets, *given,
                  "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json"))

    report = _report(tmp_path / "report.json")
    ran = {s["name"]: s["status"] for s in report["steps"]}
    assert ran["TrainBaseline"] == ran["TrainCompiler"] == "Succeeded", result.stdout
    assert ran["Compare"] == ran["RecordDecision"] == ran["ShipDecision"] == "Succeeded"
    decision = {s["name"]: s for s in report["steps"]}["Compare"]["outputs"][
        "PropertyFiles"]["Comparison"]["decision"]
    # Ship or hold, the execution ends as SageMaker ends it: succeeded, or failed with the
    # comparison's reason.
    assert (result.returncode, report["status"]) == (
        (0, "Succeeded") if decision["verdict"] == "ship" else (1, "Failed"))
    assert ran["PrecompileTrainium"] == ran["TrainTrainium"] == "Given"
