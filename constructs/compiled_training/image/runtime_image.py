"""`RuntimeImage`: the training runtime built into an image on top of a compiler DLC.

Two build modes. *Local*: a Docker image asset that the deploying machine's Docker builds
(it must log in to the DLC registry first, see the README). *Cloud*: no local Docker; the
staged build context goes to S3 and a CodeBuild project, started at deploy time by a custom
resource, logs in to the DLC registry and to the target repository, builds and pushes.
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

from aws_cdk import (
    ArnFormat,
    CustomResource,
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    custom_resources,
)
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_stepfunctions as stepfunctions

from compiled_training._internal.dlc import DlcImage, resolve_dlc
from compiled_training._internal.dlc_uri import dlc_image_uri
from compiled_training._internal.handlers import handler_code
from compiled_training._internal.typecheck import check_arguments
from compiled_training.image.runtime_wheel import runtime_wheel
from compiled_training.nag.acknowledgements import (
    LOG_GROUP_WITHOUT_KMS,
    acknowledge,
    acknowledge_wildcards,
    allow_redundant_role_dependency,
    skip_checkov,
    skip_checkov_for_function,
)
from compiled_training.pipelines.compiler import Compiler, CompilerKind
from compiled_training.pipelines.framework import Framework
from constructs import Construct

# The top-level images/ folder, shipped inside the package (see pyproject.toml).
IMAGES_DIR = Path(str(resources.files("compiled_training.dockerfiles")))
# ECR's repository-name rule (CreateRepository), 2-256 characters.
_REPOSITORY_NAME = re.compile(r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_KEEP_IMAGES = 20


class BuildMode(str, Enum):
    LOCAL = "local"
    """The deploying machine's Docker builds a CDK image asset."""
    CLOUD = "cloud"
    """CodeBuild builds at deploy time; no local Docker needed."""


