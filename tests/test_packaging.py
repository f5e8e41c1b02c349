"""Installed, it works: both wheels in a fresh virtualenv outside the repository, a team's own
CDK app (tests/consumer/) synthesized with it, and its templates through the validators that
check the reference platform.

Slow-ish (building and installing the wheels): one xdist group, so that
the virtualenv is built once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from compiled_training_runtime import __version__ as VERSION
from tests.environments import interpreter
from tests.helpers import (
    ROOT,
    cfn_lint,
    definitions,
    validate_envelope,
    validate_job_arguments,
)

pytestmark = pytest.mark.xdist_group("packaging")
RUNTIME_WHEEL = f"compiled_training_runtime-{VERSION}-py3-none-any.whl"


def _run(command: list, cwd: Path | None = None, **env: str | None
         ) -> subprocess.CompletedProcess[str]:
    """``command`` with ``env`` over this environment (None removes a variable)."""
    # The checkout must not leak in through the environment.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    merged = {k: v for k, v in {**clean, **env}.items() if v is not None}
    return subprocess.run([str(c) for c in command], cwd=cwd, env=merged,
                          capture_output=True, text=True, check=False)


def _site_packages(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Both wheels, built as the README builds them."""
    work = tmp_path_factory.mktemp("wheels")
    # From a copy: setuptools builds in the tree's build/, where files left by an earlier
    # build would slip into the wheel.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".*", "node_modules", "cdk.out", "build", "*.egg-info", "__pycache__", "*-results"))
    for project in (source, source / "runtime"):
        built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                      "--wheel-dir", work / "dist", project])
        assert built.returncode == 0, built.stderr
    return sorted((work / "dist").glob("*.whl"))


