"""`TrainingImage`: where a training job's image comes from, one choice that grants its pull.

As aws-stepfunctions-tasks' ``DockerImage``: the choice and the grant it implies live together.
``bind`` returns the URI and lets the execution role pull the image (its repository only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Annotations

from compiled_training.catalog.dlc import DlcImage
from compiled_training.definition import validation
from compiled_training.typecheck import check_arguments
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.wiring.dlc_uri import dlc_image_uri
from compiled_training.wiring.policy import InlinePolicy
from compiled_training.wiring.stack_reads import format_arn, stack_of
from constructs import Construct

if TYPE_CHECKING:
    from aws_cdk import aws_ecr as ecr  # in a repository given, so loaded by its maker

    # Imported for type checkers only: the image build's modules (CodeBuild, Lambda, events)
    # cost every synth a third of a second, and a pipeline that uses no RuntimeImage needs none.
    from compiled_training.image.runtime_image import RuntimeImage
DEFERRED_IMPORTS = {"ecr": "aws_cdk.aws_ecr",
                    "RuntimeImage": "compiled_training.image.runtime_image:RuntimeImage"}
"""The imports above, made by the boundary check when it reads an argument naming one."""


@dataclass(frozen=True)
class BoundImage:
    """A `TrainingImage` bound to a pipeline."""

    image_uri: str
    """The URI the training job runs; empty when no DLC exists for the job (the rules say
    why, with the rest)."""
    description: str
    """What the synth summary shows."""
    dlc: DlcImage | None = None
    """The Deep Learning Container, for ``TrainingImage.dlc()``."""


class TrainingImage:
    """The image a training job runs in. Build one with a static method."""

    def __init__(self, kind: str, *, image_uri: str | None = None,
                 repository: ecr.IRepository | None = None, tag: str | None = None,
                 runtime_image: RuntimeImage | None = None) -> None:
        self._kind = kind
        self._image_uri = image_uri
        self._repository = repository
        self._tag = tag
        self._runtime_image = runtime_image

    @staticmethod
    def dlc() -> TrainingImage:
        """The framework's AWS Deep Learning Container for the job's compiler and instance
        type, from the image matrix the library ships (the SageMaker SDK v3's image
        configuration; the default)."""
        return TrainingImage("dlc")

    @staticmethod
    def from_registry(image_uri: str) -> TrainingImage:
        """Any image by URI. Nothing is granted: the execution role must already be allowed
        to pull it (a warning says so); for an ECR repository, ``from_ecr_repository``
        grants the pull."""
        check_arguments(TrainingImage.from_registry, locals())
        return TrainingImage("registry", image_uri=image_uri)

    @staticmethod
    def from_ecr_repository(repository: ecr.IRepository, tag: str | None = None
                            ) -> TrainingImage:
        """An image in an ECR repository (this app's, or imported), by tag; when ``tag`` is
        omitted, ``latest``. The execution role may pull from that repository only."""
        check_arguments(TrainingImage.from_ecr_repository, locals())
        return TrainingImage("ecr", repository=repository, tag=tag or "latest")

    @staticmethod
    def from_runtime_image(runtime_image: RuntimeImage) -> TrainingImage:
        """A `RuntimeImage`: the compiled-training runtime on a DLC, built in this app. The
        execution role may pull from its repository only."""
        check_arguments(TrainingImage.from_runtime_image, locals())
        return TrainingImage("runtime", runtime_image=runtime_image)

    def bind(self, scope: Construct, policy: InlinePolicy, *, framework: Framework,
             compiler: Compiler, instance_type: str) -> BoundImage:
        """The image for a job of ``framework`` and ``compiler`` on ``instance_type`` in
        ``scope``; its repository's pull goes into ``policy``, the execution role's."""
        if self._runtime_image is not None:
            image = self._runtime_image
            policy.allow_pull(image.repository.repository_arn)
            return BoundImage(image.image_uri,
                              f"runtime image {image.node.path} ({image.build_mode.value} "
                              f"build) on {image.dlc.path}")
        if self._repository is not None:
            policy.allow_pull(self._repository.repository_arn)
            return BoundImage(self._repository.repository_uri_for_tag(self._tag),
                              f"ECR repository {self._repository.node.path}, tag {self._tag}")
        if self._image_uri is not None:
            Annotations.of(scope).add_warning_v2(
                "compiled-training:TrainingImage:NoPullGranted",
                f"image {self._image_uri} (TrainingImage.from_registry) gets no pull grant: "
                "allow ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on its repository, "
                "or use TrainingImage.from_ecr_repository")
            return BoundImage(self._image_uri, "custom image")
        dlc = try_resolve_dlc(framework, compiler, instance_type)
        if dlc is None:
            return BoundImage("", "no image")
        try:
            image_uri, account = dlc_image_uri(scope, dlc)
        except ValueError as error:  # a region without the image, named like the other errors
            raise ValueError(f"{type(scope).__name__} {scope.node.path}: {error}") from None
        policy.allow_pull(dlc_repository_arn(scope, dlc, account))
        return BoundImage(image_uri, dlc.path, dlc)


def try_resolve_dlc(framework: Framework, compiler: Compiler, instance_type: str
                    ) -> DlcImage | None:
    """The DLC, or None when there is none: `validation.check` then reports why, with the rest."""
    if not validation.known_instance_type(instance_type):
        return None
    if compiler.module.image_problem(instance_type):
        return None
    try:
        return compiler.module.image(framework, instance_type)
    except ValueError:
        return None


def dlc_repository_arn(scope: Construct, dlc: DlcImage, account: str) -> str:
    """A DLC's repository in its registry account, for a pull permission on it alone."""
    return format_arn(stack_of(scope), service="ecr", account=account, resource="repository",
                      resource_name=dlc.repository)
