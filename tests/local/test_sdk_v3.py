"""Pipelines as teams build them today, with the SageMaker SDK v3: a ``ModelTrainer`` training
step, whose ``ContainerEntrypoint`` (``/bin/bash -c .../sm_train.sh``) replaces the image's
launcher, run locally on PyTorch, Hugging Face, scikit-learn and XGBoost images and a team's
own. The SDK (in its own environment) builds each pipeline and uploads its code and driver
scripts; the run gets them with ``--data``, as it would find them in S3. Each script prints a
marker, proving it ran; each has a twin whose script fails with its own message.

What stands in for AWS: moto (the SDK's uploads, the run's S3); the images, by the
interpreters ``--python`` names (here, this environment's, which has pip as v3's script wants).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.docs.blocks import blocks
from tests.environments import IMAGE_CONFIG, require
from tests.helpers import validate_envelope

BUILD = Path(__file__).parent / "sdk_v3_build.py"
IMAGES = ["pytorch", "huggingface", "sklearn", "xgboost",
          "own:111122223333.dkr.ecr.eu-west-1.amazonaws.com/team/trainer:1"]
SCRIPT = """
import os, sys
print("v3 marker: the team's script ran with", sys.argv[1:])
if os.environ.get("SM_HP_FAIL") == "yes":
    sys.exit("the v3 team script failed")
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as out:
    out.write(str(len(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))))
"""

# A team's PyTorch script with torch.compile: one compiled training step on CPU (Inductor
# needs the machine's C compiler, as it needs the image's).
COMPILED_SCRIPT = """
import os, sys
print("v3 marker: the compiled script ran", flush=True)
if os.environ.get("SM_HP_FAIL") == "yes":
    sys.exit("the v3 compiled script failed")
