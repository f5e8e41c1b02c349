"""`RuntimeImage`: the training runtime built into an image on top of a compiler DLC.

Two build modes. *Local*: a Docker image asset that the deploying machine's Docker builds
(it must log in to the DLC registry first, see the README). *Cloud*: no local Docker; the
staged build context goes to S3 and the stack's one CodeBuild project, started at deploy time
by the stack's one custom-resource function, logs in to the DLC registry and to the target
repository, builds and pushes; the build's end reports back to CloudFormation (see
``_builder.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from enum import Enum
from importlib import resources
from pathlib import Path

from aws_cdk import CustomResource, RemovalPolicy, Stack, Token
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets

from compiled_training.catalog.dlc import DlcImage
from compiled_training.image._builder import ImageBuilder
from compiled_training.image.runtime_wheel import runtime_wheel
from compiled_training.typecheck import check_arguments
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.wiring.acknowledgements import skip_checkov
from compiled_training.wiring.dlc_uri import dlc_image_uri
from compiled_training.wiring.stack_reads import free_id
from constructs import Construct

# The top-level images/ folder, shipped inside the package (see pyproject.toml).
IMAGES_DIR = Path(str(resources.files("compiled_training.dockerfiles")))
# ECR's repository-name rule (CreateRepository), 2-256 characters.
_REPOSITORY_NAME = re.compile(r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_KEEP_IMAGES = 20


class BuildMode(str, Enum):
    """Where a `RuntimeImage` is built: in the cloud at deploy time, or by the deploying
    machine's Docker."""

    LOCAL = "local"
    """The deploying machine's Docker builds a CDK image asset."""
    CLOUD = "cloud"
    """CodeBuild builds at deploy time; no local Docker needed."""


