"""What every step of one local execution shares: the workdir, the interpreters that stand in
for the images, the run's stand-in AWS, and what the command line gave."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiled_training.catalog.aws_names import arn_prefix
from compiled_training.local.assembly import StackReader
from compiled_training.local.container import Job

DEFAULT_IMAGE = ""
"""The key of ``Run.pythons`` for every image kind not named with ``--python KIND=...``."""


@dataclass(frozen=True)
class Handler:
    """A Lambda step's handler given with ``--lambda STEP=DIR:module.function``."""

    folder: Path
    handler: str


@dataclass
class Run:
    """What every step of one local execution shares."""

    workdir: Path
    pythons: Mapping[str, str]
    """The interpreter standing in for each image kind (`images.KINDS`); ``""`` the rest."""
    processes: int
    s3: Any
    """The run's S3 (a boto3 client of the in-process AWS)."""
    stack: StackReader | None
    account: str
    region: str
    isolated: bool = True
    """Jobs run in their own mount namespace (`container`)."""
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    """``--set STEP.NAME=VALUE``: hyperparameters by step."""
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``--outputs STEP=FILE``: properties of steps not run here."""
    handlers: dict[str, Handler] = field(default_factory=dict)
    """``--lambda STEP=DIR:module.function``: Lambda steps' code."""
    notes: list[str] = field(default_factory=list)
    compile_caches: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The warm start's summary of each training step that carried a compile cache."""
    unmatched_metrics: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each training step's metrics whose regex never matched its log: why, by metric."""
    execution: str = "local"
    """The execution's id: jobs are named after their step and it."""
    endpoint: str | None = None
    """The run's AWS over HTTP, where a job's own AWS calls go (`aws.endpoint`)."""

    def python(self, kind: str) -> str:
        return self.pythons.get(kind) or self.pythons[DEFAULT_IMAGE]

    def job(self, step: str) -> Job:
        name = f"{step.lower()}-{self.execution}"[:63]
        return Job(self.workdir / "steps" / step, name, self.isolated)

    def arn(self, service: str) -> str:
        """``arn:<partition>:<service>:<region>:<account>``, in the run's partition."""
        return arn_prefix(service, self.region, self.account)
