"""Test environments beside the main one, driven from the main test run as subprocesses.

- The training images' own interpreters and framework versions: the runtime is installed into
  the Training Compiler DLCs and into current PyTorch DLCs, while the main environment has
  only torch 2.9. Each pairs an image's Python with its torch (and Transformers) and installs
  the runtime wheel as the image's Dockerfile does, without its dependencies (``--no-deps``).
- Tools whose pinned dependencies must not mix with the library's (checkov).

``.venv/bin/python tests/environments.py`` builds every environment whose interpreter exists on this
machine (``make test`` runs it) and says which it skips; given names, only those (``make test-fast``
builds the two tool environments its tests read).

uv installs them, as it installs the main environment's extras (``make setup-dev``): PyPI has only
CUDA builds of torch for x86_64, each bringing about 4 GB of NVIDIA libraries that nothing here
runs but that torch loads on import, and the torch releases tested here pin nearly the same ones.
uv unpacks each wheel once into its cache (``UV_CACHE_DIR``, which make keeps beside the
environments, on their file system) and hard-links it into every environment that uses it; with
pip, each environment held its own copy and CI's disk ran out.

Even shared, they take about 17 GiB beside the main environment's 8, and CI's machines come with
more or less free disk: an environment that would leave the test run less than ``RESERVE_GIB`` is
not built, says so, and the tests that need it skip naming the disk (pytest's ``-ra`` summary lists
them). The newest image's environment is built first after the tools and whatever the disk (CI
counts a skip of its tests as a failure); the others in the order of what they cover.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / ".venvs"

# transformers 4.21.1's own needs, less tokenizers (models are built from configs here); it
# goes in with --no-deps, they with theirs.
_TRANSFORMERS_4_21_NEEDS = ("huggingface-hub==0.10.1", "filelock", "packaging", "pyyaml",
                            "regex", "requests", "tqdm")


@dataclass(frozen=True)
class Environment:
    name: str
    purpose: str
    python: str
    packages: tuple[str, ...]
    no_deps: tuple[str, ...] = ()
    torch_xla: bool = False
    runtime: bool = True
    """Installs the runtime as the images do (the tool environments need none)."""
    essential: bool = field(default=False, repr=False)
    """Built whatever the disk says: CI counts a skip of its tests as a failure, so a disk too
    small fails the build instead."""
    disk_gib: float = field(default=0.5, repr=False)
    """What building it adds to the disk, built in ENVS' order after the main environment
    (measured with du, rounded up: the NVIDIA libraries it shares with those are not counted)."""

    @property
    def folder(self) -> Path:
        return HOME / self.name

    @property
    def executable(self) -> Path:
        return self.folder / "bin" / "python"

    def interpreter(self) -> str | None:
        return interpreter(self.python)

    @property
    def torch(self) -> tuple[int, ...]:
        """Its torch version, from its pinned requirement."""
        pin = next(p for p in (*self.packages, *self.no_deps) if p.startswith("torch=="))
        return tuple(int(part) for part in pin.removeprefix("torch==").split("."))

    @property
    def ready(self) -> bool:
        """Its frameworks are installed as specified (the runtime is reinstalled each build)."""
        marker = self.folder / ".installed"
        return marker.exists() and marker.read_text() == repr(self)

    @property
    def no_room(self) -> Path:
        """Where ``build`` writes why it left this environment unbuilt for lack of disk."""
        return HOME / f"{self.name}.no-room"


XLA_WITH_GRAD_SCALER = "py311-torch-xla2.8"
NEWEST_NEURON_IMAGE = "py312-torch-xla2.9"
NEWEST_GPU_IMAGE = "py312-torch2.14.0"
CHECKOV = "checkov"
IMAGE_CONFIG = "sagemaker-core"
# The maintained SageMaker SDK (v3)'s image configuration, which `make image-matrix` copies into
# the library (compiled_training/catalog/image-uri-config) and the tests hold the copy equal to.
SAGEMAKER_CORE = "sagemaker-core==2.27.0"
SAGEMAKER_V3 = "sagemaker==3.27.0"  # the SDK teams build pipelines with, on that core


def require(name: str) -> Environment:
    """The environment for a test: skips where this machine has no such Python or `build` left
    it unbuilt for lack of disk (naming the disk), fails where it was not built otherwise."""
    import pytest

    env = named(name)
    if not env.ready:
        why, known = unbuilt(env)
        if known:
            pytest.skip(why)
        raise AssertionError(why)
    return env


def built(name: str) -> Environment:
    """The environment for a script (``make run-local``, ``make image-matrix``): exits with one
    line saying why where it is not built."""
    env = named(name)
    if not env.ready:
        raise SystemExit(unbuilt(env)[0])
    return env


def unbuilt(env: Environment) -> tuple[str, bool]:
    """Why ``env`` is not built, and whether that is this machine's (no such Python, no room)
    rather than a step left out."""
    if env.interpreter() is None:
        return f"no Python {env.python} on this machine for {env.purpose}", True
    if env.no_room.exists():
        return env.no_room.read_text(), True
    return f"{env.name} is not built: run `make test-envs`", False


def named(name: str) -> Environment:
    return next(env for env in ENVS if env.name == name)


ENVS = (
    # The tools first: small, and the template scans and the image matrix's tests need them.
    # A second template scanner; it pins its own boto3 and friends.
    Environment(CHECKOV, "checkov, CloudFormation checks run offline on cdk.out", "3.11",
                ("checkov>=3.2",), runtime=False),
    # SDK v3, whose image configuration the library ships and whose `image_uris.retrieve` is the
    # oracle of the URIs: SDK v2 (the other oracle) pins sagemaker-core<2, so they cannot share.
    # The whole SDK (and moto, standing in for AWS) builds the pipelines teams write with it
    # today (tests/local/sdk_v3_build.py).
    Environment(IMAGE_CONFIG, "the SageMaker SDK v3 and its image configuration", "3.11",
                (SAGEMAKER_CORE, SAGEMAKER_V3, "moto==5.2.5"), runtime=False, disk_gib=0.8),
    # The newest PyTorch training DLC (pytorch:2.14-cu133-amzn2023-sagemaker): its Python, torch
    # and SageMaker toolkit, as its image config and uv.lock pin them (torch 2.14.0, Python 3.12,
    # sagemaker-training, sagemaker-pytorch-training); the runtime, warm starts and local runs of
    # torch.compile pipelines run in it. Built first after the tools, whatever the disk: its CUDA
    # 13 libraries share nothing with the others. It replaced pytorch-training:2.10.0's (Python
    # 3.13), to keep the disk. Transformers and accelerate, pinned, are what a team's Trainer
    # script brings (its requirements.txt); the synth's catalog of TrainingArguments
    # (make training-arguments) is read from this transformers.
    Environment(NEWEST_GPU_IMAGE, "pytorch:2.14-cu133-amzn2023-sagemaker (Python 3.12)", "3.12",
                ("torch==2.14.0", "numpy", "transformers==5.24.0", "accelerate==1.12.0",
                 "sagemaker-training", "sagemaker-pytorch-training"), essential=True,
                disk_gib=5.5),
    # torch-xla 2.9 removed torch_xla.amp.GradScaler, which the Training Compiler images have;
    # with the toolkit and the PyTorch DLCs' launcher logic, as in those images. The local run's
    # XLA steps train in it.
    Environment(XLA_WITH_GRAD_SCALER, "torch-xla with torch_xla.amp.GradScaler (2.8)", "3.11",
                ("torch==2.8.0", "torch-xla==2.8.1", "transformers>=4.46,<6",
                 "sagemaker-training", "sagemaker-pytorch-training"), torch_xla=True,
                disk_gib=3.5),
    # The newest PyTorch NeuronX training DLC's Python and torch
    # (pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0), the image neuron_xla() resolves:
    # PyPI's torch-xla 2.9 stands in for the Neuron SDK's build of it (torch-neuronx and
    # neuronx-cc exist only inside the image), with the toolkit and the PyTorch DLCs' launcher
    # logic, which the Neuron images run too.
    Environment(NEWEST_NEURON_IMAGE, "pytorch-training-neuronx:2.9.0 (Python 3.12)", "3.12",
                ("torch==2.9.0", "torch-xla==2.9.0", "transformers>=4.46,<6",
                 "sagemaker-training", "sagemaker-pytorch-training"), torch_xla=True,
                disk_gib=3.0),
    # The frozen Training Compiler images, last: their CUDA 11 and 10.2 libraries share nothing.
    Environment("py39-torch1.13.1", "pytorch-trcomp-training:1.13.1 (Python 3.9)", "3.9",
                ("torch==1.13.1", "numpy<2", *_TRANSFORMERS_4_21_NEEDS),
                ("transformers==4.21.1",), disk_gib=3.5),
    Environment("py38-torch1.11.0", "huggingface-pytorch-trcomp-training, PyTorch 1.11, "
                "Transformers 4.21.1 (Python 3.8)", "3.8",
                ("torch==1.11.0", "numpy<1.25", *_TRANSFORMERS_4_21_NEEDS),
                ("transformers==4.21.1",), disk_gib=2.0),
)


def interpreter(version: str) -> str | None:
    """This Python version (``3.13``) on the machine: on PATH, or among pyenv's versions."""
    found = shutil.which(f"python{version}")
    if found and _runs(found):
        return found
    pattern = str(Path.home() / ".pyenv" / "versions" / f"{version}.*" / "bin" /
                  f"python{version}")
    return next((p for p in sorted(glob.glob(pattern)) if _runs(p)), None)


