"""What a governed account asks of a pipeline: its tags on every job it creates (cost
allocation), final once every aspect has run and held to SageMaker's rules, and, for a role the
account issues that the app may not change, the statements to grant it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

import jsii
from aws_cdk import Annotations, IListProducer, IResolveContext, Lazy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training.catalog.api_shapes import is_token
from compiled_training.definition import validation
from compiled_training.pipelines.limits import watch_shared_role
from compiled_training.pipelines.named_pipeline import subject
from compiled_training.wiring.policy import ImmutableRoleWarning, InlinePolicy
from compiled_training.wiring.stack_reads import collected, once
from constructs import Construct, IConstruct, IValidation

PIPELINE_TAG = "compiled-training:pipeline"
# SageMaker's tags on a job (the API's Tag shapes and its documented limit of 50 a resource).
MAX_JOB_TAGS = 50
RESERVED_TAG_PREFIX = "aws:"
# The requests that create jobs, by step type: their Arguments take Tags. Not RegisterModel:
# CreateModelPackage refuses Tags for a version in a group, which takes the group's.
TAGGED_STEPS = ("Training", "Processing")


def with_job_tags(definition: dict[str, Any], tags: Any) -> dict[str, Any]:
    """The definition with ``tags`` as the Tags of every request that creates a
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


@jsii.implements(IListProducer)
class JobTagKeys:
    """The tag keys a role the user gives may add to the jobs of its pipelines (one, or a
    team's), read at synthesis: the statement goes into the role's own policy, where a
    pipeline cannot write it again."""

    def __init__(self, tag_sets: list[JobTagSet]) -> None:
        self._tag_sets = tag_sets

    def produce(self, context: IResolveContext) -> list[str]:
        each = [tag_set.keys() for tag_set in self._tag_sets]
        return list(dict.fromkeys(key for keys in each for key in keys))


def job_tag_keys(role: iam.IRole, tag_set: JobTagSet, team: Hashable | None) -> Any:
    """The tag keys ``role`` (given) may add to a pipeline's jobs: the pipeline's own; in a
    team scope, every teammate's, one list for the team (its statement is the same for all)."""
    if team is None:
        return Lazy.uncached_list(JobTagKeys([tag_set]))
    tag_sets: list[JobTagSet] = once(role, ("team tag sets", team), list)
    tag_sets.append(tag_set)
    return once(role, ("team tag keys", team),
                lambda: Lazy.uncached_list(JobTagKeys(tag_sets)))


def check_role_accounts(owner: Construct, where: str,
                        roles: Mapping[str, iam.IRole | None]) -> None:
    """A given role of another account than the stack's: an error where both accounts are
    known (iam:PassRole passes only the caller's own roles), a warning where the stack's is not
    known at synth."""
    # A role made in the app has a token for an ARN: only imported ones are read (a jsii call
    # each, which a team's many pipelines would pay for nothing).
    imported = [(prop, role) for prop, role in roles.items()
                if role is not None and not isinstance(role, iam.Role)]
    if not imported:
        return
    stack = Stack.of(owner)
    for prop, role in imported:
        if is_token(role.role_arn) or role.role_arn.count(":") < 5:
            continue
        account = role.role_arn.split(":")[4]
        if is_token(stack.account):
            Annotations.of(owner).add_warning_v2(
                f"compiled-training:{type(owner).__name__}:RoleAccount",
                f"{prop} {role.role_arn} is a role of account {account}, and this stack's "
                f"account is known only at deployment: deploy it to {account}, as SageMaker "
                f"runs only roles of the caller's account (iam:PassRole)")
        elif account != stack.account:
            raise ValueError(f"{where}: {prop} {role.role_arn} is a role of account {account}, "
                             f"and the stack deploys to {stack.account}: SageMaker runs only "
                             f"roles of the caller's account (iam:PassRole), so give one of "
                             f"{stack.account}")


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


class TaggedPipeline(IConstruct, Protocol):
    """A pipeline whose jobs carry its tags (a `PipelineBase`, which builds on this module)."""

    @property
    def pipeline_name(self) -> str: ...
    @property
    def resource(self) -> sagemaker.CfnPipeline: ...


