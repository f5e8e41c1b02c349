"""What every step of one local execution shares: the workdir, the interpreters that stand in
for the images, the run's stand-in AWS, and what the command line gave."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiled_training.catalog.aws_names import arn_prefix
from compiled_training.local.assembly import StackReader
from compiled_training.local.aws import access_denied
from compiled_training.local.container import Job
from compiled_training.local.expressions import StepFailed
from compiled_training.local.roles import Roles

STAND_IN_KEY = "local"
"""The access key of every call made as no role of the stack (not checked)."""

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
    roles: Roles | None = None
    """The stack's roles, deciding each job's S3 calls; None where the run does not check them."""
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def access_key(self, role: Any) -> str:
        """The access key a job of ``role`` (its step's ``RoleArn``) calls AWS with."""
        found = self.roles.access_key(str(role)) if self.roles else None
        return found or STAND_IN_KEY

    @contextmanager
    def transfers(self, role: Any) -> Iterator[Any]:
        """The run's S3 as SageMaker calls it for a job of ``role``: checked as that role,
        where the run checks roles; AWS's AccessDenied fails the step, naming the action."""
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import ClientError

        key = self.access_key(role)
        if key == STAND_IN_KEY or not self.endpoint:
            yield self.s3
            return
        if key not in self._clients:
            import boto3

            self._clients[key] = boto3.client(
                "s3", endpoint_url=self.endpoint, region_name=self.region,
                aws_access_key_id=key, aws_secret_access_key=STAND_IN_KEY)
        denied = len(self.roles.denied) if self.roles else 0
        try:
            yield self._clients[key]
        except (ClientError, S3UploadFailedError) as error:
            fresh = self.roles.denied[denied:] if self.roles else []
            if not fresh or not access_denied(error):
                raise
            # The runner's own transfer is the last call denied (the job's ran before it).
            raise StepFailed(f"ClientError: AccessDenied: {fresh[-1]}") from None

    def python(self, kind: str) -> str:
        return self.pythons.get(kind) or self.pythons[DEFAULT_IMAGE]

    def job(self, step: str) -> Job:
        name = f"{step.lower()}-{self.execution}"[:63]
        return Job(self.workdir / "steps" / step, name, self.isolated)

    def arn(self, service: str) -> str:
        """``arn:<partition>:<service>:<region>:<account>``, in the run's partition."""
        return arn_prefix(service, self.region, self.account)