@pytest.fixture(scope="module")
def sdists(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Both sdists, as `make dist` builds them (``python -m build``), from a copy."""
    work = tmp_path_factory.mktemp("sdists")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".*", "node_modules", "cdk.out", "build", "*.egg-info", "__pycache__", "*-results",
        "site", "dist"))
    for project in (source, source / "runtime"):
        built = _run([sys.executable, "-m", "build", "--sdist", "--outdir", work / "dist",
                      project])
        assert built.returncode == 0, built.stderr[-3000:]
    return sorted((work / "dist").glob("*.tar.gz"))


def test_the_sdists_pass_twine_and_install_to_the_same_templates_as_the_wheels(
        sdists, consumer, tmp_path):
    """A user (or a mirror) that installs from source gets the same library: the version
    written once reaches both, and the app synthesizes to the same bytes."""
    assert [p.name for p in sdists] == [f"compiled_training-{VERSION}.tar.gz",
                                        f"compiled_training_runtime-{VERSION}.tar.gz"]
    checked = _run([sys.executable, "-m", "twine", "check", "--strict", *sdists])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    python = _installed(tmp_path, sys.executable, sdists)
    from_source = _synthesized(python, tmp_path)
    for template in consumer.glob("*.template.json"):
        assert (from_source / template.name).read_bytes() == template.read_bytes()


def _installed(work: Path, interpreter: str, wheels: list[Path], *also: str,
               installer: str = "uv") -> Path:
    """A fresh virtualenv of ``interpreter`` with the wheels, their dependencies and ``also``.
    ``installer="pip"`` installs as the README does; uv (the default) resolves the same
    metadata and hard-links what it installs from the environments' cache (make's
    UV_CACHE_DIR), so that the module's half-dozen environments do not fill CI's disk."""
    created = _run([interpreter, "-m", "venv", work / "venv"])
    assert created.returncode == 0, created.stderr
    python = work / "venv" / "bin" / "python"
    if installer == "pip":
        command = [python, "-m", "pip", "install", "--quiet"]
    else:
        command = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python]
    installed = _run([*command, *wheels, *also])
    assert installed.returncode == 0, installed.stderr
    return python


def _synthesized(python: Path, work: Path) -> Path:
    """The consumer app, copied out of the repository and synthesized; its cdk.out."""
    app = work / "app"
    shutil.copytree(ROOT / "tests" / "consumer", app)
    synth = _run([python, "app.py"], cwd=app, CDK_OUTDIR=str(app / "cdk.out"))
    assert synth.returncode == 0, synth.stderr[-3000:]
    return app / "cdk.out"


@pytest.fixture(scope="module")
def python(wheels: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv's interpreter, with the two wheels and their dependencies only,
    installed by pip as the README installs them."""
    work = tmp_path_factory.mktemp("installed")
    yield _installed(work, sys.executable, wheels, installer="pip")
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def consumer(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _synthesized(python, tmp_path_factory.mktemp("consumer"))


def test_the_packages_import_from_the_virtualenv_without_torch_or_matplotlib(python, tmp_path):
    found = _run([python, "-c", "import importlib.util as u, compiled_training as c, "
                  "compiled_training_runtime as r; print(c.__file__); print(r.__file__); "
                  "print([m for m in ('torch', 'matplotlib') if u.find_spec(m)])"], cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    constructs, runtime, heavy = found.stdout.splitlines()
    site = _site_packages(python)
    assert Path(constructs).is_relative_to(site) and Path(runtime).is_relative_to(site)
    assert heavy == "[]"  # plotting and benchmarking are extras
    # The local runner's stand-in for AWS's xla_spawn ships inside the wheel.
    stand_in = Path(constructs).parent / "local" / "stand_ins" / "xla_spawn"
    assert sorted(p.name for p in stand_in.glob("*.py")) == ["sitecustomize.py", "xla_spawn.py"]


# What the SageMaker SDK v2 used to bring with the library (to read its image JSON files).
SDK_BAGGAGE = {"sagemaker", "sagemaker-core", "pandas", "numpy", "fastapi", "uvicorn", "docker",
               "graphene", "protobuf", "pathos", "omegaconf"}


def _distributions(python: Path) -> set[str]:
    listed = _run([python, "-m", "pip", "list", "--format=json", "--exclude", "pip"])
    assert listed.returncode == 0, listed.stderr
    return {canonicalize_name(d["name"]) for d in json.loads(listed.stdout)}


def test_the_wheels_bring_what_the_guide_says_and_no_sagemaker_sdk(python):
    installed = _distributions(python)
    assert not installed & SDK_BAGGAGE
    assert {"aws-cdk-lib", "constructs", "cdk-nag", "botocore"} <= installed
    guide = (ROOT / "docs" / "guides" / "your-own-app.md").read_text()
    promised = int(re.search(r"about (\d+) distributions", guide).group(1))
    # "about": the CDK's own dependencies may gain or lose one between releases.
    assert abs(len(installed) - promised) <= 3, sorted(installed)


@pytest.mark.parametrize(("version", "sdk"), [
    ("3.10", "sagemaker<3"),   # the lowest Python requires-python allows, SDK v2
    ("3.12", None),            # alone
    ("3.13", "sagemaker>=3"),  # the newest Python, the current SDK
], ids=["py3.10-sdk-v2", "py3.12-alone", "py3.13-sdk-v3"])
def test_installs_beside_either_sdk_on_every_supported_python(wheels, consumer, tmp_path,
                                                             version, sdk):
    """A team's app environment: its Python, and the SageMaker SDK it already uses (or none).
    The templates are the same bytes as those synthesized on this Python, alone."""
    found = interpreter(version)
    if found is None:
        pytest.skip(f"no Python {version} on this machine (pyenv install {version})")
    python = _installed(tmp_path, found, wheels, *([sdk] if sdk else []))
    checked = _run([python, "-m", "pip", "check"])
    assert checked.returncode == 0, checked.stdout
    if sdk:
        shown = _run([python, "-c", "import importlib.metadata as m; print(m.version('sagemaker'))"])
        assert SpecifierSet(sdk.removeprefix("sagemaker")).contains(shown.stdout.strip())
    out = _synthesized(python, tmp_path)
    (template,) = out.glob("*.template.json")
    assert template.read_bytes() == (consumer / template.name).read_bytes()


def test_the_pythons_tried_span_requires_python():
    requires = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                            ["requires-python"])
    tried = ["3.10", "3.11", "3.12", "3.13"]
    assert all(requires.contains(f"{v}.0") for v in tried)
    assert not requires.contains("3.9.0")  # 3.10 is the lowest end


def test_the_consumer_app_passes_the_validators(consumer):
    (template_path,) = consumer.glob("*.template.json")
    template = json.loads(template_path.read_text())
    assert cfn_lint(str(template_path)) == []
    found = definitions(template)
    assert len(found) == 2  # the team's pipeline and its benchmark
    for definition in found:
        validate_envelope(definition)
        validate_job_arguments(definition)
    report = json.loads((consumer / "validation-report.json").read_text())
    assert {p["pluginName"]: p["conclusion"] for p in report["pluginReports"]} == {
        "AwsSolutions": "success", "CompiledTraining": "success"}


def test_docker_contexts_hold_the_installed_dockerfile_and_runtime_wheel_only(python, consumer):
    site = _site_packages(python)
    contexts = sorted(p for p in consumer.glob("asset.*") if (p / "Dockerfile").exists())
    dockerfiles = set()
    assert len(contexts) == 2  # the cloud build's and the local build's
    for context in contexts:
        assert sorted(p.name for p in context.iterdir()) == ["Dockerfile", RUNTIME_WHEEL]
        dockerfiles.add((context / "Dockerfile").read_bytes())
        with zipfile.ZipFile(context / RUNTIME_WHEEL) as wheel:
            package = [n for n in wheel.namelist() if n.startswith("compiled_training_runtime/")]
            assert "compiled_training_runtime/contract.py" in package
            for name in package:
                assert wheel.read(name) == (site / name).read_bytes(), name
    assert dockerfiles == {(site / "compiled_training" / "dockerfiles" / image /
                            "Dockerfile").read_bytes()
                           for image in ("training-compiler", "torch-compile")}
    handlers = {f.read_bytes() for p in consumer.glob("asset.*") for f in p.glob("*.py")}
    assert handlers == {(site / "compiled_training" / "handlers" /
                         f"{name}.py").read_bytes() for name in ("image_build", "decision")}
    checkout = str(ROOT).encode()
    assert not any(checkout in p.read_bytes() for p in consumer.rglob("*") if p.is_file())


@pytest.mark.parametrize(("arguments", "message"), [
    (["advise", "workloads.yaml", "--plot", "advise.png"],
     r"compiled-training advise: advise --plot needs matplotlib \(not installed\): "
     r"pip install 'compiled-training\[plot\]'\n"),
    (["bench", "--compilers", "none"],
     r"compiled-training bench: bench needs torch, transformers(, tqdm)?, matplotlib "
     r"\(not installed\): pip install 'compiled-training\[bench\]'\n"),
    (["run", "cdk.out", "--pipeline", "p"],
     r"compiled-training run: run needs boto3, moto \(not installed\): pip install "
     r"'compiled-training\[local\]'\n"),
])
def test_fails_without_an_extra_with_one_line_naming_it(python, tmp_path, arguments, message):
    shutil.copy(ROOT / "workloads.yaml", tmp_path)
    result = _run([python.parent / "compiled-training", *arguments], cwd=tmp_path)
    assert result.returncode == 2
    assert re.fullmatch(message, result.stderr), result.stderr


def test_each_extra_installs_the_modules_its_message_names():
    from compiled_training.tools.extras import EXTRAS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def modules(extra: str) -> set[str]:
        found = set()
        for requirement in map(Requirement, extras[extra]):
            if requirement.name == project["name"]:  # compiled-training[plot] in another extra
                found |= {m for inner in requirement.extras for m in modules(inner)}
            else:
                found.add(requirement.name.replace("-", "_"))
        return found

    for extra, needed in EXTRAS.items():
        assert set(needed) <= modules(extra), extra
    # The core dependencies are setup.py's (they pin the runtime to the one version): read as
    # the installed metadata lists them, without the extras'.
    from importlib import metadata

    core = {Requirement(r).name for r in metadata.requires("compiled-training") or ()
            if "extra ==" not in r}
    assert {"aws-cdk-lib", "constructs", "compiled-training-runtime"} <= core
    assert not {"matplotlib", "torch", "torch-xla", "transformers", "boto3", "moto"} & core


@pytest.fixture(scope="module")
def local_python(wheels: list[Path], tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Path]:
    """A fresh virtualenv with the wheels and the ``local`` extra, as a team runs pipelines."""
    library, runtime = (next(w for w in wheels if w.name.startswith(f"{name}-"))
                        for name in ("compiled_training", "compiled_training_runtime"))
    work = tmp_path_factory.mktemp("local")
    yield _installed(work, sys.executable, [Path(f"{library}[local]"), runtime])
    shutil.rmtree(work, ignore_errors=True)


SKLEARN_IMAGE = "141502667606.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
COUNT = """import os, sys
if os.environ.get("FAIL"):
    sys.exit("the rows are not there")
rows = open("/opt/ml/processing/input/rows.txt").read().split()
os.makedirs("/opt/ml/processing/output", exist_ok=True)
open("/opt/ml/processing/output/count.txt", "w").write(str(len(rows)))
"""
TRAIN = """import os
count = int(open(os.path.join(os.environ["SM_CHANNEL_COUNTS"], "count.txt")).read())
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write(str(count))
print(f"rows={count}")
"""


def _team_definition(work: Path) -> Path:
    """A team's pipeline as ``describe-pipeline`` returns it: a scikit-learn processing job,
    then scikit-learn script-mode training on its output. Its code and data under ``work``."""
    (work / "code").mkdir(parents=True)
    (work / "code" / "count.py").write_text(COUNT)
    (work / "code" / "train.py").write_text(TRAIN)
    with tarfile.open(work / "sourcedir.tar.gz", "w:gz") as archive:
        archive.add(work / "code" / "train.py", arcname="train.py")
    (work / "rows").mkdir()
    (work / "rows" / "rows.txt").write_text("a b c d\n")
    bucket = "s3://team-pipeline-eu"
    steps = [
        {"Name": "Count", "Type": "Processing", "Arguments": {
            "AppSpecification": {"ImageUri": SKLEARN_IMAGE, "ContainerEntrypoint": [
                "python3", "/opt/ml/processing/input/code/count.py"]},
            "Environment": {"FAIL": {"Get": "Parameters.Fail"}},
            "ProcessingInputs": [
                {"InputName": "code", "S3Input": {"S3Uri": f"{bucket}/code/count.py",
                                                  "LocalPath": "/opt/ml/processing/input/code",
                                                  "S3DataType": "S3Prefix",
                                                  "S3InputMode": "File"}},
                {"InputName": "rows", "S3Input": {"S3Uri": f"{bucket}/rows/",
                                                  "LocalPath": "/opt/ml/processing/input",
                                                  "S3DataType": "S3Prefix",
                                                  "S3InputMode": "File"}}],
            "ProcessingOutputConfig": {"Outputs": [{"OutputName": "counts", "S3Output": {
                "S3Uri": f"{bucket}/counts", "LocalPath": "/opt/ml/processing/output",
                "S3UploadMode": "EndOfJob"}}]},
            "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.large",
                                                      "InstanceCount": 1, "VolumeSizeInGB": 30}},
            "RoleArn": "arn:aws:iam::123456789012:role/team"}},
        {"Name": "Train", "Type": "Training", "Arguments": {
            "AlgorithmSpecification": {"TrainingImage": SKLEARN_IMAGE, "TrainingInputMode": "File",
                                       "MetricDefinitions": [{"Name": "rows",
                                                              "Regex": "rows=([0-9]+)"}]},
            "HyperParameters": {"sagemaker_program": '"train.py"',
                                "sagemaker_submit_directory": f'"{bucket}/sourcedir.tar.gz"'},
            "InputDataConfig": [{"ChannelName": "counts", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": {"Get": "Steps.Count.ProcessingOutputConfig."
                                                           "Outputs['counts'].S3Output.S3Uri"}}}}],
            "OutputDataConfig": {"S3OutputPath": f"{bucket}/models"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1,
                               "VolumeSizeInGB": 30},
            "RoleArn": "arn:aws:iam::123456789012:role/team",
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}}}]
    definition = {"Version": "2020-12-01", "Steps": steps, "Parameters": [
        {"Name": "Fail", "Type": "String", "DefaultValue": ""}]}
    path = work / "pipeline.json"
    path.write_text(json.dumps({"PipelineName": "team-counts",
                                "PipelineDefinition": json.dumps(definition)}))
    return path