def _runs(python: str) -> bool:
    return subprocess.run([python, "-c", "import venv"], capture_output=True,
                          check=False).returncode == 0


def runtime_wheel() -> Path:
    """The runtime wheel that RuntimeImage stages into an image's build context."""
    from compiled_training.image.runtime_wheel import runtime_wheel as build_wheel

    name, data = build_wheel()
    HOME.mkdir(exist_ok=True)
    (HOME / name).write_bytes(data)
    return HOME / name


def build(env: Environment, wheel: Path | None) -> str:
    """Builds ``env`` where it is not built; ``wheel``: the runtime, for those that take it."""
    interpreter = env.interpreter()
    if interpreter is None:
        return f"skipped {env.name}: no Python {env.python} on this machine"
    # Compiled to bytecode once here: the run's many processes (and the local runner's jobs,
    # which write none) then read it instead of compiling torch at every start.
    install = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--compile-bytecode",
               "--python", str(env.executable)]
    if not env.ready:
        # The test run writes under the temporary folder, which may be another disk.
        free = min(shutil.disk_usage(folder).free for folder in (HOME, tempfile.gettempdir()))
        short = lacks_room(env, free)
        if short:
            env.no_room.write_text(short)
            return f"skipped: {short}"
        env.no_room.unlink(missing_ok=True)
        if not env.executable.exists():
            subprocess.run([interpreter, "-m", "venv", str(env.folder)], check=True)
        if env.packages:
            subprocess.run([*install, *env.packages], check=True)
        if env.no_deps:
            subprocess.run([*install, "--no-deps", *env.no_deps], check=True)
        (env.folder / ".installed").write_text(repr(env))
    if env.runtime:
        assert wheel is not None, f"{env.name} takes the runtime wheel"
        # Every time, since the runtime changes: the image's wheel, installed as the images'
        # Dockerfiles install it (pip install --no-deps), never touching the image's own torch.
        subprocess.run([*install, "--no-deps", "--reinstall", str(wheel)], check=True)
    return f"ready {env.name} ({env.purpose})"


