"""One role's inline policy, with the reason for every wildcard it grants; and for a role a user
gives that takes no grants (imported, immutable), the warning that lists them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsii
from aws_cdk import Annotations, ArnFormat, Stack
from aws_cdk import aws_iam as iam

from compiled_training.wiring.acknowledgements import acknowledge_wildcards
from compiled_training.wiring.stack_reads import (
    account,
    aws_partition,
    default_child,
    format_arn,
    once,
    service_principal,
    stack_of,
)
from constructs import Construct, IConstruct, IValidation

SAGEMAKER = "sagemaker.amazonaws.com"
POLICY_NAME = "Permissions"


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

    def allow_job_logs(self, stack: Stack, job_kind: str) -> None:
        """Writes the logs and metrics of SageMaker jobs of one kind (``TrainingJobs``...)."""
        group = f"/aws/sagemaker/{job_kind}"
        log_group = format_arn(stack, service="logs", resource="log-group",
                               resource_name=group, arn_format=ArnFormat.COLON_RESOURCE_NAME)
        self.allow(["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                   [f"{log_group}:log-stream:*"],
                   why=f"SageMaker names a job's log streams at run time, inside the fixed "
                       f"{group} log group.")
        self.allow(["logs:CreateLogGroup"], [log_group])
        self.allow(["cloudwatch:PutMetricData"], ["*"],
                   conditions={"StringEquals": {"cloudwatch:namespace": group}},
                   why="cloudwatch:PutMetricData supports no resource; the condition limits "
                       "it to SageMaker's job namespaces.")

    def allow_network_interfaces(self) -> None:
        """Creates and deletes a job's network interfaces in its VPC."""
        self.allow([
            "ec2:CreateNetworkInterface",
            "ec2:CreateNetworkInterfacePermission",
            "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeVpcs",
            "ec2:DescribeDhcpOptions",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
        ], ["*"], why="SageMaker creates the job's network interfaces at run time; these EC2 "
                      "actions support no resource-level permission.")

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
            inline_policies={POLICY_NAME: self._document()},
        )
        resource = _resource(role)
        # None: Role.customize_roles keeps the role out of the template (a report lists its
        # policy), and cdk-nag finds nothing to acknowledge.
        if self.wildcards and resource is not None:
            acknowledge_wildcards(resource, self.wildcards, stack=stack)
        return role

    def write_again(self, role: iam.IRole) -> str | None:
        """Writes the statements into ``role`` (made by `role`) again: values in them changed
        in place since (the tag keys, which the tag aspects decide). Where
        ``iam.Role.customize_roles`` keeps the role out of the template, aws-cdk-lib's report
        lists the statements as first written: why they are not the final ones."""
        resource = _resource(role)
        if resource is None:
            return (f"iam.Role.customize_roles keeps role {role.node.path} out of the template, "
                    f"and its report lists the statements as the pipeline was made: the tag "
                    f"keys an aspect changed (Tags.of above it adds, RemoveTag takes away) "
                    f"cannot reach the keys its jobs may take; give the tags with the "
                    f"pipeline's tags prop")
        resource.policies = [iam.CfnRole.PolicyProperty(
            policy_name=POLICY_NAME, policy_document=self._document())]
        return None

    def _document(self) -> iam.PolicyDocument:
        # One document from JSON: one call into jsii instead of one per statement.
        return iam.PolicyDocument.from_json(
            {"Version": "2012-10-17", "Statement": self.statements})

    def attach_to(self, role: iam.IRole) -> list[dict[str, Any]]:
        """Adds the statements to a role given by the user, as aws-cdk-lib's grants do (a role
        made in the app: its default policy; an imported, mutable one: a policy attached to
        it); returns them all where nothing could be attached (an imported, immutable role,
        which takes them silently), for the user to grant."""
        if not self.statements:
            return []
        first, *rest = (iam.PolicyStatement.from_json(s) for s in self.statements)
        role.add_to_principal_policy(first)  # makes the policy where there is none yet
        policy = once(role, "attached policy", lambda: attached_policy(role))
        if isinstance(policy, iam.Policy):
            # The rest in one call: what add_to_principal_policy does with each (a role's
            # grants go to that policy), without a round trip to the CDK per statement.
            policy.add_statements(*rest)
        else:  # a role that keeps its grants elsewhere (or drops them): one by one
            for statement in rest:
                role.add_to_principal_policy(statement)
        if policy is None:
            return list(self.statements)
        resource = default_child(policy)
        if self.wildcards and resource is not None:
            acknowledge_wildcards(resource, self.wildcards)
        return []


def _resource(role: iam.IRole) -> iam.CfnRole | None:
    """The ``AWS::IAM::Role`` of a role made by `InlinePolicy.role`; None where
    ``iam.Role.customize_roles`` keeps it out of the template."""
    resource = default_child(role)
    return resource if isinstance(resource, iam.CfnRole) else None


def attached_policy(role: iam.IRole) -> IConstruct | None:
    """The policy aws-cdk-lib attaches a role's grants to: a role made in the app has its
    default policy, an imported mutable one a policy of its own; an imported, immutable one
    takes grants silently and has none."""
    return role.node.try_find_child("DefaultPolicy") or role.node.try_find_child("Policy")


@jsii.implements(IValidation)
class ImmutableRoleWarning:
    """The statements an imported, immutable role needs, as a warning a security team can
    copy: CloudFormation's form of the references (Ref, Fn::GetAtt), for a reader to fill."""

    def __init__(self, owner: Construct, prop: str, role: iam.IRole,
                 statements: list[dict[str, Any]]) -> None:
        self._owner, self._prop, self._role = owner, prop, role
        self._statements = statements

    def validate(self) -> list[str]:
        kind = type(self._owner).__name__
        document = json.dumps(Stack.of(self._owner).resolve(
            {"Version": "2012-10-17", "Statement": self._statements}), sort_keys=True)
        Annotations.of(self._owner).add_warning_v2(
            f"compiled-training:{kind}:ImmutableRole",
            f"{self._prop} {self._role.role_arn} is imported and immutable, so nothing was "
            f"attached to it; grant it these statements (the policy document, for this "
            f"{kind} alone): {document}")
        return []