@pytest.mark.parametrize("fail", ["", "yes"], ids=["succeeds", "fails"])
def test_the_installed_run_command_runs_a_teams_pipeline_and_fails_with_its_script(
        local_python, tmp_path, fail):
    """The installed ``compiled-training run``, from a folder outside the checkout, on a
    pipeline this repository did not build: a processing job, then training on its output."""
    definition = _team_definition(tmp_path / "team")
    bucket = "s3://team-pipeline-eu"
    result = _run([local_python.parent / "compiled-training", "run", "--definition", definition,
                   "--data", f"{bucket}/code/count.py={tmp_path / 'team' / 'code' / 'count.py'}",
                   "--data", f"{bucket}/rows/={tmp_path / 'team' / 'rows'}",
                   "--data", f"{bucket}/sourcedir.tar.gz={tmp_path / 'team' / 'sourcedir.tar.gz'}",
                   "--param", f"Fail={fail}", "--workdir", tmp_path / "work",
                   "--json", tmp_path / "report.json"], cwd=tmp_path)

    report = json.loads((tmp_path / "report.json").read_text())
    statuses = [(step["name"], step["status"]) for step in report["steps"]]
    assert report["pipeline"] == "team-counts"
    if not fail:
        assert result.returncode == 0, result.stdout + result.stderr
        assert statuses == [("Count", "Succeeded"), ("Train", "Succeeded")]
        train = report["steps"][1]
        assert train["outputs"]["FinalMetricDataList"]["rows"]["Value"] == 4
        assert train["image"] == "sagemaker-scikit-learn:1.2-1-cpu-py3"
        model = train["outputs"]["ModelArtifacts"]["S3ModelArtifacts"].removeprefix("s3://")
        with tarfile.open(tmp_path / "work" / "s3" / model) as archive:
            assert archive.getnames() == ["model.txt"]
    else:
        assert result.returncode == 1, result.stdout + result.stderr
        assert statuses == [("Count", "Failed"), ("Train", "Not reached")]
        assert report["failure"].startswith("step Count failed: AlgorithmError: "
                                            "the rows are not there (exit code 1; log: ")
