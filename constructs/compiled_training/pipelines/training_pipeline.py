"""`TrainingPipeline`: a SageMaker Pipeline with one training step, validated at synth."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import jsii
from aws_cdk import Annotations
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker
from typing_extensions import Unpack  # typing's from Python 3.11

from compiled_training.definition import launchers
from compiled_training.definition.registration import add_registration, threshold_problem
from compiled_training.definition.training import build_definition
from compiled_training.pipelines.base import PipelineBase
from compiled_training.pipelines.options import TrainingPipelineProps
from compiled_training.pipelines.registration import (
    BoundRegistration,
    ModelRegistration,
    bind_registration,
)
from compiled_training.pipelines.training_image import BoundImage, TrainingImage
from compiled_training.typecheck import check_arguments
from compiled_training.values.compiler import Compiler
from compiled_training.values.job import (
    Distribution,
    ParameterValue,
    TrainingJob,
    unique_parameters,
)
from compiled_training.wiring.policy import InlinePolicy
from constructs import Construct


@jsii.implements(sagemaker.IPipeline)
class TrainingPipeline(PipelineBase):
    """A SageMaker Pipeline whose training step is correct for its compiler.

    The definition comes from a pure builder (`build_definition`); this construct wires the
    code asset, the output bucket, the image and two least-privilege roles around it.
    Implements ``aws_sagemaker.IPipeline``, so EventBridge Scheduler can start it.
    Props: `TrainingPipelineProps` (a training job's `TrainingJobOptions`, and the image,
    Debugger, Profiler and model registration).
    """

    distribution: Distribution
    image: BoundImage
    """The training image, bound: its URI and what the summary says of it."""
    image_uri: str
    registration: BoundRegistration | None
    """The quality gate and Model Package Group; None without ``registration``."""
    job: TrainingJob
    """The training step's job, as the definition builder reads it."""

    def __init__(self, scope: Construct, construct_id: str,
                 **props: Unpack[TrainingPipelineProps]) -> None:
        check_arguments(TrainingPipeline.__init__, locals())
        super().__init__(scope, construct_id, options=props,
                         compiler=props.get("compiler") or Compiler.none())
        self.distribution = props.get("distribution") or launchers.default_distribution(
            self.compiler, self.framework, self.instance_type,
            self.instance_count if isinstance(self.instance_count, int) else 1)
        self._props = props
        self._build()
        if self.registration is not None and self.registration.group is not None:
            # Pipelines registers into the group: it must exist before the first run.
            self.resource.node.add_dependency(self.registration.group)

    # --- the build's steps (`PipelineBase._build`) --------------------------------------------

    def _bind_jobs(self, policy: InlinePolicy) -> tuple[list[TrainingJob], list[s3_assets.Asset]]:
        props, compiler = self._props, self.compiler
        self.image = (props.get("image") or TrainingImage.dlc()).bind(
            self, policy, framework=self.framework, compiler=compiler,
            instance_type=self.instance_type)
        self.image_uri = self.image.image_uri
        self.job = replace(self._common, compiler=compiler, distribution=self.distribution,
                           image_uri=self.image_uri, debugger=bool(props.get("debugger")),
                           profiler=bool(props.get("profiler")))
        self._check({"": self.job})
        if compiler.advice:
            Annotations.of(self).add_warning_v2(
                "compiled-training:TrainingPipeline:Advisor", compiler.advice)
        registration = props.get("registration")
        self.registration = None
        if registration is not None:
            self.registration = bind_registration(self, self._subject, registration, self.job,
                                                  self._registration_metadata(registration),
                                                  self.bucket, self._handler_role())
        self.parameters = {p.name: p for p in unique_parameters(
            [*self.job.parameters, *(self.registration.parameters if self.registration else [])])}
        return [self.job], [self.code] if self.code else []

    def _run_jobs_as(self, arn: str) -> None:
        self.job = replace(self.job, role_arn=arn)

    def _definition(self) -> tuple[dict[str, Any], InlinePolicy]:
        definition = build_definition(self.job)
        pipeline_policy = self._pipeline_policy(self.role)
        if self.registration is not None:
            definition = add_registration(definition, self.job, self.registration.registration)
            self.registration.allow(pipeline_policy, self)
        return definition, pipeline_policy

    def _default_description(self) -> str:
        return f"Trains with {self.framework.describe()}, compiler: {self.compiler.describe()}"

    def _name_moves(self) -> list[str]:
        return [self._prefix_moves("its models, outputs and checkpoints")]

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
            "image": self.image.description,
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

    def _jobs(self) -> list[TrainingJob]:
        return [self.job]

    def override_problem(self, name: str, value: ParameterValue) -> str | None:
        """A schedule's override of the gate's threshold is held to the metric's range, as
        ``gate_threshold`` is."""
        gate = self.registration.registration.gate if self.registration else None
        if gate is not None and gate.threshold.name == name and (
                problem := threshold_problem(gate.metric, float(value), f"parameter {name!r}")):
            return problem
        return super().override_problem(name, value)