def watch_job_tags(stack: Stack, tag_set: JobTagSet) -> None:
    """Checks a pipeline's job tags (once its resource exists) with every other pipeline's
    of the stack, by one validation of the stack: one call into the CDK a stack, not three a
    pipeline."""
    collected(stack, "job tag sets", _JobTagsValidation).append(tag_set)


@jsii.implements(IValidation)
class _JobTagsValidation:
    def __init__(self, tag_sets: list[JobTagSet]) -> None:
        self._tag_sets = tag_sets

    def validate(self) -> list[str]:
        return [problem for tag_set in self._tag_sets for problem in tag_set.freeze()]


class JobTagSet:
    """The tags every job of the pipeline carries, checked against SageMaker's rules: those
    set on its resource (by ``Tags.of(scope)`` at any level above it, or its ``tags`` prop),
    and the library's own, which nothing overrides.

    The definition and the pipeline role's policy are written with the tags known when the
    pipeline is made (its ``tags`` prop, and the library's own), as values: ``job_tags`` and
    ``tag_keys``. ``Tags.of`` applies as an aspect, at synthesis, and an aspect may change
    them; the stack's validation, which runs once every aspect has, reads the final tags
    and, where they differ, updates both lists in place and calls each writer
    (`write_with`) to put them in the template again. A value, not a token: CDK resolves a
    template three times (preparing, writing it, the tree), and a token would be a round
    trip to this process each time, for each pipeline."""

    def __init__(self, pipeline: TaggedPipeline, known: Mapping[str, str]) -> None:
        self._pipeline = pipeline
        self._frozen = False
        self._given: dict[str, str] = {}
        self.job_tags: list[dict[str, str]] = []
        """The Tags of every request that creates a job."""
        self.tag_keys: list[str] = []
        """The tag keys the pipeline role may add to its jobs (and SageMaker's own)."""
        self._writers: list[tuple[Callable[[], str | None], bool]] = []
        self._set(known)

    def write_with(self, writer: Callable[[], str | None], *, keys_only: bool = False) -> None:
        """``writer`` writes ``job_tags`` (``keys_only``: ``tag_keys``) into the template again
        when the aspects changed them; it returns why it could not, or None."""
        self._writers.append((writer, keys_only))

    def keys(self) -> list[str]:
        """``tag_keys`` as they are now: read again until frozen."""
        if self._frozen:
            return list(self.tag_keys)
        return _keys(self._with_own(self._read()))

    def freeze(self) -> list[str]:
        """Reads the tags once the aspects have run (at each synth), writes them again where
        they changed; what SageMaker would refuse of them."""
        final = self._read()
        self._frozen = True
        unwritten = []
        if final != self._given:
            keys = list(self.tag_keys)
            self._set(final)
            for write, keys_only in self._writers:
                problem = None if keys_only and keys == self.tag_keys else write()
                if problem:
                    unwritten.append(problem)
        return self._problems(unwritten)

    def _read(self) -> dict[str, str]:
        tag_manager = once(self._pipeline, "tag manager", lambda: self._pipeline.resource.tags)
        return dict(tag_manager.tag_values())

    def _with_own(self, given: Mapping[str, str]) -> dict[str, str]:
        return dict(sorted({**given, PIPELINE_TAG: self._pipeline.pipeline_name}.items()))

    def _set(self, given: Mapping[str, str]) -> None:
        self._given = dict(given)
        tags = self._with_own(given)
        self.job_tags[:] = [{"Key": key, "Value": value} for key, value in tags.items()]
        self.tag_keys[:] = _keys(tags)

    def _problems(self, unwritten: list[str]) -> list[str]:
        given = self._given
        tags = self._with_own(given)
        problems = list(unwritten)
        if PIPELINE_TAG in given:
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
        if not problems:
            return []
        return [f"{subject(self._pipeline)}: {problem} (tags reach every job the pipeline "
                f"creates)" for problem in problems]


def _keys(tags: Mapping[str, str]) -> list[str]:
    """The tag keys a pipeline role may add to its jobs: the pipeline's, and SageMaker's own."""
    return [*tags, "sagemaker:*"]