class RuntimeImage(Construct):
    """The compiled-training runtime on a Training Compiler or PyTorch DLC, in ECR."""

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
    ) -> None:
        """
        :param framework: selects the base DLC, with ``compiler``.
        :param compiler: Training Compiler builds on its DLC; otherwise a PyTorch DLC.
        :param build_mode: when omitted, cloud (CodeBuild, no local Docker).
        :param repository: cloud mode; when omitted, a repository is created: scan on push,
            immutable tags, the last 20 images kept, encrypted (with ``kms_key`` or
            AES-256), retained when the stack is deleted.
        :param repository_name: for the created repository; when omitted, CloudFormation
            names it. A given name is yours to keep unique: the repository is retained when
            the stack is deleted, so a deploy after ``cdk destroy`` fails on the name until the
            retained repository is deleted, or passed back in with ``repository=``.
        :param kms_key: encrypts the created repository and the build; when omitted, the
            repository uses AES-256 and the build a new key with rotation.
        :param removal_policy: when omitted, RETAIN; DESTROY also empties the repository.
        :param instance_type: the training instance type the image is for (GPU or CPU DLC);
            when omitted, a GPU instance.
        :param dockerfile_dir: a folder with a Dockerfile that installs the runtime wheel;
            when omitted, the library's ``training-compiler`` Dockerfile for Training Compiler
            and ``torch-compile`` otherwise (``images/`` in its repository).
        """
        check_arguments(RuntimeImage.__init__, locals())
        super().__init__(scope, construct_id)
        where = f"RuntimeImage {self.node.path}"
        self.build_mode = build_mode or BuildMode.CLOUD
        if not framework.is_deep_learning:
            raise ValueError(f"{where}: the runtime image needs a deep-learning framework, got "
                             f"{framework.describe()}")
        try:
            self.dlc: DlcImage = resolve_dlc(framework, compiler.is_training_compiler,
                                             instance_type or "ml.g5.xlarge")
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        folder = Path(dockerfile_dir) if dockerfile_dir else IMAGES_DIR / (
            "training-compiler" if compiler.kind is CompilerKind.TRAINING_COMPILER
            else "torch-compile")
        if not (folder / "Dockerfile").is_file():
            raise ValueError(f"{where}: dockerfile_dir must hold a Dockerfile, none in "
                             f"{str(folder)!r}")
        if repository_name is not None and (
            not 2 <= len(repository_name) <= 256 or not _REPOSITORY_NAME.match(repository_name)
        ):
            raise ValueError(f"{where}: repository_name must be 2-256 characters of lowercase "
                             "letters, digits and . _ - / separators (ECR's rule), got "
                             f"{repository_name!r}")
        if self.build_mode is BuildMode.LOCAL and (repository or repository_name or kms_key):
            raise ValueError(f"{where}: repository, repository_name and kms_key apply to cloud "
                             "builds; a local build pushes to the CDK bootstrap asset repository")

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
        self.build_project = self._build_project(kms_key)
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

    def _build_project(self, kms_key: kms.IKey | None) -> codebuild.Project:
        stack = Stack.of(self)
        context = s3_assets.Asset(self, "Context", path=str(self.context_dir))
        key = kms_key or kms.Key(self, "BuildKey", enable_key_rotation=True,
                                 description=f"Encrypts the image builds of {self.node.path}")
        log_group = logs.LogGroup(self, "BuildLogs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        skip_checkov(log_group, LOG_GROUP_WITHOUT_KMS)
        project = codebuild.Project(
            self, "Build",
            description=f"Builds the compiled-training runtime on {self.dlc.path}",
            source=codebuild.Source.s3(bucket=context.bucket, path=context.s3_object_key),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=codebuild.ComputeType.LARGE,
                privileged=True,  # docker build needs the Docker daemon
            ),
            environment_variables={
                "BASE_IMAGE": codebuild.BuildEnvironmentVariable(value=self.base_image),
                "DLC_REGISTRY": codebuild.BuildEnvironmentVariable(value=self.registry),
                "REPOSITORY_URI": codebuild.BuildEnvironmentVariable(
                    value=self.repository.repository_uri),
            },
            build_spec=codebuild.BuildSpec.from_object(BUILD_SPEC),
            encryption_key=key,
            timeout=Duration.hours(2),
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(
                log_group=log_group)),
        )
        dlc_repository = stack.format_arn(
            service="ecr", resource="repository", resource_name=self.dlc.repository,
            account=self.registry_account)
        project.add_to_role_policy(iam.PolicyStatement(
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                     "ecr:BatchCheckLayerAvailability"],
            resources=[dlc_repository]))
        self.repository.grant_push(project)
        acknowledge(project, "AwsSolutions-CB3",
                    "docker build runs the Docker daemon, which needs privileged mode.")
        assert project.role is not None
        policy = project.role.node.find_child("DefaultPolicy").node.default_child
        assert policy is not None
        acknowledge_wildcards(policy, {
            "*": "ecr:GetAuthorizationToken supports no resource-level permission; pushes "
                 "and pulls are limited to the target and DLC repositories.",
            stack.format_arn(service="logs", resource="log-group",
                             resource_name=f"/aws/codebuild/{project.project_name}:*",
                             arn_format=ArnFormat.COLON_RESOURCE_NAME):
                "CodeBuild's default log group for this project, streams named at run time.",
            stack.format_arn(service="codebuild", resource="report-group",
                             resource_name=f"{project.project_name}-*"):
                "CodeBuild names this project's report groups at run time.",
        })
        for action, why in (
            ("s3:GetObject*", "CDK's read grant on the build context: the one staged object."),
            ("s3:GetBucket*", "CDK's read grant on the build context's bucket."),
            ("s3:List*", "CDK's read grant on the build context's bucket."),
            ("kms:ReEncrypt*", "CDK's grant on this build's own key."),
            ("kms:GenerateDataKey*", "CDK's grant on this build's own key."),
        ):
            acknowledge(policy, f"AwsSolutions-IAM5[Action::{action}]", why)
        return project

    def _build_on_deploy(self) -> CustomResource:
        project = self.build_project
        handlers = {}
        for name in ("on_event", "is_complete"):
            function = lambda_.Function(
                self, "OnEvent" if name == "on_event" else "IsComplete",
                runtime=lambda_.Runtime.PYTHON_3_14,
                code=handler_code("image_build"),
                handler=f"image_build.{name}",
                timeout=Duration.minutes(1),
                description=f"Image build of {self.node.path}: {name.replace('_', ' ')}",
            )
            function.add_to_role_policy(iam.PolicyStatement(
                actions=["codebuild:StartBuild" if name == "on_event"
                         else "codebuild:BatchGetBuilds"],
                resources=[project.project_arn]))
            if name == "on_event":  # no build when the tag is already pushed (rollbacks)
                function.add_to_role_policy(iam.PolicyStatement(
                    actions=["ecr:DescribeImages"],
                    resources=[self.repository.repository_arn]))
            acknowledge(function, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                                  "policy/service-role/AWSLambdaBasicExecutionRole]",
                        "The AWS-managed basic execution role only lets the function write "
                        "its own logs.")
            skip_checkov_for_function(function, "The image build's custom resource: it "
                                                "starts and polls one CodeBuild build")
            handlers[name] = function
            cfn_function = function.node.default_child
            assert isinstance(cfn_function, lambda_.CfnFunction)
            allow_redundant_role_dependency(cfn_function)
        provider_logs = logs.LogGroup(self, "ProviderLogs",
                                      retention=logs.RetentionDays.THREE_MONTHS,
                                      removal_policy=RemovalPolicy.DESTROY)
        skip_checkov(provider_logs, LOG_GROUP_WITHOUT_KMS)
        provider = custom_resources.Provider(
            self, "Provider",
            on_event_handler=handlers["on_event"],
            is_complete_handler=handlers["is_complete"],
            query_interval=Duration.seconds(30),
            total_timeout=Duration.hours(2),
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=custom_resources.LogOptions(
                destination=provider_logs, level=stepfunctions.LogLevel.ALL,
                include_execution_data=False),
        )
        _acknowledge_provider(provider, list(handlers.values()))
        return CustomResource(
            self, "Resource",
            service_token=provider.service_token,
            resource_type="Custom::RuntimeImageBuild",
            properties={
                "ProjectName": project.project_name,
                "RepositoryUri": self.repository.repository_uri,
                # The content hash: an unchanged image means no update, hence no build.
                "ImageTag": self.tag,
            },
        )


