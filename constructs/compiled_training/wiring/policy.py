"""One role's inline policy, with the reason for every wildcard it grants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_iam as iam

from compiled_training.wiring.acknowledgements import acknowledge_wildcards
from compiled_training.wiring.stack_reads import (
    account,
    aws_partition,
    service_principal,
    stack_of,
)
from constructs import Construct

SAGEMAKER = "sagemaker.amazonaws.com"


class InlinePolicy:
    """One role's inline policy; every wildcard resource carries the reason it is needed.

    Inline, not attached: the role and its permissions are one resource, so the pipeline
    (which references the role) can never be created before its permissions exist.
    """

    def __init__(self) -> None:
        self.statements: list[dict[str, Any]] = []
        self.wildcards: dict[str, str] = {}
        """Each wildcard resource and the reason it is needed."""
        self._pulls: list[str] | None = None

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

    def allow_pull(self, repository_arn: str) -> None:
        """Lets the role pull images from one more ECR repository (one statement for all)."""
        if self._pulls is None:
            self._pulls = []
            self.allow(["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                        "ecr:BatchCheckLayerAvailability"], self._pulls)
            self.allow(["ecr:GetAuthorizationToken"], ["*"],
                       why="ecr:GetAuthorizationToken supports no resource-level permission; "
                           "pulls are limited to the image repositories by another statement.")
        if repository_arn not in self._pulls:
            self._pulls.append(repository_arn)

    def allow_prefix(self, bucket: str, key_prefix: str, actions: list[str], *,
                     why: str) -> None:
        partition = aws_partition()
        self.allow(actions, [f"arn:{partition}:s3:::{bucket}/{key_prefix}*"], why=why)
        self.allow(["s3:ListBucket"], [f"arn:{partition}:s3:::{bucket}"],
                   conditions={"StringLike": {"s3:prefix": [f"{key_prefix}*"]}})

    def role(self, scope: Construct, construct_id: str, description: str, *,
             service: str = SAGEMAKER) -> iam.Role:
        # SageMaker says on whose behalf it assumes a role; a role only this account's
        # pipelines and jobs may use is no confused deputy. (Lambda sends no such key.)
        stack = stack_of(scope)
        conditions = ({"StringEquals": {"aws:SourceAccount": account(stack)}}
                      if service == SAGEMAKER else None)
        role = iam.Role(
            scope, construct_id,
            assumed_by=service_principal(stack, service, conditions),
            description=description,
            # One document from JSON: one call into jsii instead of one per statement.
            inline_policies={"Permissions": iam.PolicyDocument.from_json(
                {"Version": "2012-10-17", "Statement": self.statements})},
        )
        if self.wildcards:
            resource = role.node.default_child
            assert resource is not None
            acknowledge_wildcards(resource, self.wildcards, stack=stack)
        return role

    def attach_to(self, role: iam.IRole) -> list[dict[str, Any]]:
        """Adds the statements to a role given by the user, as aws-cdk-lib's grants do (a role
        made in the app: its default policy; an imported, mutable one: a policy attached to
        it); returns them all where nothing could be attached (an imported, immutable role,
        which takes them silently), for the user to grant."""
        for statement in self.statements:
            role.add_to_principal_policy(iam.PolicyStatement.from_json(statement))
        policy = role.node.try_find_child("DefaultPolicy") or role.node.try_find_child("Policy")
        if policy is None:
            return list(self.statements)
        if self.wildcards and policy.node.default_child is not None:
            acknowledge_wildcards(policy.node.default_child, self.wildcards)
        return []