RESERVE_GIB = 2.0
"""What the test run itself writes beside the environments, with room to spare: a passing
test's folder goes when it ends (pyproject's tmp_path_retention_policy), so the run holds
little more than the few tests running at once (docs/guides/testing.md has the measurement)."""


def lacks_room(env: Environment, free_bytes: int) -> str | None:
    """Why ``env`` is not built with this much free disk, or None where it fits beside the
    test run's reserve."""
    free = free_bytes / 2**30
    if env.essential or free - env.disk_gib >= RESERVE_GIB:
        return None
    return (f"{env.name} ({env.purpose}) is not built: {free:.1f} GiB free on this disk, and it "
            f"takes about {env.disk_gib} GiB beside the {RESERVE_GIB} GiB the test run keeps")


def site_packages(env: Environment) -> Path:
    (folder,) = (env.folder / "lib").glob("python3.*/site-packages")
    return folder


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - {env.name for env in ENVS})
    if unknown:
        sys.exit(f"no test environment named {', '.join(unknown)}; name some of "
                 f"{', '.join(env.name for env in ENVS)}, or none for all")
    chosen = [env for env in ENVS if not names or env.name in names]
    # The tool environments take no runtime: building only those builds no wheel.
    wheel = runtime_wheel() if any(env.runtime for env in chosen) else None
    os.environ.pop("PYTHONPATH", None)
    # As make sets it: on the environments' file system, so that uv can hard-link.
    os.environ.setdefault("UV_CACHE_DIR", str(HOME / "uv-cache"))
    for env in chosen:
        print(f"test environments: {build(env, wheel)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
