"""cdk-nag 3 acknowledgements: per finding, on the narrowest construct, always with a reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations

from constructs import IConstruct

AWS_SOLUTIONS = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, *, pack: str = AWS_SOLUTIONS) -> None:
    """Acknowledges one finding id (e.g. ``AwsSolutions-S1``) on ``scope``."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{pack}::{rule}", reason=reason))


def acknowledge_wildcards(scope: IConstruct, reasons: Mapping[str, str]) -> None:
    """Acknowledges ``AwsSolutions-IAM5`` for exactly these wildcard resources, each with
    its reason.

    cdk-nag names a finding after the wildcard string, with CloudFormation references
    flattened (``<LogicalId>``, ``<AWS::Region>``); this renders the same names from tokens.
    """
    resources = list(reasons)
    validations = Validations.of(scope)
    for resource, resolved in zip(resources, Stack.of(scope).resolve(resources), strict=True):
        validations.acknowledge(Acknowledgment(
            id=f"{AWS_SOLUTIONS}::AwsSolutions-IAM5[Resource::{flatten(resolved)}]",
            reason=reasons[resource]))


def flatten(value: Any) -> str:
    """A resolved CloudFormation value as one string, references as ``<LogicalId>``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(flatten(p) for p in parts)
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return "<" + ".".join(value["Fn::GetAtt"]) + ">"
        if "Fn::ImportValue" in value:
            return str(value["Fn::ImportValue"])
    return str(value)


def allow_redundant_role_dependency(resource: CfnResource) -> None:
    """cfn-lint's W3005, on this resource only: CDK makes a function (or state machine)
    depend on its role (and the role's policy, where it has one); the role is also
    referenced, so cfn-lint calls that dependency redundant. It is harmless, and a policy
    dependency is needed."""
    resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
