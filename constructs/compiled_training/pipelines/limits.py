"""What CloudFormation and IAM allow a stack of pipelines, said at synth before either refuses:
500 resources a stack (each `TrainingPipeline` with roles of its own is three), and 10 managed
policies a role (a role shared by many pipelines takes each one's statements, and aws-cdk-lib
moves what its inline policy cannot hold into managed "overflow" policies)."""

from __future__ import annotations

from collections import Counter

import jsii
from aws_cdk import CfnResource, Stack
from aws_cdk import aws_iam as iam

from compiled_training.wiring.stack_reads import collected, once
from constructs import IConstruct, IValidation

MAX_RESOURCES_PER_STACK = 500
# IAM's default quota of managed policies attached to a role (20 on request).
MAX_MANAGED_POLICIES_PER_ROLE = 10
OVERFLOW_POLICY = "OverflowPolicy"


def watch_stack(stack: Stack) -> None:
    """Checks the stack's resource count once, whatever the number of pipelines in it."""
    once(stack, "resource limit", lambda: stack.node.add_validation(_StackResources(stack)))


def watch_shared_role(role: iam.IRole, pipeline: str) -> None:
    """Counts the pipelines a given role serves and checks its managed policies once."""
    served: list[str] = collected(role, "pipelines served",
                                  lambda served: _RolePolicies(role, served))
    served.append(pipeline)


@jsii.implements(IValidation)
class _StackResources:
    def __init__(self, stack: Stack) -> None:
        self._stack = stack

    def validate(self) -> list[str]:
        resources = [c for c in self._stack.node.find_all() if isinstance(c, CfnResource)]
        if len(resources) <= MAX_RESOURCES_PER_STACK:
            return []  # the common case: one call into jsii, nested stacks counted in
        kinds = Counter(c.cfn_resource_type for c in resources if Stack.of(c) is self._stack)
        total = sum(kinds.values())
        if total <= MAX_RESOURCES_PER_STACK:
            return []
        top = ", ".join(f"{kind} ({count})" for kind, count in kinds.most_common(4))
        return [f"stack {self._stack.stack_name} would hold {total} resources, over "
                f"CloudFormation's {MAX_RESOURCES_PER_STACK}: {top}. A pipeline with roles "
                f"of its own is three; given shared roles (role=, pipeline_role=: a role "
                f"serves up to about 60 pipelines, and with team_scope= hundreds) it is one. "
                f"Or split the pipelines over stacks, one a team."]


@jsii.implements(IValidation)
class _RolePolicies:
    def __init__(self, role: iam.IRole, served: list[str]) -> None:
        self._role = role
        self._served = served

    def validate(self) -> list[str]:
        overflow = [c for c in self._role.node.children if c.node.id.startswith(OVERFLOW_POLICY)]
        if len(overflow) <= MAX_MANAGED_POLICIES_PER_ROLE:
            return []
        return [f"role {_name(self._role)} serves {len(self._served)} pipelines, whose "
                f"statements take {len(overflow)} managed policies besides its inline one; "
                f"IAM attaches at most {MAX_MANAGED_POLICIES_PER_ROLE} to a role (20 on "
                f"request): give each role fewer pipelines (about 60), one role a team, or "
                f"declare the team (team_scope=TeamScope(...)): the pair then takes its "
                f"statements once"]


def _name(construct: IConstruct) -> str:
    return construct.node.path