import torch
model = torch.compile(torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(4, 8)).square().mean()
loss.backward()
optimizer.step()
print(f"v3 marker: compiled step loss={loss.item():.4f}")
torch.save(model.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
"""

PREPARE = """
import argparse, json, os, shutil
parser = argparse.ArgumentParser()
parser.add_argument("--split")
args = parser.parse_args()
print("v3 marker: prepared the", args.split, "split")
rows = sorted(os.listdir("/opt/ml/processing/raw"))
os.makedirs("/opt/ml/processing/rows", exist_ok=True)
for name in rows:
    shutil.copy(os.path.join("/opt/ml/processing/raw", name), "/opt/ml/processing/rows")
with open("/opt/ml/processing/stats/stats.json", "w") as out:
    json.dump({"rows": len(rows)}, out)
"""
SWEEP_SCRIPT = """
import argparse, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--lr")
parser.add_argument("--score")
args = parser.parse_args()
print(f"v3 marker: trained with lr={args.lr}")
if args.score == "fail":
    sys.exit("the v3 sweep script failed")
print(f"f1={args.score}")
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as out:
    out.write(args.lr)
"""
SWEEPS = {"sweep": [{"lr": "0.1", "score": "0.71"}, {"lr": "0.01", "score": "0.83"}],
          "sweep-fails": [{"lr": "0.1", "score": "0.71"}, {"lr": "0.01", "score": "fail"}]}


def _name(image: str, fails: bool) -> str:
    return ("own" if image.startswith("own:") else image) + ("-fails" if fails else "")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every pipeline, built by SDK v3 in one run of its environment."""
    root = tmp_path_factory.mktemp("sdk-v3")
    source = root / "source"
    source.mkdir()
    (source / "train.py").write_text(SCRIPT)
    specs = [{"name": _name(image, fails), "image": image, "source_dir": str(source),
              "hyperparameters": {"epochs": 2, "fail": "yes" if fails else "no"}}
             for image in IMAGES for fails in (False, True)]
    specs += [{"name": name, "image": "pytorch", "source_dir": str(source), "cleanup": True,
               "hyperparameters": {"epochs": 1, "fail": fail}}
              for name, fail in (("cleanup", "no"), ("cleanup-fails", "yes"))]
    specs.append({"name": "notify", "image": "pytorch", "source_dir": str(source),
                  "notify": True, "hyperparameters": {"fail": "yes"}})
    compiled = root / "compiled-source"
    compiled.mkdir()
    (compiled / "train.py").write_text(COMPILED_SCRIPT)
    specs += [{"name": name, "image": "pytorch", "source_dir": str(compiled),
               "hyperparameters": {"fail": fail}}
              for name, fail in (("compiled", "no"), ("compiled-fails", "yes"))]
    (source / "prepare.py").write_text(PREPARE)
    specs += [{"name": name, "flow": True, "source_dir": str(source),
               "hyperparameters": {"epochs": 1, "fail": fail}}
              for name, fail in (("flow", "no"), ("flow-fails", "yes"))]
    specs += [{"name": name, "function": name.removeprefix("function-")}
              for name in ("function-double", "function-raises")]
    sweep_source = root / "sweep-source"
    sweep_source.mkdir()
    (sweep_source / "train.py").write_text(SWEEP_SCRIPT)
    specs += [{"name": name, "image": "pytorch", "source_dir": str(sweep_source),
               "sweep": items, "metric": "f1", "floor": 0.8} for name, items in SWEEPS.items()]
    (root / "specs.json").write_text(json.dumps(specs))
    result = subprocess.run([str(require(IMAGE_CONFIG).executable), str(BUILD),
                             str(root / "specs.json"), str(root / "out")],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "out"


def _run(built: Path, name: str, tmp_path: Path, *more: str
         ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    folder = built / name
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "rows.csv").write_text("1,2\n3,4\n")
    # Everything the SDK uploaded (code, driver scripts, a @step's pickles), by top folder.
    uploads = [f"s3://{path.relative_to(folder / 's3').as_posix()}/={path}"
               for path in sorted((folder / "s3").glob("*/*"))]
    assert uploads
    data = [arg for upload in uploads for arg in ("--data", upload)]
    result = subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", "--definition",
         str(folder / "definition.json"), "--name", name, *data,
         "--data", f"s3://v3-pipelines/data/train/={tmp_path / 'train'}",
         *more, "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=600, check=False)
    report = tmp_path / "report.json"
    return result, json.loads(report.read_text()) if report.is_file() else {}


@pytest.mark.parametrize("image", IMAGES)
def test_a_model_trainer_step_runs_its_own_entry_point(built, tmp_path, image):
    definition = json.loads((built / _name(image, False) / "definition.json").read_text())
    (step,) = definition["Steps"]
    specification = step["Arguments"]["AlgorithmSpecification"]
    assert specification["ContainerEntrypoint"] == ["/bin/bash"]  # as v3 writes it
    assert "sagemaker_program" not in step["Arguments"].get("HyperParameters", {})

    result, report = _run(built, _name(image, False), tmp_path)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    log = (tmp_path / "work" / "steps" / "Train" / "training.log").read_text()
    assert "v3 marker: the team's script ran with ['--epochs', '2', '--fail', 'no']" in log
    assert any(note.startswith("Train: ran the step's ContainerEntrypoint (/bin/bash -c chmod "
                               "+x /opt/ml/input/data/sm_drivers/sm_train.sh") for note in
               report["notes"])
    (train,) = report["steps"]
    assert train["status"] == "Succeeded"
    assert train["outputs"]["ModelArtifacts"]["S3ModelArtifacts"].endswith("/model.tar.gz")


@pytest.mark.parametrize("image", IMAGES)
def test_its_twin_whose_script_fails_fails_with_the_scripts_message(built, tmp_path, image):
    result, report = _run(built, _name(image, True), tmp_path)

    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    log = (tmp_path / "work" / "steps" / "Train" / "training.log").read_text()
    assert "v3 marker: the team's script ran with" in log  # it ran, then failed
    assert report["failure"].startswith("step Train failed: AlgorithmError: ")
    assert "(exit code 1; the script's last line: the v3 team script failed; log: " in \
        report["failure"]


def test_a_for_each_step_trains_each_item_and_its_selector_picks_the_best(built, tmp_path):
    definition = json.loads((built / "sweep" / "definition.json").read_text())
    assert [step["Type"] for step in definition["Steps"]] == ["ForEach", "Condition"]

    result, report = _run(built, "sweep", tmp_path)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    statuses = {step["name"]: step["status"] for step in report["steps"]}
    assert statuses == {"Sweep": "Succeeded", "Train-0": "Succeeded", "Train-1": "Succeeded",
                        "GoodEnough": "Succeeded", "BelowFloor": "Skipped"}
    (sweep,) = [step for step in report["steps"] if step["name"] == "Sweep"]
    outputs = sweep["outputs"]
    assert outputs["InputItemCount"] == 2 and outputs["SucceededStepCount"] == 2
    scores = [o["Train"]["FinalMetricDataList"]["f1"]["Value"]
              for o in outputs["IterationOutputs"]]
    assert scores == [0.71, 0.83]
    assert outputs["Selected"]["FinalMetricDataList"]["f1"]["Value"] == 0.83  # MaxBy's pick
    assert outputs["Selected"]["TrainingJobName"].startswith("train-1-")
    log = (tmp_path / "work" / "steps" / "Train-1" / "training.log").read_text()
    assert "v3 marker: trained with lr=0.01" in log  # the item's own hyperparameters


def test_a_for_each_step_whose_item_fails_fails_with_the_scripts_message(built, tmp_path):
    result, report = _run(built, "sweep-fails", tmp_path)

    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert report["failure"].startswith("step Sweep failed: step Train-1 failed: "
                                        "AlgorithmError: ")
    assert "the script's last line: the v3 sweep script failed; log: " in report["failure"]
    statuses = {step["name"]: step["status"] for step in report["steps"]}
    assert statuses["Train-0"] == "Succeeded" and statuses["GoodEnough"] == "Not reached"


def test_outputs_given_for_a_for_each_body_step_stand_for_every_iteration(built, tmp_path):
    """``--outputs Train=FILE`` for the body step: each iteration takes them and nothing
    trains (the twin whose script fails would fail otherwise); the selector picks among them."""
    given = tmp_path / "train.json"
    given.write_text(json.dumps({"TrainingJobName": "given",
                                 "FinalMetricDataList": [{"MetricName": "f1", "Value": 0.9}]}))

    result, report = _run(built, "sweep-fails", tmp_path, "--outputs", f"Train={given}")

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    statuses = {step["name"]: step["status"] for step in report["steps"]}
    assert statuses == {"Sweep": "Succeeded", "Train-0": "Given", "Train-1": "Given",
                        "GoodEnough": "Succeeded", "BelowFloor": "Skipped"}
    assert not (tmp_path / "work" / "steps" / "Train-0").exists()


def test_a_step_named_as_an_iteration_runs_is_refused_before_anything_runs(built, tmp_path):
    definition = json.loads((built / "sweep" / "definition.json").read_text())
    definition["Steps"].append({"Name": "Train-1", "Type": "Fail", "Arguments": {}})
    (tmp_path / "clash.json").write_text(json.dumps(definition))

    result = subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", "run",
                             "--definition", str(tmp_path / "clash.json"),
                             "--workdir", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=120, check=False)

    assert result.returncode == 2
    assert result.stderr.strip() == (
        "compiled-training run: step Train-1 has the name iteration 1 of ForEach step Sweep's "
        "body step Train runs under; rename it")


def test_a_step_run_on_another_steps_failure_is_refused_before_anything_runs(built, tmp_path):
    """v3's StepDependency(train, TriggerCondition.FAILED): SageMaker runs the step only when
    Train fails, which the runner does not emulate; refused, never run on Train's success."""
    definition = json.loads((built / "notify" / "definition.json").read_text())
    assert definition["Steps"][1]["DependsOn"] == [{"Step": "Train", "Trigger": "Failed"}]

    result, _ = _run(built, "notify", tmp_path)

    assert result.returncode == 2
    assert result.stderr.strip() == (
        "compiled-training run: step TrainingFailed: runs when Train ends Failed (a DependsOn "
        "run condition), which a local run does not emulate; give its properties with "
        "--outputs TrainingFailed=FILE")
    assert not (tmp_path / "work" / "steps" / "Train").exists()


@pytest.mark.parametrize("name", ["cleanup", "cleanup-fails"])
def test_a_cleanup_step_deletes_the_training_jobs_outputs_after_it(built, tmp_path, name):
    result, report = _run(built, name, tmp_path)
    statuses = {step["name"]: step["status"] for step in report["steps"]}
    archives = list((tmp_path / "work" / "s3").rglob("model.tar.gz"))
    if name == "cleanup":
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        assert statuses == {"Train": "Succeeded", "Cleanup": "Succeeded"}
        assert archives == []  # deleted from the run's S3
        assert "Cleanup: deleted 1 object from the run's S3" in report["notes"]
    else:  # the twin: the training script fails, nothing is cleaned up
        assert result.returncode == 1
        assert statuses == {"Train": "Failed", "Cleanup": "Not reached"}


@pytest.mark.parametrize("name", ["function-double", "function-raises"])
def test_a_step_function_runs_its_pickled_function_through_its_own_driver(built, tmp_path,
                                                                          name):
    # The function's job runs v3's own driver, which imports the SDK: the image's Python is
    # the SDK v3 environment's (--python), as a team's image would have it.
    python = str(require(IMAGE_CONFIG).executable)
    result, report = _run(built, name, tmp_path, "--python", python)
    log = (tmp_path / "work" / "steps" / "Double" / "training.log").read_text()
    assert "v3 marker: the @step function ran with 21" in log
    if name == "function-double":
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        # The return value, where v3 reads it from: <pipeline>/<step>/<time>/<execution>/results.
        assert list((tmp_path / "work" / "s3").rglob("results/payload.pkl"))
    else:
        assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
        assert "the v3 step function failed" in report["failure"]


@pytest.mark.parametrize("name", ["compiled", "compiled-fails"])
def test_a_pytorch_model_trainer_script_with_torch_compile_trains_a_compiled_step(
        built, tmp_path, name):
    """The job's Python is this environment's (torch, as the PyTorch image has it): the
    script's torch.compile compiles and trains through v3's driver; the twin fails."""
    result, report = _run(built, name, tmp_path)

    log = (tmp_path / "work" / "steps" / "Train" / "training.log").read_text()
    assert "v3 marker: the compiled script ran" in log
    if name == "compiled":
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        assert re.search(r"v3 marker: compiled step loss=\d+\.\d{4}", log)
        (train,) = report["steps"]
        assert train["status"] == "Succeeded"
    else:
        assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
        assert "the script's last line: the v3 compiled script failed" in report["failure"]


@pytest.mark.parametrize("name", ["flow", "flow-fails"])
def test_process_then_train_then_a_condition_on_the_property_file(built, tmp_path, name):
    definition = json.loads((built / name / "definition.json").read_text())
    assert [p.get("EnumValues") for p in definition["Parameters"]] == [["train", "all"], None]

    result, report = _run(built, name, tmp_path, "--param", "Split=all")

    statuses = {step["name"]: step["status"] for step in report["steps"]}
    log = (tmp_path / "work" / "steps" / "Prepare" / "processing.log").read_text()
    assert "v3 marker: prepared the all split" in log  # the parameter reached the script
    if name == "flow":
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        assert statuses == {"Prepare": "Succeeded", "Train": "Succeeded",
                            "EnoughRows": "Succeeded", "Register": "Succeeded",
                            "TooFewRows": "Skipped"}
        # v3's ModelStep: the version, in the stand-in registry, with the model Train packed.
        registered = {s["name"]: s for s in report["steps"]}["Register"]["outputs"]
        assert registered["ModelPackageArn"].endswith(":model-package/flow-models/1")
        registry = json.loads((tmp_path / "work" / "registry.json").read_text())
        (package,) = registry["packages"]
        (container,) = package["InferenceSpecification"]["Containers"]
        assert container["ModelDataUrl"].endswith("/output/model.tar.gz")
    else:  # the twin: the training script fails after the processing step ran
        assert result.returncode == 1
        assert statuses["Prepare"] == "Succeeded" and statuses["Train"] == "Failed"
        assert statuses["Register"] == "Not reached"
        assert "the v3 team script failed" in report["failure"]


GUIDE_SCRIPT = """import os, sys
print("guide marker: the team's script ran")
if os.path.exists(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "fail")):
    sys.exit("the guide's script failed")
"""


@pytest.mark.parametrize("fails", [False, True], ids=["runs", "fails"])
def test_the_guides_v3_builder_writes_a_pipeline_that_runs(tmp_path, fails):
    """The local-runs guide's SDK v3 example as written, in v3's environment, then its shell
    block: the script the example names runs; its twin fails with the script's message."""
    (builder,) = [b for b in blocks("python") if b.mode == "sdk-v3"]
    (command,) = [b for b in blocks() if b.mode.startswith(
        "run by tests/local/test_sdk_v3.py::test_the_guides_v3_builder")]
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "train.py").write_text(GUIDE_SCRIPT)
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "data" / "train" / ("fail" if fails else "rows.csv")).write_text("1,2\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    built = subprocess.run([str(require(IMAGE_CONFIG).executable), "-c", builder.code],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert built.returncode == 0, built.stderr[-3000:]

    words = shlex.split(command.code.replace("\\\n", " "))
    assert words[:2] == ["compiled-training", "run"] and ".venv/bin/python" in words
    words = [sys.executable if w == ".venv/bin/python" else w for w in words[2:]]
    result = subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", "run", *words],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            check=False)

    assert result.returncode == (1 if fails else 0), result.stdout[-3000:] + result.stderr
    log = (tmp_path / "work" / "steps" / "Train" / "training.log").read_text()
    assert "guide marker: the team's script ran" in log
    assert ("the guide's script failed" in result.stdout) is fails


def test_every_v3_definition_passes_the_schema_with_v3s_additions(built):
    """The published schema (April 2025) with v3's step types and EnumValues added
    (tests/schemas/sdk-v3-additions.schema.json); each addition refuses what v3 refuses."""
    definitions = {p.parent.name: json.loads(p.read_text())
                   for p in sorted(built.glob("*/definition.json"))}
    for definition in definitions.values():
        validate_envelope(definition)
    sweep = definitions["sweep"]
    types = {s["Type"] for d in definitions.values() for s in d["Steps"]}
    assert {"ForEach", "Cleanup", "Condition", "Processing", "Training"} <= types
    for break_it in (
            lambda d: d["Steps"][0]["Arguments"].update(MaxConcurrency=51),
            lambda d: d["Steps"][0]["Arguments"]["Selector"].update(Pick="Best"),
            lambda d: d["Steps"][0]["Arguments"]["ForEachBody"][0].update(Type="Fail"),
            lambda d: d["Steps"][0]["Arguments"].update(IterableItems=[]),
            lambda d: d["Steps"][0]["Arguments"].update(Extra=1)):
        broken = json.loads(json.dumps(sweep))
        break_it(broken)
        with pytest.raises(jsonschema.ValidationError):
            validate_envelope(broken)
    flow = json.loads(json.dumps(definitions["flow"]))
    flow["Parameters"][0]["EnumValues"] = []
    with pytest.raises(jsonschema.ValidationError):
        validate_envelope(flow)
    cleanup = json.loads(json.dumps(definitions["cleanup"]))
    cleanup["Steps"][-1]["Arguments"]["Resources"]["S3"] = []
    with pytest.raises(jsonschema.ValidationError):
        validate_envelope(cleanup)