class RuntimeImage(Construct):
    """The compiled-training runtime on a Training Compiler, PyTorch or PyTorch NeuronX DLC,
    in ECR."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        framework: Framework,
        compiler: Compiler,
        build_mode: BuildMode | None = None,
        repository: ecr.IRepository | None = None,
        repository_name: str | None = None,
        kms_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy | None = None,
        instance_type: str | None = None,
        dockerfile_dir: str | Path | None = None,
        build_role: iam.IRole | None = None,
        build_handler_role: iam.IRole | None = None,
    ) -> None:
        """
        :param framework: selects the base DLC, with ``compiler``.
        :param compiler: Training Compiler builds on its DLC, ``neuron_xla`` on the PyTorch
            NeuronX DLC (Trainium); otherwise a PyTorch DLC.
        :param build_mode: when omitted, cloud (CodeBuild, no local Docker).
        :param repository: cloud mode; when omitted, a repository is created: scan on push,
            immutable tags, the last 20 images kept, encrypted (with ``kms_key`` or
            AES-256), retained when the stack is deleted.
        :param repository_name: for the created repository; when omitted, CloudFormation
            names it. A given name is yours to keep unique: the repository is retained when
            the stack is deleted, so a deploy after ``cdk destroy`` fails on the name until the
            retained repository is deleted, or passed back in with ``repository=``.
        :param kms_key: encrypts the created repository; when omitted, AES-256. The builds
            are the stack's, shared by its images, and use one key of the stack's own, with
            rotation.
        :param removal_policy: when omitted, RETAIN; DESTROY also empties the repository.
        :param instance_type: the training instance type the image is for (GPU, CPU or
            Trainium DLC); when omitted, a GPU instance, or ml.trn1.32xlarge for
            ``neuron_xla``.
        :param dockerfile_dir: a folder with a Dockerfile that installs the runtime wheel;
            when omitted, the library's ``training-compiler`` Dockerfile for Training Compiler,
            ``neuron-xla`` for ``neuron_xla`` and ``torch-compile`` otherwise (``images/`` in
            its repository).
        :param build_role: cloud mode: the role the stack's image build project runs as
            (it must trust codebuild.amazonaws.com); when omitted, one of its own. Given, as
            aws-cdk-lib's ``Project`` takes one: a role made in the app or imported mutable
            gets the grants (each image's context, base image and repository); an imported,
            immutable one gets nothing, and a warning lists the statements to grant it. The
            project is the stack's, so every runtime image of a stack gives the same role.
        :param build_handler_role: cloud mode: the role of the function that starts the
            builds and reports them to CloudFormation (it must trust lambda.amazonaws.com);
            as ``build_role`` otherwise.
        """
        check_arguments(RuntimeImage.__init__, locals())
        free_id(scope, construct_id, "RuntimeImage")
        super().__init__(scope, construct_id)
        self._build_role, self._build_handler_role = build_role, build_handler_role
        where = f"RuntimeImage {self.node.path}"
        self.build_mode = build_mode or BuildMode.CLOUD
        if not framework.is_deep_learning:
            raise ValueError(f"{where}: the runtime image needs a deep-learning framework, got "
                             f"{framework.describe()}")
        module = compiler.module
        instance_type = instance_type or module.default_instance_type
        if problem := module.runtime_image_problem(instance_type):
            raise ValueError(f"{where}: {problem}")
        try:
            self.dlc: DlcImage = module.image(framework, instance_type)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        folder = Path(dockerfile_dir) if dockerfile_dir else IMAGES_DIR / module.dockerfile
        if not (folder / "Dockerfile").is_file():
            raise ValueError(f"{where}: dockerfile_dir must hold a Dockerfile, none in "
                             f"{str(folder)!r}")
        if repository_name is not None and (
            not 2 <= len(repository_name) <= 256 or not _REPOSITORY_NAME.match(repository_name)
        ):
            raise ValueError(f"{where}: repository_name must be 2-256 characters of lowercase "
                             "letters, digits and . _ - / separators (ECR's rule), got "
                             f"{repository_name!r}")
        if self.build_mode is BuildMode.LOCAL and (repository or repository_name or kms_key
                                                   or build_role or build_handler_role):
            raise ValueError(f"{where}: repository, repository_name, kms_key, build_role and "
                             "build_handler_role apply to cloud builds; a local build pushes to "
                             "the CDK bootstrap asset repository")

        self.context_dir, self.tag = stage_context(folder, {"BASE_IMAGE": self.dlc.path})
        stack = Stack.of(self)
        self.base_image, self.registry_account = dlc_image_uri(self, self.dlc)
        if self.build_mode is BuildMode.LOCAL:
            if Token.is_unresolved(stack.region):
                raise ValueError(f"{where}: a local build needs a stack with a region: Docker "
                                 "takes BASE_IMAGE as a literal")
            asset = ecr_assets.DockerImageAsset(
                self, "Image", directory=str(self.context_dir),
                build_args={"BASE_IMAGE": self.base_image},
                platform=ecr_assets.Platform.LINUX_AMD64,
            )
            self.repository: ecr.IRepository = asset.repository
            self.image_uri = asset.image_uri
            return

        self.repository = repository or self._repository(repository_name, kms_key,
                                                         removal_policy or RemovalPolicy.RETAIN)
        build = self._build_on_deploy()
        self.image_uri = build.get_att_string("ImageUri")

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` pull this image."""
        return self.repository.grant_pull(grantee)

    @property
    def registry(self) -> str:
        """The DLC registry host the build logs in to, e.g. 763104351884.dkr.ecr.us-east-1..."""
        return self.base_image.split("/", 1)[0]

    # --- wiring --------------------------------------------------------------------------

    def _repository(self, name: str | None, kms_key: kms.IKey | None,
                    removal_policy: RemovalPolicy) -> ecr.Repository:
        repository = ecr.Repository(
            self, "Repository",
            repository_name=name,
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=(ecr.RepositoryEncryption.KMS if kms_key
                        else ecr.RepositoryEncryption.AES_256),
            encryption_key=kms_key,
            lifecycle_rules=[ecr.LifecycleRule(
                description=f"Keep the last {_KEEP_IMAGES} images",
                max_image_count=_KEEP_IMAGES)],
            removal_policy=removal_policy,
            empty_on_delete=removal_policy is RemovalPolicy.DESTROY,
        )
        if kms_key is None:
            skip_checkov(repository, {"CKV_AWS_136": "Encrypted at rest with AES-256 by "
                                                     "default; kms_key= selects a customer-"
                                                     "managed key."})
        return repository

    def _build_on_deploy(self) -> CustomResource:
        builder = ImageBuilder.of(self, build_role=self._build_role,
                                  build_handler_role=self._build_handler_role)
        # The stack's one project, shared with its other images.
        self.build_project: codebuild.IProject = builder.project
        context = s3_assets.Asset(self, "Context", path=str(self.context_dir))
        builder.add_image(repository=self.repository, context=context,
                          dlc_repository_arn=Stack.of(self).format_arn(
                              service="ecr", resource="repository",
                              resource_name=self.dlc.repository, account=self.registry_account))
        # Not "Resource": the custom resource of the Provider-framework builds this replaces
        # had that id, and CloudFormation cannot update a custom resource's ServiceToken.
        build = CustomResource(
            self, "ImageBuild",
            service_token=builder.handler.function_arn,
            resource_type="Custom::RuntimeImageBuild",
            properties={
                "RepositoryUri": self.repository.repository_uri,
                # The content hash: an unchanged image means no update, hence no build.
                "ImageTag": self.tag,
                "BaseImage": self.base_image,
                "DlcRegistry": self.registry,
                "ContextUrl": context.s3_object_url,
            },
        )
        # The build's grants, and the rule that reports its end, exist before it starts (the
        # handler's own grants come with the function, which the service token references). A
        # given role's grants are a policy of its own, outside the project and the function.
        build.node.add_dependency(builder.project, builder.rule, *(
            role for role in builder.given_roles.values() if role is not None))
        return build


def stage_context(dockerfile_dir: Path, build_args: dict[str, str]) -> tuple[Path, str]:
    """The build context (the Dockerfile and the installed runtime's wheel, nothing else) and
    its tag.

    The tag is a content hash of the context and the build arguments: unchanged inputs give
    an unchanged template, a changed runtime a new tag.
    """
    wheel_name, wheel = runtime_wheel()
    files = {Path("Dockerfile"): (dockerfile_dir / "Dockerfile").read_bytes(),
             Path(wheel_name): wheel}
    digest = hashlib.sha256(json.dumps(build_args, sort_keys=True).encode())
    for path in sorted(files, key=lambda p: p.as_posix()):
        digest.update(path.as_posix().encode() + b"\0" + files[path] + b"\0")
    tag = digest.hexdigest()[:20]
    folder = Path(tempfile.gettempdir()) / "compiled-training-context" / tag
    if not folder.exists():
        # Staged apart and renamed into place: two synths at once (parallel test workers, two
        # apps) each stage their own copy; the first rename wins and the same bytes of the
        # other are dropped.
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{tag}.", dir=folder.parent))
        staging.chmod(0o755)  # as a folder made with mkdir (mkdtemp makes it private)
        for path, data in files.items():
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            (staging / path).write_bytes(data)
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
            shutil.rmtree(staging, ignore_errors=True)
    return folder, tag
