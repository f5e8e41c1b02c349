"""Installed, it works: both wheels in a fresh virtualenv outside the repository, a team's own
CDK app (tests/consumer/) synthesized with it, and its templates through the validators that
check the reference platform.

Slow-ish (building and installing the wheels, pip's cache helps): one xdist group, so that
the virtualenv is built once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from tests.helpers import (
    ROOT,
    cfn_lint,
    definitions,
    validate_envelope,
    validate_job_arguments,
)

pytestmark = pytest.mark.xdist_group("packaging")
RUNTIME_WHEEL = "compiled_training_runtime-0.1.0-py3-none-any.whl"


def _run(command: list, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    # The checkout must not leak in through the environment.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(c) for c in command], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, check=False)


def _site_packages(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv's interpreter, with the two wheels and their dependencies only."""
    work = tmp_path_factory.mktemp("installed")
    # From a copy: setuptools builds in the tree's build/, where files left by an earlier
    # build would slip into the wheel.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".*", "node_modules", "cdk.out", "build", "*.egg-info", "__pycache__", "*-results"))
    for project in (source, source / "runtime"):
        built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                      "--wheel-dir", work / "wheels", project])
        assert built.returncode == 0, built.stderr
    created = _run([sys.executable, "-m", "venv", work / "venv"])
    assert created.returncode == 0, created.stderr
    python = work / "venv" / "bin" / "python"
    installed = _run([python, "-m", "pip", "install", "--quiet",
                      *sorted((work / "wheels").glob("*.whl"))])
    assert installed.returncode == 0, installed.stderr
    return python


@pytest.fixture(scope="module")
def consumer(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The consumer app, copied out of the repository and synthesized; its cdk.out."""
    app = tmp_path_factory.mktemp("consumer") / "app"
    shutil.copytree(ROOT / "tests" / "consumer", app)
    synth = _run([python, "app.py"], cwd=app, CDK_OUTDIR=str(app / "cdk.out"))
    assert synth.returncode == 0, synth.stderr[-3000:]
    return app / "cdk.out"


def test_the_packages_import_from_the_virtualenv_without_torch_or_matplotlib(python, tmp_path):
    found = _run([python, "-c", "import importlib.util as u, compiled_training as c, "
                  "compiled_training_runtime as r; print(c.__file__); print(r.__file__); "
                  "print([m for m in ('torch', 'matplotlib') if u.find_spec(m)])"], cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    constructs, runtime, heavy = found.stdout.splitlines()
    site = _site_packages(python)
    assert Path(constructs).is_relative_to(site) and Path(runtime).is_relative_to(site)
    assert heavy == "[]"  # plotting and benchmarking are extras


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
    core = {Requirement(r).name for r in project["dependencies"]}
    assert not {"matplotlib", "torch", "torch-xla", "transformers"} & core
