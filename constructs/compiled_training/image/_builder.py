"""The image build machinery of a stack: one CodeBuild project and one handler function,
shared by every cloud-built `RuntimeImage` in it (as cdklabs/deploy-time-build shares its
``SingletonFunction`` and ``SingletonProject``).

Each image hands the build its own settings as environment-variable overrides (see the
handler, ``handlers/image_build.py``) and adds only grants: the build may read its
context and push to its repository, the handler may look up tags in that repository. The
build reports back by itself: an EventBridge rule on the project's ended builds invokes the
handler, which answers CloudFormation; nothing polls.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets

from compiled_training.wiring.acknowledgements import (
    LOG_GROUP_WITHOUT_KMS,
    acknowledge,
    acknowledge_wildcards,
    allow_redundant_role_dependency,
    skip_checkov,
    skip_checkov_for_function,
)
from compiled_training.wiring.functions import handler_code
from compiled_training.wiring.policy import ImmutableRoleWarning, attached_policy
from constructs import Construct

# EventBridge's detail-type for a build's end, which the handler tells apart from a CloudFormation
# request by (tests hold the rule's pattern to the handler's own constant). Not imported from the
# handler: that module needs boto3, which is Lambda's, not the library's.
BUILD_STATE_CHANGE = "CodeBuild Build State Change"

# CloudFormation waits for a custom resource one hour at most (ServiceTimeout's ceiling): a
# build must end, queue included, before then, so that its own failure is what is reported.
BUILD_TIMEOUT = Duration.minutes(40)
QUEUED_TIMEOUT = Duration.minutes(15)

BUILD_SPEC = {
    "version": "0.2",
    "phases": {
        "pre_build": {"commands": [
            # The project is shared: each build fetches its own image's context.
            'aws s3 cp "$CONTEXT_URL" context.zip --quiet',
            "unzip -q context.zip -d context",
            # The DLC registry is an AWS-owned account of the region: it needs its own login.
            "aws ecr get-login-password --region $AWS_REGION"
            " | docker login --username AWS --password-stdin $DLC_REGISTRY",
            "aws ecr get-login-password --region $AWS_REGION"
            " | docker login --username AWS --password-stdin ${REPOSITORY_URI%%/*}",
        ]},
        "build": {"commands": [
            "docker build --build-arg BASE_IMAGE=$BASE_IMAGE -t $REPOSITORY_URI:$IMAGE_TAG"
            " context",
            "docker push $REPOSITORY_URI:$IMAGE_TAG",
        ]},
    },
}


class ImageBuilder(Construct):
    """The stack's one image build project and handler; get it with `ImageBuilder.of`."""

    # A construct id at the stack's root; a changed id would replace the machinery.
    ID = "CompiledTrainingImageBuilder"

    @classmethod
    def of(cls, scope: Construct, *, build_role: iam.IRole | None = None,
           build_handler_role: iam.IRole | None = None) -> ImageBuilder:
        """The builder of ``scope``'s stack, created with its first image (and the roles that
        image gives: every image of the stack must give the same)."""
        stack = Stack.of(scope)
        existing = stack.node.try_find_child(cls.ID)
        if existing is None:
            return cls(stack, cls.ID, build_role=build_role,
                       build_handler_role=build_handler_role)
        assert isinstance(existing, cls), f"{stack.node.path}/{cls.ID} is not an ImageBuilder"
        given = {"build_role": build_role, "build_handler_role": build_handler_role}
        for prop, role in given.items():
            if role is not existing.given_roles[prop]:
                raise ValueError(
                    f"RuntimeImage {scope.node.path}: {prop} must be the one the stack's other "
                    f"runtime images give ({_described(existing.given_roles[prop])}): they "
                    f"share one image build project and handler, got {_described(role)}")
        return existing

    def __init__(self, scope: Construct, construct_id: str, *,
                 build_role: iam.IRole | None = None,
                 build_handler_role: iam.IRole | None = None) -> None:
        super().__init__(scope, construct_id)
        self.given_roles = {"build_role": build_role,
                            "build_handler_role": build_handler_role}
        # What each given role is granted, as statements: an imported, immutable role takes
        # grants silently, so a warning lists them (read when it is written, with every
        # image's).
        self._granted: dict[str, list[dict[str, Any]]] = {prop: [] for prop in self.given_roles}
        self.project = self._project()
        self.handler = self._handler()
        for prop, role in self.given_roles.items():
            if role is not None and attached_policy(role) is None:
                self.node.add_validation(ImmutableRoleWarning(self, prop, role,
                                                              self._granted[prop]))
        self.rule = events.Rule(
            self, "BuildEnded",
            description="Reports each ended runtime image build to CloudFormation",
            event_pattern=events.EventPattern(
                source=["aws.codebuild"], detail_type=[BUILD_STATE_CHANGE],
                detail={"project-name": [self.project.project_name],
                        "build-status": events.Match.anything_but("IN_PROGRESS")}),
            targets=[targets.LambdaFunction(self.handler)],
        )

    def add_image(self, *, repository: ecr.IRepository, context: s3_assets.Asset,
                  dlc_repository_arn: str) -> None:
        """The grants one image needs: the build reads its context, pulls its DLC and pushes
        to its repository; the handler looks up tags in that repository."""
        # The one object, where Asset.grant_read would open the whole asset bucket.
        context.bucket.grant_read(self.project, context.s3_object_key)
        self._grant("build_role", self.project, ["ecr:BatchGetImage",
                                                 "ecr:GetDownloadUrlForLayer",
                                                 "ecr:BatchCheckLayerAvailability"],
                    [dlc_repository_arn])
        repository.grant_push(self.project)
        self._grant("build_handler_role", self.handler, ["ecr:DescribeImages"],
                    [repository.repository_arn])
        if self.given_roles["build_role"] is not None:
            # What the two CDK grants above give (Bucket.grant_read, Repository.grant_push).
            bucket = context.bucket.bucket_arn
            self._record_grant("build_role", ["s3:GetObject*", "s3:GetBucket*", "s3:List*"],
                               [bucket, f"{bucket}/{context.s3_object_key}"])
            push = ["ecr:CompleteLayerUpload", "ecr:UploadLayerPart", "ecr:InitiateLayerUpload",
                    "ecr:BatchCheckLayerAvailability", "ecr:PutImage"]
            self._record_grant("build_role", push, [repository.repository_arn])
            self._record_grant("build_role", ["ecr:GetAuthorizationToken"], ["*"])

    def _grant(self, prop: str, grantee: codebuild.Project | lambda_.Function,
               actions: list[str], resources: list[str]) -> None:
        """One statement for the role of ``grantee`` (``prop``'s, when given)."""
        grantee.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=resources))
        self._record_grant(prop, actions, resources)

    def _record_grant(self, prop: str, actions: list[str], resources: list[str]) -> None:
        """Records a grant to ``prop``'s role, when given, for the warning an immutable one
        gets."""
        statement = {"Effect": "Allow", "Action": actions, "Resource": resources}
        # Once each, as aws-cdk-lib writes a policy (the token grant comes with every push).
        if self.given_roles[prop] is not None and statement not in self._granted[prop]:
            self._granted[prop].append(statement)

    def _project(self) -> codebuild.Project:
        stack = Stack.of(self)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        key = kms.Key(self, "Key", enable_key_rotation=True,
                      description=f"Encrypts the runtime image builds of {stack.node.path}")
        skip_checkov(log_group, LOG_GROUP_WITHOUT_KMS)
        project = codebuild.Project(
            self, "Project",
            description="Builds the compiled-training runtime images of this stack",
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=codebuild.ComputeType.LARGE,
                privileged=True,  # docker build needs the Docker daemon
            ),
            build_spec=codebuild.BuildSpec.from_object(BUILD_SPEC),
            encryption_key=key,
            timeout=BUILD_TIMEOUT,
            queued_timeout=QUEUED_TIMEOUT,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(
                log_group=log_group)),
            role=self.given_roles["build_role"],
        )
        if self.given_roles["build_role"] is not None:
            self._list_project_grants(project, log_group, key)
        acknowledge(project, "AwsSolutions-CB3",
                    "docker build runs the Docker daemon, which needs privileged mode.")
        assert project.role is not None
        default_policy = attached_policy(project.role)
        policy = default_policy.node.default_child if default_policy else None
        if policy is None:
            return project  # an immutable role: nothing of the app's to acknowledge
        acknowledge_wildcards(policy, {
            "*": "ecr:GetAuthorizationToken supports no resource-level permission; pushes "
                 "and pulls are limited to the images' own repositories and DLC repositories.",
            stack.format_arn(service="logs", resource="log-group",
                             resource_name=f"/aws/codebuild/{project.project_name}:*",
                             arn_format=ArnFormat.COLON_RESOURCE_NAME):
                "CodeBuild's default log group for this project, streams named at run time.",
            stack.format_arn(service="codebuild", resource="report-group",
                             resource_name=f"{project.project_name}-*"):
                "CodeBuild names this project's report groups at run time.",
        })
        for action, why in (
            ("s3:GetObject*", "CDK's read grant on each image's build context: one object."),
            ("s3:GetBucket*", "CDK's read grant on the build contexts' bucket."),
            ("s3:List*", "CDK's read grant on the build contexts' bucket."),
            ("kms:ReEncrypt*", "CDK's grant on the builds' own key."),
            ("kms:GenerateDataKey*", "CDK's grant on the builds' own key."),
        ):
            acknowledge(policy, f"AwsSolutions-IAM5[Action::{action}]", why)
        return project

    def _list_project_grants(self, project: codebuild.Project, log_group: logs.LogGroup,
                             key: kms.Key) -> None:
        """What aws-cdk-lib's Project grants its role: its logs (the group given, and
        CodeBuild's default group), its report groups, its key."""
        stack = Stack.of(self)
        default_group = stack.format_arn(service="logs", resource="log-group",
                                         resource_name=f"/aws/codebuild/{project.project_name}",
                                         arn_format=ArnFormat.COLON_RESOURCE_NAME)
        self._record_grant("build_role", ["logs:CreateLogStream", "logs:PutLogEvents"],
                           [log_group.log_group_arn])
        self._record_grant("build_role",
                           ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                           [default_group, f"{default_group}:*"])
        reports = ["codebuild:CreateReportGroup", "codebuild:CreateReport",
                   "codebuild:UpdateReport", "codebuild:BatchPutTestCases",
                   "codebuild:BatchPutCodeCoverages"]
        self._record_grant("build_role", reports, [stack.format_arn(
            service="codebuild", resource="report-group",
            resource_name=f"{project.project_name}-*")])
        self._record_grant("build_role",
                           ["kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
                           [key.key_arn])

    def _handler(self) -> lambda_.Function:
        # Its own log group, kept a year: else Lambda makes one that keeps logs forever, or CDK
        # one of its own under @aws-cdk/aws-lambda:useCdkManagedLogGroup, differing by app.
        log_group = logs.LogGroup(self, "HandlerLogs", retention=logs.RetentionDays.ONE_YEAR,
                                  removal_policy=RemovalPolicy.RETAIN)
        skip_checkov(log_group, LOG_GROUP_WITHOUT_KMS)
        function = lambda_.Function(
            self, "Handler",
            log_group=log_group,
            runtime=lambda_.Runtime.PYTHON_3_14,
            code=handler_code("image_build"),
            handler="image_build.handler",
            timeout=Duration.minutes(1),
            description="Starts the runtime image builds of this stack and reports their end "
                        "to CloudFormation",
            # Its one project, never one named by a request.
            environment={"PROJECT_NAME": self.project.project_name},
            role=self.given_roles["build_handler_role"],
        )
        self._grant("build_handler_role", function, ["codebuild:StartBuild",
                                               "codebuild:BatchGetBuilds"],
                    [self.project.project_arn])
        if self.given_roles["build_handler_role"] is None:
            acknowledge(function, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                                  "policy/service-role/AWSLambdaBasicExecutionRole]",
                        "The AWS-managed basic execution role only lets the function write "
                        "its own logs.")
        else:
            # A given role gets no managed policy from aws-cdk-lib: its own logs, granted.
            self._grant("build_handler_role", function,
                        ["logs:CreateLogStream", "logs:PutLogEvents"], [log_group.log_group_arn])
        skip_checkov_for_function(
            function, "The runtime images' custom resource: it starts one CodeBuild build "
                      "per image and reports its end",
            no_dead_letter_queue="CloudFormation and EventBridge invoke it asynchronously and "
                                 "Lambda retries a failed invocation; a request it never "
                                 "answers fails at CloudFormation's custom-resource timeout, "
                                 "after which a queued event could answer nothing.")
        cfn_function = function.node.default_child
        assert isinstance(cfn_function, lambda_.CfnFunction)
        allow_redundant_role_dependency(cfn_function)
        return function


def _described(role: iam.IRole | None) -> str:
    return "none: roles of its own" if role is None else f"role {role.node.path}"
