"""cdk-nag 3 acknowledgements: per finding, on the narrowest construct, always with a reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations

from compiled_training.catalog.api_shapes import STRING_TOKEN
from compiled_training.wiring.stack_reads import once
from constructs import IConstruct

AWS_SOLUTIONS = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, *, pack: str = AWS_SOLUTIONS) -> None:
    """Acknowledges one finding id (e.g. ``AwsSolutions-S1``) on ``scope``."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{pack}::{rule}", reason=reason))


def acknowledge_wildcards(scope: IConstruct, reasons: Mapping[str, str], *,
                          stack: Stack | None = None) -> None:
    """Acknowledges ``AwsSolutions-IAM5`` for exactly these wildcard resources, each with
    its reason. ``stack``: the scope's, when the caller has it.

    cdk-nag names a finding after the wildcard string, with CloudFormation references
    flattened (``<LogicalId>``, ``<AWS::Region>``); this renders the same names from tokens.
    """
    names = _finding_names(stack or Stack.of(scope), list(reasons))
    Validations.of(scope).acknowledge(*(
        Acknowledgment(id=f"{AWS_SOLUTIONS}::AwsSolutions-IAM5[Resource::{name}]",
                       reason=reason)
        for name, reason in zip(names, reasons.values(), strict=True)))


def _finding_names(stack: Stack, resources: list[str]) -> list[str]:
    """The resources flattened as cdk-nag names them. Each token is resolved once per stack,
    in one call for all that are new: pipelines share them (the partition, the bucket), while
    the strings around them differ."""
    flat: dict[str, str] = once(stack, "flattened tokens", dict)
    new = sorted({token for resource in resources for token in STRING_TOKEN.findall(resource)}
                 - flat.keys())
    if new:
        flat.update(zip(new, map(flatten, stack.resolve(new)), strict=True))
    return [STRING_TOKEN.sub(lambda token: flat[token.group()], resource)
            for resource in resources]


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


def skip_checkov(scope: IConstruct, reasons: Mapping[str, str]) -> None:
    """checkov suppressions (``CKV_AWS_*``) on the CloudFormation resource of ``scope``, each
    with its reason, in the template metadata where checkov reads them."""
    resource = scope if isinstance(scope, CfnResource) else scope.node.default_child
    assert isinstance(resource, CfnResource), scope.node.path
    skips = list((resource.get_metadata("checkov") or {}).get("skip", []))
    skips += [{"id": check, "comment": reason} for check, reason in sorted(reasons.items())]
    resource.add_metadata("checkov", {"skip": skips})


def skip_checkov_for_function(function: IConstruct, purpose: str, *,
                              no_dead_letter_queue: str | None = None) -> None:
    """The checks that do not fit a function run by CloudFormation or a pipeline step, once
    per deployment or execution, that calls AWS APIs only (``purpose`` says which).

    ``no_dead_letter_queue`` says why an asynchronously invoked function needs none; when
    omitted, the function is invoked synchronously."""
    skip_checkov(function, {
        "CKV_AWS_115": f"{purpose}; it runs once per deployment or execution, so reserving "
                       "concurrency would only take from the account's pool.",
        "CKV_AWS_116": f"{purpose}; " + (
            no_dead_letter_queue or "it is invoked synchronously and its caller reports a "
                                    "failure, while a dead-letter queue serves asynchronous "
                                    "invocations."),
        "CKV_AWS_117": f"{purpose}; it reaches AWS APIs only, no resource inside a VPC.",
        "CKV_AWS_173": "Its environment names resources, no secret; Lambda encrypts it at rest.",
    })


LOG_GROUP_WITHOUT_KMS = {
    "CKV_AWS_158": "Operational logs with no secrets; CloudWatch Logs encrypts them at rest "
                   "with its service key.",
}