BUILD_SPEC = {
    "version": "0.2",
    "phases": {
        "pre_build": {"commands": [
            # The DLC registry is an AWS-owned account of the region: it needs its own login.
            "aws ecr get-login-password --region $AWS_REGION"
            " | docker login --username AWS --password-stdin $DLC_REGISTRY",
            "aws ecr get-login-password --region $AWS_REGION"
            " | docker login --username AWS --password-stdin ${REPOSITORY_URI%%/*}",
        ]},
        "build": {"commands": [
            "docker build --build-arg BASE_IMAGE=$BASE_IMAGE -t $REPOSITORY_URI:$IMAGE_TAG .",
        ]},
        "post_build": {"commands": ["docker push $REPOSITORY_URI:$IMAGE_TAG"]},
    },
}


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
        staging = folder.with_name(f".{tag}.partial")
        shutil.rmtree(staging, ignore_errors=True)
        for path, data in files.items():
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            (staging / path).write_bytes(data)
        staging.rename(folder)
    return folder, tag


def _acknowledge_provider(provider: custom_resources.Provider,
                          handlers: list[lambda_.Function]) -> None:
    """The Provider framework's own functions, roles and waiter, acknowledged where they sit."""
    functions = [*handlers, *(c for c in provider.node.find_all()
                              if isinstance(c, lambda_.Function))]
    versions = {f"{function.function_arn}:*": "The framework invokes these functions and "
                "their versions; it is scoped to exactly these functions."
                for function in functions}
    for child in provider.node.find_all():
        if isinstance(child, (lambda_.CfnFunction, stepfunctions.CfnStateMachine)):
            allow_redundant_role_dependency(child)
        if isinstance(child, lambda_.Function):
            skip_checkov_for_function(child, "The image build's custom resource: it starts "
                                             "and polls one CodeBuild build")
            acknowledge(child, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                               "service-role/AWSLambdaBasicExecutionRole]",
                        "The CDK Provider framework's functions use the AWS-managed basic "
                        "execution role, which only writes their own logs.")
            acknowledge(child, "AwsSolutions-L1",
                        "The CDK Provider framework pins its own functions' runtime.")
        if isinstance(child, iam.CfnPolicy):
            acknowledge_wildcards(child, versions)
            if "waiter-state-machine" in child.node.path:
                acknowledge_wildcards(child, {"*": "Step Functions log delivery actions "
                                                   "(logs:CreateLogDelivery and others) support "
                                                   "no resource-level permission."})
                skip_checkov(child, {"CKV_AWS_111": "Step Functions log delivery actions "
                                                    "(logs:CreateLogDelivery and others) "
                                                    "support no resource-level permission."})
    acknowledge(provider, "AwsSolutions-SF2",
                "The Provider framework's waiter only polls the build; X-Ray adds nothing.")
