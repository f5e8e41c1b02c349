"""A Lambda function of this library: one handler module of `compiled_training.handlers` as
its code asset, and the function a pipeline's Lambda step invokes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aws_cdk import Duration, RemovalPolicy

from compiled_training import handlers
from compiled_training.catalog.aws_names import LAMBDA_DESCRIPTION_MAX, held_to
from compiled_training.wiring.acknowledgements import (
    LOG_GROUP_WITHOUT_KMS,
    allow_redundant_role_dependency,
    skip_checkov,
    skip_checkov_for_function,
)
from compiled_training.wiring.policy import InlinePolicy
from constructs import Construct

if TYPE_CHECKING:
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_lambda as lambda_

LAMBDA = "lambda.amazonaws.com"
RoleMaker = Callable[[InlinePolicy, str, str], "iam.IRole"]
"""Gives the role a function runs as, from its policy, construct id and description."""

HANDLERS_DIR = Path(handlers.__file__).parent


def handler_code(module: str) -> lambda_.Code:
    """The asset of one handler module, with nothing else in it.

    Only the module: the other handlers and caches from local test runs must not change
    the asset (and so the template).
    """
    # Imported here: a synth that makes no function need not load Lambda's module (and the
    # six it imports), a third of a second.
    from aws_cdk import aws_lambda as lambda_

    return lambda_.Code.from_asset(str(HANDLERS_DIR), exclude=["*", f"!{module}.py"])


def step_function(scope: Construct, name: str, *, module: str, policy: InlinePolicy,
                  description: str, purpose: str, timeout: Duration,
                  environment: Mapping[str, str] | None = None,
                  role: RoleMaker | None = None) -> lambda_.Function:
    """``module``'s handler as the function of a pipeline's Lambda step: a role with
    ``policy`` and the writing of its own logs, kept a year. Construct ids ``<name>Logs``,
    ``<name>Role``, ``<name>Function``; ``purpose`` is what checkov's skips say it does.
    ``role`` gives the role (a user's, with the policy attached); when omitted, one of its
    own trusting Lambda."""
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_logs as logs

    log_group = logs.LogGroup(scope, f"{name}Logs", retention=logs.RetentionDays.ONE_YEAR,
                              removal_policy=RemovalPolicy.RETAIN)
    policy.allow(["logs:CreateLogStream", "logs:PutLogEvents"], [log_group.log_group_arn])
    make_role = role or (lambda p, construct_id, text: p.role(scope, construct_id, text,
                                                              service=LAMBDA))
    function = lambda_.Function(
        scope, f"{name}Function",
        runtime=lambda_.Runtime.PYTHON_3_14,
        code=handler_code(module),
        handler=f"{module}.handler",
        role=make_role(policy, f"{name}Role", description),
        log_group=log_group,
        timeout=timeout,
        environment=dict(environment) if environment is not None else None,
        # Descriptions name the pipeline, whose name may take 256 of Lambda's 256 characters.
        description=held_to(description, LAMBDA_DESCRIPTION_MAX),
    )
    resource = function.node.default_child
    assert isinstance(resource, lambda_.CfnFunction)
    allow_redundant_role_dependency(resource)
    skip_checkov_for_function(function, purpose)
    skip_checkov(log_group, LOG_GROUP_WITHOUT_KMS)
    return function
