"""Where a ``torch.compile`` job keeps its compile cache between runs (the runtime's
``warm_start``), and why a job compiles cold every run instead; where Neuron's is; and when the
runtime's launcher goes in front of a team's script to carry the cache for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from compiled_training.advice.priors import CACHE_EXPIRY_DAYS
from compiled_training.catalog.api_shapes import is_token
from compiled_training.compilers.base import minor
from compiled_training.definition.entry_point import RUNTIME_PACKAGE, imports_runtime
from compiled_training.values.compiler import Compiler
from compiled_training.values.job import Distribution, TrainingJob
from compiled_training_runtime import contract

COMPILE_CACHE = "compile-cache"
"""The folder of the pipeline's prefix that holds its jobs' compile caches, one per step."""
NEURON_COMPILE_CACHE = "neuron-compile-cache"
"""The folder of the pipeline's prefix where Neuron jobs keep compiled graphs across runs."""
CACHE_FOLDERS = (COMPILE_CACHE, NEURON_COMPILE_CACHE)
"""What a pipeline's prefix keeps from one execution for the next."""
EXPIRY_DAYS = CACHE_EXPIRY_DAYS
"""The library's bucket expires an archive this many days after a run last saved it: every run
saves it again, so only a cache no run uses any more (an old image or instance type) goes (the
advisor counts a workload that runs less often than this as cold every run)."""


@dataclass(frozen=True)
class CachePlan:
    """One job's compile-cache decision, made once (`plan`) and read by every part of its
    request: where its cache lives, or why it starts cold, and who carries it."""

    inductor: bool
    """Whether the job compiles with Inductor, whose caches this carries (the native TorchNeuron
    backend on Trainium compiles with neuronx-cc instead)."""
    cold_because: str | None
    """Why an Inductor job starts cold every run; None where its cache is on (or no Inductor)."""
    uri: str | None
    """The job's cache prefix, one per step (so per benchmark arm; the runtime keys it further
    by compiler mode, backend, versions and instance type), or None where it starts cold."""
    launched: bool
    """Whether the job's entry point is the runtime's launcher, which restores the compile
    cache, runs the team's script and saves the cache (`contract.LAUNCHER`)."""
    environment: Mapping[str, str]
    """What the runtime's warm start reads: the prefix and the key it encrypts with; and the
    team's script, where the launcher runs it."""


def plan(job: TrainingJob) -> CachePlan:
    """The job's compile-cache decision."""
    inductor = job.compiler.module.compiles_with_inductor(job.instance_type)
    cold_because = _cold_start_reason(job) if inductor else None
    uri = (f"{job.torch_compile_cache_s3_uri}{job.step_name}/"
           if inductor and cold_because is None else None)
    launched = (uri is not None and job.source_dir is not None
                and job.distribution in LAUNCHED_DISTRIBUTIONS
                and ships_launcher(job.compiler, job.entry_point, job.source_dir))
    environment: dict[str, str] = {}
    if uri is not None:
        environment[contract.ENV_COMPILE_CACHE_URL] = uri
        if job.kms_key_id:
            environment[contract.ENV_COMPILE_CACHE_KMS_KEY_ID] = job.kms_key_id
        if launched:
            environment[contract.ENV_ENTRY_POINT] = str(job.entry_point)
    return CachePlan(inductor, cold_because, uri, launched, MappingProxyType(environment))


def _cold_start_reason(job: TrainingJob) -> str | None:
    if job.torch_compile_cache_s3_uri is None:
        return "compile_cache is off"
    version = job.framework.pytorch_version or "0"
    if minor(version) < minor(contract.COMPILE_CACHE_SINCE):
        return (f"PyTorch {version} predates the compile caches this carries (Inductor's FX "
                f"graph and AOTAutograd caches need {contract.COMPILE_CACHE_SINCE}, PyTorch's "
                f"caching recipe)")
    if job.network_isolation:
        return ("network_isolation cuts the job off from S3, where the job itself restores and "
                "saves the cache, and what SageMaker moves for an isolated job cannot carry it "
                "(a channel over a first run's empty prefix fails the job; checkpoints and "
                "outputs land under one execution's keys)")
    return None


# The launchers the warm start's launcher runs under: one process, or torchrun's processes
# (xla_spawn imports the entry point to call its _mp_fn; MPI names its ranks otherwise).
LAUNCHED_DISTRIBUTIONS = (Distribution.NONE, Distribution.TORCH_DISTRIBUTED)


def launcher_refusal(source_dir: Path) -> str | None:
    """Why the launcher cannot go in front of a script of ``source_dir``, or None."""
    if (source_dir / RUNTIME_PACKAGE).exists():
        return f"source_dir holds a {RUNTIME_PACKAGE} folder of its own"
    if (source_dir / "setup.py").exists():
        return "source_dir holds a setup.py (the toolkit runs its entry point with python -m)"
    return None


def ships_launcher(compiler: Compiler, entry_point: str | None, source_dir: Path) -> bool:
    """Whether the code archive carries the runtime for its launcher: a torch.compile pipeline
    whose script does not use the runtime itself (a script that does keeps control)."""
    return (compiler.module.compiles_with_inductor(None) and bool(entry_point)
            and not is_token(entry_point) and str(entry_point).endswith(".py")
            and launcher_refusal(source_dir) is None
            and imports_runtime(str(entry_point), source_dir) is False)
