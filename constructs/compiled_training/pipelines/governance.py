"""What a governed account asks of a pipeline: its tags on every job it creates (cost
allocation), read once the tag aspects have run and held to SageMaker's rules, and, for a role
the account issues that the app may not change, the statements to grant it."""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import IAnyProducer, IListProducer, IResolveContext
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training.definition import validation
from compiled_training.pipelines.limits import watch_shared_role
from compiled_training.pipelines.named_pipeline import NamedPipeline
from compiled_training.wiring.policy import ImmutableRoleWarning, InlinePolicy
from constructs import Construct, IValidation

PIPELINE_TAG = "compiled-training:pipeline"
# SageMaker's tags on a job (the API's Tag shapes and its documented limit of 50 a resource).
MAX_JOB_TAGS = 50
RESERVED_TAG_PREFIX = "aws:"
# The requests that create jobs, by step type: their Arguments take Tags.
TAGGED_STEPS = ("Training", "Processing")


def job_tags(pipeline: NamedPipeline) -> dict[str, str]:
    """The tags every job of the pipeline carries: those set on its resource (by
    ``Tags.of(scope)`` at any level above it, or its ``tags`` prop), and the library's own,
    which nothing overrides. Read at synthesis, once the tag aspects have run."""
    return dict(sorted({**_given_tags(pipeline), PIPELINE_TAG: pipeline.pipeline_name}.items()))


def _given_tags(pipeline: NamedPipeline) -> dict[str, str]:
    resource = pipeline.node.try_find_child("Resource")
    return dict(resource.tags.tag_values()) if isinstance(resource, sagemaker.CfnPipeline) else {}


def with_job_tags(definition: dict[str, Any], tags: Any) -> dict[str, Any]:
    """The definition with ``tags`` (a token) as the Tags of every request that creates a
    job, in a condition's branches too."""
    def steps(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for step in items:
            arguments = dict(step.get("Arguments", {}))
            if step.get("Type") in TAGGED_STEPS:
                arguments["Tags"] = tags
            for branch in ("IfSteps", "ElseSteps"):
                if branch in arguments:
                    arguments[branch] = steps(arguments[branch])
            out.append({**step, "Arguments": arguments} if "Arguments" in step else step)
        return out

    return {**definition, "Steps": steps(definition["Steps"])}


@jsii.implements(IAnyProducer)
class JobTags:
    def __init__(self, tag_set: JobTagsValidation) -> None:
        self._tag_set = tag_set

    def produce(self, context: IResolveContext) -> Any:
        return [{"Key": k, "Value": v} for k, v in self._tag_set.tags().items()]


@jsii.implements(IListProducer)
class JobTagKeys:
    def __init__(self, tag_set: JobTagsValidation) -> None:
        self._tag_set = tag_set

    def produce(self, context: IResolveContext) -> list[str]:
        return [*self._tag_set.tags(), "sagemaker:*"]


def attach_to_given_role(owner: Construct, prop: str, role: iam.IRole,
                         policy: InlinePolicy, pipeline_name: str) -> iam.IRole:
    """A role the user gives (``prop`` of ``owner``, which serves pipeline
    ``pipeline_name``) with the policy's statements attached; an imported, immutable one
    takes none, so a warning lists them, written once the tag aspects have run (the
    statements name the tag keys)."""
    missing = policy.attach_to(role)
    if missing:
        owner.node.add_validation(ImmutableRoleWarning(owner, prop, role, missing))
    else:
        watch_shared_role(role, pipeline_name)
    return role


@jsii.implements(IValidation)
class JobTagsValidation:
    """The jobs' tags, checked against SageMaker's rules once the tag aspects have run, and
    from then on read once for every step and statement that carries them."""

    def __init__(self, pipeline: NamedPipeline) -> None:
        self._pipeline = pipeline
        self._checked: dict[str, str] | None = None

    def tags(self) -> dict[str, str]:
        """The tags as checked; read live where something resolves before the check."""
        return self._checked if self._checked is not None else job_tags(self._pipeline)

    def validate(self) -> list[str]:
        tags = self._checked = job_tags(self._pipeline)
        problems = []
        if PIPELINE_TAG in _given_tags(self._pipeline):
            problems.append(f"tag key {PIPELINE_TAG!r} is the library's own: its value, the "
                            f"pipeline's name, is what the pipeline role's permissions on its "
                            f"jobs are conditioned on")
        for key, value in tags.items():
            if key.lower().startswith(RESERVED_TAG_PREFIX):
                problems.append(f"tag key {key!r} starts with the reserved "
                                f"{RESERVED_TAG_PREFIX!r} prefix")
            problems += [problem for problem in (
                validation.check_api_string("tag key", key, "TagKey"),
                validation.check_api_string(f"tag {key!r}'s value", value, "TagValue"),
            ) if problem]
        if len(tags) > MAX_JOB_TAGS:
            problems.append(f"its jobs would carry {len(tags)} tags (with the library's own "
                            f"{PIPELINE_TAG!r}), over SageMaker's {MAX_JOB_TAGS}")
        subject = f"{type(self._pipeline).__name__} {self._pipeline.node.path}"
        return [f"{subject}: {problem} (tags reach every job the pipeline creates)"
                for problem in problems]
