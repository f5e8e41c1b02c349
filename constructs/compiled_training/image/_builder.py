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
    def of(cls, scope: Construct) -> ImageBuilder:
        """The builder of ``scope``'s stack, created with its first image."""
        stack = Stack.of(scope)
        existing = stack.node.try_find_child(cls.ID)
        if existing is None:
            return cls(stack, cls.ID)
        assert isinstance(existing, cls), f"{stack.node.path}/{cls.ID} is not an ImageBuilder"
        return existing

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.project = self._project()
        self.handler = self._handler()
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
        self.project.add_to_role_policy(iam.PolicyStatement(
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                     "ecr:BatchCheckLayerAvailability"],
            resources=[dlc_repository_arn]))
        repository.grant_push(self.project)
        self.handler.add_to_role_policy(iam.PolicyStatement(
            actions=["ecr:DescribeImages"], resources=[repository.repository_arn]))

    def _project(self) -> codebuild.Project:
        stack = Stack.of(self)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
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
            encryption_key=kms.Key(self, "Key", enable_key_rotation=True,
                                   description="Encrypts the runtime image builds of "
                                               f"{stack.node.path}"),
            timeout=BUILD_TIMEOUT,
            queued_timeout=QUEUED_TIMEOUT,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(
                log_group=log_group)),
        )
        acknowledge(project, "AwsSolutions-CB3",
                    "docker build runs the Docker daemon, which needs privileged mode.")
        assert project.role is not None
        policy = project.role.node.find_child("DefaultPolicy").node.default_child
        assert policy is not None
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
        )
        function.add_to_role_policy(iam.PolicyStatement(
            actions=["codebuild:StartBuild", "codebuild:BatchGetBuilds"],
            resources=[self.project.project_arn]))
        acknowledge(function, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                              "policy/service-role/AWSLambdaBasicExecutionRole]",
                    "The AWS-managed basic execution role only lets the function write its "
                    "own logs.")
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
