"""`TrainingPipeline`: a SageMaker Pipeline with one training step, validated at synth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Annotations, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training._internal import validation
from compiled_training._internal.definition import build_definition
from compiled_training._internal.dlc import DlcImage
from compiled_training._internal.dlc_uri import dlc_image_uri
from compiled_training._internal.typecheck import check_arguments
from compiled_training.image.runtime_image import RuntimeImage
from compiled_training.pipelines.base import PipelineBase, try_resolve_dlc
from compiled_training.pipelines.compiler import Compiler
from compiled_training.pipelines.framework import Framework
from compiled_training.pipelines.job import (
    Distribution,
    HyperparameterValue,
    InputChannel,
    unique_parameters,
)
from compiled_training.pipelines.registration import (
    BoundRegistration,
    ModelRegistration,
    add_registration,
    bind_registration,
)
from constructs import Construct


@jsii.implements(sagemaker.IPipeline)
class TrainingPipeline(PipelineBase):
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
        registration: ModelRegistration | None = None,
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
            than one GPU where the version has it (PyTorch 1.12+, Hugging Face PyTorch 1.11+),
            none otherwise.
        :param pipeline_name: names the pipeline and its S3 prefix of models, outputs and
            checkpoints. When omitted, derived from the construct path, with a warning:
            renaming or moving the construct would then move the prefix and strand the data.
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
        :param registration: when omitted, a run ends with its model in S3; with it, a quality
            gate on a reported metric, then a version in a Model Package Group.
        """
        check_arguments(TrainingPipeline.__init__, locals())
        super().__init__(scope, construct_id, pipeline_name=pipeline_name)
        compiler = compiler or Compiler.none()
        instance_count = 1 if instance_count is None else instance_count
        self.framework = framework
        self.compiler = compiler
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.distribution = distribution or validation.default_distribution(
            compiler.kind, framework, instance_type,
            instance_count if isinstance(instance_count, int) else 1)
        self.runtime_image = runtime_image
        self.dlc: DlcImage | None = None
        dlc_account = ""
        if runtime_image is not None:
            if image_uri is not None:
                raise ValueError(f"{self._subject}: give image_uri or runtime_image, not both")
            self.image_uri = runtime_image.image_uri
            repository = runtime_image.repository.repository_arn
        elif image_uri is not None:
            self.image_uri = image_uri
            repository = ""  # read from the URI once the rules have checked the rest
        else:
            self.dlc = try_resolve_dlc(framework, compiler, instance_type)
            self.image_uri, dlc_account = (dlc_image_uri(self, self.dlc) if self.dlc
                                           else ("", ""))  # validation.check reports why
            repository = self._dlc_repository_arn(self.dlc, dlc_account) if self.dlc else ""

        job = replace(self._common_job(
            framework=framework, instance_type=instance_type, instance_count=instance_count,
            source_dir=source_dir,
            entry_point=entry_point, hyperparameters=hyperparameters, channels=channels,
            output_bucket=output_bucket, volume_size_gib=volume_size_gib,
            max_runtime=max_runtime, spot=spot, max_wait=max_wait, max_attempts=max_attempts,
            debugger=debugger, profiler=profiler, kms_key=kms_key, vpc=vpc,
            vpc_subnets=vpc_subnets, security_groups=security_groups,
            network_isolation=network_isolation,
            inter_container_encryption=inter_container_encryption,
        ), compiler=compiler, distribution=self.distribution, image_uri=self.image_uri)
        self._check({"": job})
        if compiler.advice:
            Annotations.of(self).add_warning_v2(
                "compiled-training:TrainingPipeline:Advisor", compiler.advice)
        self.registration: BoundRegistration | None = None
        if registration is not None:
            self.registration = bind_registration(self, self._subject, registration, job,
                                                  self._registration_metadata(registration),
                                                  self.bucket)
        self.parameters = {p.name: p for p in unique_parameters(
            [*job.parameters, *(self.registration.parameters if self.registration else [])])}

        policy = self._execution_policy([job], [self.code] if self.code else [],
                                        [repository or self._ecr_repository_arn(self.image_uri)])
        self.role = self._execution_role(policy)
        self.job = job = replace(job, role_arn=self.role.role_arn)
        definition = build_definition(job)
        pipeline_policy = self._pipeline_policy(self.role)
        if self.registration is not None:
            definition = add_registration(definition, job, self.registration.registration)
            self.registration.allow(pipeline_policy, self)
        self._create_pipeline(
            definition=definition,
            description=description
            or f"Trains with {framework.describe()}, compiler: {compiler.describe()}",
            pipeline_policy=pipeline_policy,
            summary=self.summary())
        if self.registration is not None and self.registration.group is not None:
            # Pipelines registers into the group: it must exist before the first run.
            self.resource.node.add_dependency(self.registration.group)
        self._warn_if_named_by_path(self._prefix_moves("its models, outputs and checkpoints"))

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
        if self.registration is not None:
            summary["registration"] = self.registration.describe()
        return summary

    # --- wiring --------------------------------------------------------------------------

    def _registration_metadata(self, registration: ModelRegistration) -> dict[str, Any]:
        """What each model version records about how it was trained."""
        metadata: dict[str, Any] = {
            "pipeline": self.pipeline_name,
            "execution": {"Get": "Execution.PipelineExecutionArn"},
            "compiler": self.compiler.describe(),
            "framework": self.framework.describe(),
            "image": self.image_uri,
        }
        if registration.git_commit:
            metadata["git_commit"] = registration.git_commit
        return metadata

    def _image_description(self) -> str:
        if self.runtime_image is not None:
            return (f"runtime image ({self.runtime_image.build_mode.value} build) on "
                    f"{self.runtime_image.dlc.path}")
        return self.dlc.path if self.dlc else "custom image"
