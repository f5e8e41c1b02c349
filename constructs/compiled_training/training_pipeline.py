"""`TrainingPipeline`: a SageMaker Pipeline with one training step, validated at synth."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    Annotations,
    ArnFormat,
    Aws,
    Duration,
    Names,
    Resource,
    Stack,
)
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training_runtime import contract
from constructs import Construct

from . import rules
from .compiler import Compiler
from .definition import build_definition
from .dlc import DlcImage, resolve_dlc
from .framework import Framework
from .job import Distribution, HyperparameterValue, InputChannel, Parameter, TrainingJob
from .nag import acknowledge_wildcards
from .output_bucket import TrainingOutputBucket
from .registry import dlc_image_uri
from .runtime_image import RuntimeImage
from .sourcedir import write_sourcedir

PIPELINE_TAG = "compiled-training:pipeline"
METRIC_NAMESPACE = "AWS/Sagemaker/ModelBuildingPipeline"
_ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+)[:@]"
)


@jsii.implements(sagemaker.IPipeline)
class TrainingPipeline(Resource):
    """A SageMaker Pipeline whose training step is correct for its compiler.

    The definition comes from a pure builder (`build_definition`); this construct wires the
    code asset, the output bucket, the image and two least-privilege roles around it.
    Implements ``aws_sagemaker.IPipeline``, so EventBridge Scheduler can start it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        framework: Framework,
        instance_type: str,
        compiler: Compiler | None = None,
        instance_count: int | None = None,
        source_dir: str | Path | None = None,
        entry_point: str | None = None,
        image_uri: str | None = None,
        runtime_image: RuntimeImage | None = None,
        hyperparameters: Mapping[str, HyperparameterValue] | None = None,
        channels: Sequence[InputChannel] | None = None,
        distribution: Distribution | None = None,
        pipeline_name: str | None = None,
        description: str | None = None,
        output_bucket: s3.IBucket | None = None,
        volume_size_gib: int | None = None,
        max_runtime: Duration | None = None,
        spot: bool | None = None,
        max_wait: Duration | None = None,
        max_attempts: int | None = None,
        debugger: bool | None = None,
        profiler: bool | None = None,
        kms_key: kms.IKey | None = None,
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        security_groups: Sequence[ec2.ISecurityGroup] | None = None,
        network_isolation: bool | None = None,
        inter_container_encryption: bool | None = None,
    ) -> None:
        """
        :param framework: the framework and version, e.g. ``Framework.pytorch("1.13.1")``.
        :param instance_type: a SageMaker training instance type, e.g. ``ml.g5.48xlarge``.
        :param compiler: when omitted, no compiler (eager).
        :param instance_count: when omitted, one instance.
        :param source_dir: folder uploaded as a deterministic ``sourcedir.tar.gz``; required
            for framework images, omitted for built-in algorithms.
        :param entry_point: the script in ``source_dir`` that SageMaker runs.
        :param image_uri: when omitted, the framework's Deep Learning Container for the
            compiler, from the SageMaker SDK v2's image configuration. May be an image
            extended from a Training Compiler DLC (in ECR).
        :param runtime_image: a `RuntimeImage` to train in; the execution role may pull it.
        :param hyperparameters: values or ``Parameter``s a schedule can override.
        :param channels: input channels; when omitted, the job reads no input.
        :param distribution: when omitted, ``pytorchxla`` for a Training Compiler job on more
            than one GPU, none otherwise.
        :param pipeline_name: when omitted, derived from the construct path (stable).
        :param output_bucket: when omitted, the stack's shared `TrainingOutputBucket` (one
            per KMS key): encrypted (with ``kms_key`` or S3-managed), versioned, SSL only,
            public access blocked, access-logged, retained when the stack is deleted. Each
            pipeline writes under its own prefix only.
        :param volume_size_gib: when omitted, 30 GiB per instance.
        :param max_runtime: when omitted, one day.
        :param spot: when omitted, on-demand. Spot jobs checkpoint to S3 and resume.
        :param max_wait: spot only; when omitted, twice ``max_runtime``.
        :param max_attempts: attempts per step on capacity, internal and throttling errors;
            when omitted, 3.
        :param debugger: when omitted, off (it costs performance, especially when compiled).
        :param profiler: when omitted, off.
        :param kms_key: when omitted, AWS-managed encryption for volumes and outputs.
        :param vpc: when omitted, the job runs outside a VPC.
        :param vpc_subnets: when omitted with a VPC, its private subnets.
        :param security_groups: when omitted with a VPC, a new group with no inbound rules.
        :param network_isolation: when omitted, off (the container may reach the network).
        :param inter_container_encryption: when omitted, on for multi-instance jobs.
        """
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        compiler = compiler or Compiler.none()
        instance_count = 1 if instance_count is None else instance_count
        self.framework = framework
        self.compiler = compiler
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.distribution = distribution or rules.default_distribution(
            compiler.kind, instance_type, instance_count if isinstance(instance_count, int) else 1
        )
        self._pipeline_name = pipeline_name or Names.unique_resource_name(
            self, max_length=80, separator="-"
        )
        runtime_seconds = (max_runtime or Duration.days(1)).to_seconds()
        spot = bool(spot)

        self.dlc: DlcImage | None = None
        self.runtime_image = runtime_image
        if image_uri is None and runtime_image is None and rules.known_instance_type(
            instance_type
        ):
            self.dlc = _try_resolve_dlc(framework, compiler, instance_type)
        self._dlc_account = ""
        if runtime_image is not None:
            if image_uri is not None:
                raise ValueError(f"TrainingPipeline {self.node.path}: give image_uri or "
                                 "runtime_image, not both")
            self.image_uri = runtime_image.image_uri
        elif image_uri is not None:
            self.image_uri = image_uri
        elif self.dlc is not None:
            self.image_uri, self._dlc_account = dlc_image_uri(self, self.dlc)
        else:
            self.image_uri = ""  # rules.check reports why no image could be found

        code: s3_assets.Asset | None = None
        if source_dir is not None:
            code = self._code_asset(Path(source_dir))

        self.bucket = output_bucket or TrainingOutputBucket.of_stack(self, kms_key)
        prefix = f"s3://{self.bucket.bucket_name}/{self.pipeline_name}"
        vpc_config = self._vpc_config(vpc, vpc_subnets, security_groups)

        job = TrainingJob(
            pipeline_name=self.pipeline_name,
            framework=framework,
            compiler=compiler,
            distribution=self.distribution,
            instance_type=instance_type,
            instance_count=instance_count,
            volume_size_gib=30 if volume_size_gib is None else volume_size_gib,
            max_runtime_seconds=int(runtime_seconds),
            image_uri=self.image_uri,
            role_arn="",  # the execution role's, once its policy can be written from the job
            region=stack.region,
            output_s3_uri=f"{prefix}/output",
            entry_point=entry_point,
            source_s3_uri=code.s3_object_url if code else None,
            hyperparameters=dict(hyperparameters or {}),
            channels=list(channels or []),
            metric_definitions=contract.metric_definitions() if framework.runs_script else (),
            spot=spot,
            max_wait_seconds=int((max_wait or Duration.seconds(2 * runtime_seconds)).to_seconds())
            if spot
            else None,
            checkpoint_s3_uri=_execution_scoped(f"{prefix}/checkpoints"),
            debugger=bool(debugger),
            profiler=bool(profiler),
            kms_key_id=kms_key.key_arn if kms_key else None,
            subnet_ids=vpc_config[0],
            security_group_ids=vpc_config[1],
            network_isolation=bool(network_isolation),
            inter_container_encryption=(
                instance_count > 1 if inter_container_encryption is None
                else inter_container_encryption
            ),
            max_attempts=3 if max_attempts is None else max_attempts,
            tags={PIPELINE_TAG: self.pipeline_name},
        )
        findings = rules.check(job)
        findings.raise_errors(f"TrainingPipeline {self.node.path}")
        for warning in findings.warnings:
            Annotations.of(self).add_warning_v2(
                f"compiled-training:TrainingPipeline:{warning.rule}", warning.message
            )
        if compiler.advice:
            Annotations.of(self).add_warning_v2(
                "compiled-training:TrainingPipeline:Advisor", compiler.advice)
        if code is None and framework.runs_script:
            raise ValueError(
                f"TrainingPipeline {self.node.path}: source_dir is required for "
                f"{framework.describe()} (it holds entry_point {entry_point!r})"
            )
        self.parameters: dict[str, Parameter] = {p.name: p for p in job.parameters}

        self.role = self._execution_policy(job, code, bool(vpc_config[0])).role(
            self, "ExecutionRole",
            f"Runs the training jobs of SageMaker pipeline {self.pipeline_name}")
        for key in {k for k in (self.bucket.encryption_key, kms_key) if k is not None}:
            key.grant_encrypt_decrypt(self.role)
        if kms_key is not None:
            # SageMaker encrypts the training volumes through a grant on the key.
            kms_key.grant(self.role, "kms:CreateGrant", "kms:DescribeKey")
        self.job = job = replace(job, role_arn=self.role.role_arn)
        self.pipeline_role = self._pipeline_policy().role(
            self, "PipelineRole", f"Runs SageMaker pipeline {self.pipeline_name}")
        self._resource = sagemaker.CfnPipeline(
            self,
            "Resource",
            pipeline_name=self.pipeline_name,
            pipeline_description=description
            or f"Trains with {framework.describe()}, compiler: {compiler.describe()}",
            role_arn=self.pipeline_role.role_arn,
            pipeline_definition={"PipelineDefinitionBody": stack.to_json_string(
                build_definition(job)
            )},
        )
        self._resource.add_metadata("compiled-training", self.summary())
        self._pipeline_arn = stack.format_arn(
            service="sagemaker", resource="pipeline", resource_name=self.pipeline_name.lower()
        )

    # --- IPipeline (properties, so that jsii can read them) ---------------------------------

    @property
    def pipeline_name(self) -> str:
        """The SageMaker pipeline's name."""
        return self._pipeline_name

    @property
    def pipeline_arn(self) -> str:
        """The SageMaker pipeline's ARN."""
        return self._pipeline_arn

    @property
    def resource(self) -> sagemaker.CfnPipeline:
        """The ``AWS::SageMaker::Pipeline`` resource, for escape hatches and acknowledgements."""
        return self._resource

    @property
    def pipeline_ref(self) -> Any:
        return self._resource.pipeline_ref

    def grant_start_pipeline_execution(self, grantee: iam.IGrantable) -> iam.Grant:
        return self.grant_start_execution(grantee)

    # --- consumers -----------------------------------------------------------------------

    def grant_start_execution(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` start executions of this pipeline, and nothing else."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:StartPipelineExecution"],
            resource_arns=[self.pipeline_arn],
        )

    def metric(self, metric_name: str, *, statistic: str = "Sum",
               period: Duration | None = None) -> cloudwatch.Metric:
        """A metric SageMaker Pipelines publishes for this pipeline."""
        return cloudwatch.Metric(
            namespace=METRIC_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={"PipelineName": self.pipeline_name},
            statistic=statistic,
            period=period or Duration.minutes(5),
        )

    def metric_failed_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.metric("ExecutionFailed", period=period)

    def metric_succeeded_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.metric("ExecutionSucceeded", period=period)

    def metric_execution_duration(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.metric("ExecutionDuration", statistic="Average", period=period)

    def summary(self) -> dict[str, Any]:
        """What the synth summary shows; also written as the pipeline's template metadata."""
        summary: dict[str, Any] = {
            "pipelineName": self.pipeline_name,
            "framework": self.framework.describe(),
            "frameworkName": self.framework.name,
            "frameworkVersion": self.framework.version,
            "pytorchVersion": self.framework.pytorch_version,
            "compiler": self.compiler.describe(),
            "distribution": self.distribution.value,
            "instances": f"{self.instance_count} x {self.instance_type}",
            "image": self._image_description(),
        }
        if self.compiler.profile is not None:
            summary["workload"] = asdict(self.compiler.profile)
        return summary

    # --- wiring --------------------------------------------------------------------------

    def _image_description(self) -> str:
        if self.runtime_image is not None:
            return (f"runtime image ({self.runtime_image.build_mode.value} build) on "
                    f"{self.runtime_image.dlc.path}")
        return self.dlc.path if self.dlc else "custom image"

    def _code_asset(self, source_dir: Path) -> s3_assets.Asset:
        if not source_dir.is_dir():
            raise ValueError(
                f"TrainingPipeline {self.node.path}: source_dir must be an existing folder, "
                f"got {str(source_dir)!r}"
            )
        archive = write_sourcedir(source_dir)
        # One asset per distinct archive in the stack: pipelines that share code share it.
        stack = Stack.of(self)
        construct_id = f"SourceDir{archive.parent.name[:16]}"
        existing = stack.node.try_find_child(construct_id)
        if isinstance(existing, s3_assets.Asset):
            return existing
        return s3_assets.Asset(stack, construct_id, path=str(archive))

    def _vpc_config(
        self,
        vpc: ec2.IVpc | None,
        subnets: ec2.SubnetSelection | None,
        groups: Sequence[ec2.ISecurityGroup] | None,
    ) -> tuple[list[str], list[str]]:
        if vpc is None:
            if subnets is not None or groups:
                raise ValueError(f"TrainingPipeline {self.node.path}: vpc_subnets and "
                                 "security_groups need a vpc")
            return [], []
        selection = subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        selected = vpc.select_subnets(
            subnet_type=selection.subnet_type,
            subnet_group_name=selection.subnet_group_name,
            subnets=selection.subnets,
            availability_zones=selection.availability_zones,
            one_per_az=selection.one_per_az,
        )
        if not groups:
            group = ec2.SecurityGroup(self, "SecurityGroup", vpc=vpc,
                                      description=f"Training jobs of {self.pipeline_name}")
            # Nodes of a multi-instance job talk to each other.
            group.add_ingress_rule(group, ec2.Port.all_traffic(), "between training nodes")
            groups = [group]
        return list(selected.subnet_ids), [g.security_group_id for g in groups]

    def _execution_policy(
        self, job: TrainingJob, code: s3_assets.Asset | None, in_vpc: bool
    ) -> _Policy:
        """Reads its code and input prefixes, writes its own prefix, pulls its own image."""
        stack = Stack.of(self)
        policy = _Policy()
        if code is not None:
            policy.allow(["s3:GetObject"], [
                f"arn:{Aws.PARTITION}:s3:::{code.s3_bucket_name}/{code.s3_object_key}"])
        for channel in job.channels:
            bucket, key_prefix = _split_s3(channel.default_uri)
            policy.allow_prefix(bucket, key_prefix, ["s3:GetObject"],
                                why=f"Training reads every object under channel "
                                    f"{channel.name!r}'s prefix, and only there.")
        policy.allow_prefix(self.bucket.bucket_name, f"{self.pipeline_name}/",
                            ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                            why="The job writes model, output and checkpoints (and reads "
                                "checkpoints back to resume) under this pipeline's own prefix "
                                "only.")
        policy.allow(["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                      "ecr:BatchCheckLayerAvailability"], [self._image_repository_arn()])
        policy.allow(["ecr:GetAuthorizationToken"], ["*"],
                     why="ecr:GetAuthorizationToken supports no resource-level permission; "
                         "pulls are limited to the one image repository by another statement.")
        log_group = stack.format_arn(service="logs", resource="log-group",
                                     resource_name="/aws/sagemaker/TrainingJobs",
                                     arn_format=ArnFormat.COLON_RESOURCE_NAME)
        policy.allow(["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                     [f"{log_group}:log-stream:*"],
                     why="SageMaker names a job's log streams at run time, inside the fixed "
                         "/aws/sagemaker/TrainingJobs log group.")
        policy.allow(["logs:CreateLogGroup"], [log_group])
        policy.allow(["cloudwatch:PutMetricData"], ["*"],
                     conditions={"StringEquals": {
                         "cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}},
                     why="cloudwatch:PutMetricData supports no resource; the condition limits "
                         "it to SageMaker's training-job namespace.")
        if in_vpc:
            policy.allow([
                "ec2:CreateNetworkInterface",
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups",
            ], ["*"], why="SageMaker creates the job's network interfaces at run time; these "
                          "EC2 actions support no resource-level permission.")
        return policy

    def _image_repository_arn(self) -> str:
        stack = Stack.of(self)
        if self.runtime_image is not None:
            return self.runtime_image.repository.repository_arn
        if self.dlc is not None:
            account, region, repository = (self._dlc_account, stack.region, self.dlc.repository)
        else:
            match = _ECR_URI.match(self.image_uri)
            if not match:
                raise ValueError(
                    f"TrainingPipeline {self.node.path}: image_uri must be an ECR image "
                    f"(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG), got "
                    f"{self.image_uri!r}"
                )
            account, region, repository = (match["account"], match["region"],
                                           match["repository"])
        return stack.format_arn(service="ecr", account=account, region=region,
                                resource="repository", resource_name=repository)

    def _pipeline_policy(self) -> _Policy:
        """Creates, describes and stops only its own training jobs; passes only their role."""
        jobs = Stack.of(self).format_arn(service="sagemaker", resource="training-job",
                                         resource_name="*")
        why = ("Pipelines name training jobs at run time; the tag conditions limit create, "
               "describe and stop to jobs tagged with this pipeline's name.")
        policy = _Policy()
        policy.allow(["sagemaker:CreateTrainingJob", "sagemaker:AddTags"], [jobs], why=why,
                     conditions={"StringEquals": {
                         f"aws:RequestTag/{PIPELINE_TAG}": self.pipeline_name}})
        policy.allow(["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"], [jobs],
                     why=why, conditions={"StringEquals": {
                         f"aws:ResourceTag/{PIPELINE_TAG}": self.pipeline_name}})
        policy.allow(["iam:PassRole"], [self.role.role_arn], conditions={
            "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}})
        return policy


class _Policy:
    """One role's inline policy; every wildcard resource carries the reason it is needed.

    Inline, not attached: the role and its permissions are one resource, so the pipeline
    (which references the role) can never be created before its permissions exist.
    """

    def __init__(self) -> None:
        self.statements: list[dict[str, Any]] = []
        self.wildcards: dict[str, str] = {}
        """Each wildcard resource and the reason it is needed."""

    def allow(self, actions: list[str], resources: list[str], *, why: str | None = None,
              conditions: Mapping[str, Any] | None = None) -> None:
        statement: dict[str, Any] = {"Effect": "Allow", "Action": actions, "Resource": resources}
        if conditions:
            statement["Condition"] = dict(conditions)
        self.statements.append(statement)
        for resource in (r for r in resources if "*" in r):
            if not why:
                raise AssertionError(f"wildcard {resource} needs a reason")
            known = self.wildcards.get(resource)
            self.wildcards[resource] = f"{known} {why}" if known and why not in known else why

    def allow_prefix(self, bucket: str, key_prefix: str, actions: list[str], *,
                     why: str) -> None:
        partition = Aws.PARTITION
        self.allow(actions, [f"arn:{partition}:s3:::{bucket}/{key_prefix}*"], why=why)
        self.allow(["s3:ListBucket"], [f"arn:{partition}:s3:::{bucket}"],
                   conditions={"StringLike": {"s3:prefix": [f"{key_prefix}*"]}})

    def role(self, scope: Construct, construct_id: str, description: str) -> iam.Role:
        role = iam.Role(
            scope, construct_id,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=description,
            # One document from JSON: one call into jsii instead of one per statement.
            inline_policies={"Permissions": iam.PolicyDocument.from_json(
                {"Version": "2012-10-17", "Statement": self.statements})},
        )
        resource = role.node.default_child
        assert resource is not None
        acknowledge_wildcards(resource, self.wildcards)
        return role


def _try_resolve_dlc(
    framework: Framework, compiler: Compiler, instance_type: str
) -> DlcImage | None:
    try:
        return resolve_dlc(framework, compiler.is_training_compiler, instance_type)
    except ValueError:
        # rules.check reports the reason with every other problem, in one message.
        return None


def _execution_scoped(uri: str) -> Any:
    """One checkpoint folder per execution: retries resume, the next scheduled run starts anew."""
    return {"Std:Join": {"On": "/", "Values": [uri, {"Get": "Execution.PipelineExecutionId"}]}}


def _split_s3(uri: str) -> tuple[str, str]:
    without_scheme = uri[len("s3://"):]
    bucket, _, key = without_scheme.partition("/")
    return bucket, key
