"""A SageMaker pipeline as its name makes it usable, made here or imported: the
``aws_sagemaker.IPipeline`` members, the start grant and the metrics Pipelines publishes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsii
from aws_cdk import Duration, Resource
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.interfaces import aws_sagemaker as sagemaker_refs

from compiled_training.wiring.stack_reads import format_arn, free_id, path, stack_of
from constructs import Construct, IConstruct

if TYPE_CHECKING:  # loaded by the first metric: a synth that asks for none skips its module
    from aws_cdk import aws_cloudwatch as cloudwatch

METRIC_NAMESPACE = "AWS/Sagemaker/ModelBuildingPipeline"


class NamedPipeline(Resource):
    """A SageMaker pipeline as its name makes it usable: the ``aws_sagemaker.IPipeline``
    members, the start grant and the metrics Pipelines publishes (by name alone). Pipelines
    made here (`PipelineBase`) and imported ones (`ImportedPipeline`) share it."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        free_id(scope, construct_id, type(self).__name__)
        super().__init__(scope, construct_id)
        self._pipeline_name = ""

    # --- IPipeline (properties: jsii reads an interface's members from a class's properties)

    @property
    def pipeline_name(self) -> str:
        """The SageMaker pipeline's name."""
        return self._pipeline_name

    @property
    def pipeline_arn(self) -> str:
        """The SageMaker pipeline's ARN, in this stack's account and region (formatted when
        first asked for: most pipelines are never granted or alarmed on by ARN)."""
        return pipeline_arn(self, self._pipeline_name)

    @property
    def pipeline_ref(self) -> Any:
        return sagemaker_refs.PipelineReference(pipeline_name=self.pipeline_name)

    def grant_start_pipeline_execution(self, grantee: iam.IGrantable) -> iam.Grant:
        return self.grant_start_execution(grantee)

    # --- consumers -----------------------------------------------------------------------

    def grant_start_execution(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` start executions of this pipeline, and nothing else."""
        return grant_start(self, grantee)

    def metric(self, metric_name: str, *, statistic: str = "Sum",
               period: Duration | None = None) -> cloudwatch.Metric:
        """A metric SageMaker Pipelines publishes for this pipeline."""
        return pipeline_metric(self, metric_name, statistic=statistic, period=period)

    def metric_failed_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.metric("ExecutionFailed", period=period)

    def metric_succeeded_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.metric("ExecutionSucceeded", period=period)

    def metric_execution_duration(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.metric("ExecutionDuration", statistic="Average", period=period)


@jsii.implements(sagemaker.IPipeline)
class ImportedPipeline(NamedPipeline):
    """A SageMaker pipeline this app did not create, by name; see
    `PipelineBase.from_pipeline_name`."""

    def __init__(self, scope: Construct, construct_id: str, *, pipeline_name: str) -> None:
        super().__init__(scope, construct_id)
        self._pipeline_name = pipeline_name


def subject(pipeline: IConstruct) -> str:
    """How errors name a pipeline: its class and path (the path a round trip to the CDK, read
    once, where an error needs it)."""
    return f"{type(pipeline).__name__} {path(pipeline)}"


def grant_start(pipeline: sagemaker.IPipeline, grantee: iam.IGrantable) -> iam.Grant:
    """Lets ``grantee`` start executions of ``pipeline``, and nothing else."""
    return iam.Grant.add_to_principal(grantee=grantee,
                                      actions=["sagemaker:StartPipelineExecution"],
                                      resource_arns=[pipeline.pipeline_arn])


def pipeline_arn(scope: Construct, pipeline_name: str) -> str:
    """A pipeline's ARN in ``scope``'s account and region (SageMaker lower-cases the name)."""
    return format_arn(stack_of(scope), service="sagemaker", resource="pipeline",
                      resource_name=pipeline_name.lower())


def pipeline_metric(pipeline: sagemaker.IPipeline, metric_name: str, *, statistic: str = "Sum",
                    period: Duration | None = None) -> cloudwatch.Metric:
    """A metric SageMaker Pipelines publishes for ``pipeline`` (any ``IPipeline``: they are
    dimensioned by name alone)."""
    from aws_cdk import aws_cloudwatch as cloudwatch

    return cloudwatch.Metric(
        namespace=METRIC_NAMESPACE,
        metric_name=metric_name,
        dimensions_map={"PipelineName": pipeline.pipeline_name},
        statistic=statistic,
        period=period or Duration.minutes(5),
    )
