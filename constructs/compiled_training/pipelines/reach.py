"""Whose jobs, outputs and data a pipeline's role statements name: the pipeline's own, or, with
a declared `TeamScope` and a role pair given to the team's pipelines, the team's.

Per pipeline (the default) a role given to many pipelines takes each one's statements, each
naming that pipeline alone: isolation between pipelines, at about 14 statements a pipeline
(some 60 pipelines fill IAM's 10 managed policies a role). In a team scope the statements name
the team (its pipeline-name prefix, its output prefix, its declared data), so every teammate's
statements are the same ones: the roles take them once, and a pipeline after the first adds
none, nor a call into the CDK for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from compiled_training.pipelines.governance import PIPELINE_TAG
from compiled_training.values.job import InputChannel
from compiled_training.values.team_scope import TeamScope
from compiled_training.wiring.policy import InlinePolicy, attached_policy
from compiled_training.wiring.stack_reads import format_arn, once
from constructs import IConstruct

TEAM_ROLES = ("role", "pipeline_role")
"""The roles a team scope is for: the pair a platform team hands a team."""
_JOB_VERBS = {"training-job": "TrainingJob", "processing-job": "ProcessingJob"}


class Reach:
    """What the statements of one pipeline's roles name: the pipeline, or its team."""

    def __init__(self, subject: str, pipeline_name: str, team: TeamScope | None,
                 given_roles: Mapping[str, iam.IRole | None], app: IConstruct, *,
                 named_by_path: bool = False) -> None:
        self.team = team
        self._name = pipeline_name
        # The app's team scopes, and its pipelines in none: a team's roles reach every
        # pipeline named under its prefix, so a pipeline outside the team may not be.
        declared: list[TeamScope] = once(app, "team scopes", list)
        outside: dict[str, str] = once(app, "pipelines outside a team", dict)
        problems = []
        if team is None:
            for other in declared:
                if other.names(pipeline_name):
                    problems.append(_not_in_team(pipeline_name, other))
            if problems:
                raise ValueError(f"{subject}: " + "; ".join(problems))
            outside[pipeline_name] = subject
            return
        if missing := [prop for prop in TEAM_ROLES if given_roles.get(prop) is None]:
            problems.append(f"team_scope is for a role pair given to the team's pipelines; "
                            f"give {' and '.join(f'{prop}=' for prop in missing)} too")
        if not team.names(pipeline_name):
            problems.append(f"pipeline_name {pipeline_name!r} must begin with team_scope's "
                            f"name_prefix {team.name_prefix!r}: the team's roles reach only "
                            f"pipelines named so" + (
                                f"; pass pipeline_name='{team.name_prefix}...' (the name was "
                                f"derived from the construct path)" if named_by_path else ""))
        if team not in declared:  # the team against the app, once, as it is declared
            problems += _clashes(team, declared, outside)
        if problems:
            raise ValueError(f"{subject}: " + "; ".join(problems))
        if team not in declared:
            declared.append(team)

    @property
    def output_prefix(self) -> str:
        """The key prefix under the output bucket its roles may write."""
        return self.team.name_prefix if self.team else f"{self._name}/"

    def named(self, condition_key: str) -> dict[str, dict[str, str]]:
        """The condition that ``condition_key`` (a pipeline tag) names this pipeline, or in a
        team scope, any of the team's."""
        if self.team is None:
            return {"StringEquals": {condition_key: self._name}}
        return {"StringLike": {condition_key: f"{self.team.name_prefix}*"}}

    def pipeline_policy(self, stack: Stack, execution_role_arn: str, tag_keys: Any,
                        job_kinds: Sequence[str]) -> InlinePolicy:
        """What Pipelines' own role may do: create, describe and stop only the jobs it names
        (``job_kinds``), tagging them only with ``tag_keys``; pass only their role."""
        policy = InlinePolicy()
        why = ("Pipelines name jobs at run time; the tag conditions limit create, describe "
               "and stop to jobs tagged with this pipeline's name (in a team scope, a name "
               "under the team's prefix).")
        for kind in job_kinds:
            jobs = format_arn(stack, service="sagemaker", resource=kind, resource_name="*")
            verb = _JOB_VERBS[kind]
            named = self.named(f"aws:RequestTag/{PIPELINE_TAG}")
            policy.allow([f"sagemaker:Create{verb}"], [jobs], why=why, conditions=named)
            # Tags only as its own job is created, and only its own tags (its own, and those
            # the stack sets on the pipeline: cost allocation): retagging another pipeline's
            # job would hand it describe and stop. SageMaker adds its own sagemaker: tags to a
            # job it creates (the execution, the step).
            policy.allow(["sagemaker:AddTags"], [jobs], why=why, conditions={
                **named, "StringEquals": {**named.get("StringEquals", {}),
                                          "sagemaker:TaggingAction": f"Create{verb}"},
                "ForAllValues:StringLike": {"aws:TagKeys": tag_keys},
            })
            policy.allow([f"sagemaker:Describe{verb}", f"sagemaker:Stop{verb}"], [jobs],
                         why=why, conditions=self.named(f"aws:ResourceTag/{PIPELINE_TAG}"))
        policy.allow(["iam:PassRole"], [execution_role_arn], conditions={
            "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}})
        return policy

    def channel_prefix(self, channel: InputChannel, subject: str) -> str:
        """The S3 prefix the execution role reads ``channel`` under: its own, or its team's
        declared data URI (a channel outside every one is refused)."""
        uri = channel.default_uri
        if self.team is None:
            return uri
        data = self.team.data_uri_of(uri)
        if data is None:
            declared = ", ".join(self.team.data_uris) or "none declared"
            raise ValueError(
                f"{subject}: channel {channel.name!r} URI {uri!r} is outside team_scope "
                f"{self.team.name_prefix!r}'s data_uris ({declared}): the team's execution "
                f"role reads there only; move the data or declare its prefix")
        return data


def _clashes(team: TeamScope, declared: list[TeamScope], outside: Mapping[str, str]) -> list[str]:
    """What a newly declared team clashes with in the app: a pipeline outside it named under its
    prefix, another team's prefix or data. (A pipeline made later outside it, or a team
    declared later, checks itself against it.)"""
    problems = [f"{who}: {_not_in_team(name, team)}" for name, who in outside.items()
                if team.names(name)]
    for other in declared:
        if other.name_prefix == team.name_prefix:
            problems.append(f"two team scopes declare name_prefix {team.name_prefix!r} "
                            f"with different data_uris: declare the team once and give "
                            f"the same TeamScope to each of its pipelines")
        elif other.overlaps(team):
            problems.append(f"team_scope name_prefix {team.name_prefix!r} overlaps "
                            f"another team's {other.name_prefix!r} in this app: one "
                            f"team's roles would reach the other's pipelines; give "
                            f"prefixes neither of which begins the other")
        elif shared := team.shared_data(other):
            problems.append(f"team_scope {team.name_prefix!r}'s data_uris overlap "
                            f"team {other.name_prefix!r}'s ({shared}): each team reads "
                            f"data of its own")
    return problems


def _not_in_team(pipeline_name: str, team: TeamScope) -> str:
    return (f"pipeline_name {pipeline_name!r} begins with team_scope {team.name_prefix!r}'s "
            f"prefix but the pipeline is not in that team: the team's roles would reach its "
            f"jobs and outputs; give it that team's TeamScope (with the team's roles), or a "
            f"name outside the prefix")


def give_once(role: iam.IRole, policy: InlinePolicy,
              attach: Callable[[InlinePolicy], iam.IRole]) -> iam.IRole:
    """Attaches (``attach``) the statements of ``policy`` that ``role`` was not given yet by
    a teammate: identical statements (the team's) are given once. An imported, immutable role
    takes none, so each pipeline's warning lists them all again."""
    given: set[str] = once(role, "team statements", set)
    fresh, keys = InlinePolicy(), []
    for statement in policy.statements:
        key = _text(statement)
        if key not in given and key not in keys:
            keys.append(key)
            fresh.statements.append(statement)
    resources = {r for s in fresh.statements for r in s["Resource"]}
    fresh.wildcards = {r: why for r, why in policy.wildcards.items() if r in resources}
    attached = attach(fresh)
    # The policy attach_to found (cached there): a role with none (imported, immutable) keeps
    # no statements, so each teammate lists them all again.
    if keys and once(role, "attached policy", lambda: attached_policy(role)) is not None:
        given.update(keys)
    return attached


def _text(statement: Mapping[str, Any]) -> str:
    # Tokens are strings here, the same object's the same string: the same statement reads
    # the same.
    return json.dumps(statement, sort_keys=True)
