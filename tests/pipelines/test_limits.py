"""Hundreds of pipelines a team: a stack of 256 synthesizes with shared roles, and where
CloudFormation (500 resources a stack) or IAM (10 managed policies a role) would refuse it,
the synth says so first, with the number and the way out."""

from __future__ import annotations

import collections

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from compiled_training import Framework, InputChannel, TrainingPipeline
from compiled_training.pipelines.limits import MAX_MANAGED_POLICIES_PER_ROLE
from tests.helpers import new_stack


def _pipelines(stack: cdk.Stack, count: int, roles_per: int | None) -> None:
    """``count`` small pipelines (XGBoost: no code asset), sharing a pair of roles made in
    the app every ``roles_per`` pipelines (None: each its own)."""
    roles: dict = {}
    for i in range(count):
        if roles_per is not None and i % roles_per == 0:
            principal = iam.ServicePrincipal("sagemaker.amazonaws.com")
            roles = {"role": iam.Role(stack, f"Execution{i}", assumed_by=principal),
                     "pipeline_role": iam.Role(stack, f"Runner{i}", assumed_by=principal)}
        TrainingPipeline(stack, f"P{i}", framework=Framework.xgboost("1.7-1"),
                         instance_type="ml.m5.xlarge", pipeline_name=f"team-p{i}",
                         channels=[InputChannel("train", f"s3://team-data/p{i}/train/",
                                                content_type="text/csv")], **roles)


def test_256_pipelines_synthesize_in_one_stack_with_shared_roles():
    stack = new_stack()
    _pipelines(stack, 256, roles_per=32)
    template = cdk.App.of(stack).synth().get_stack_by_name(stack.stack_name).template
    kinds = collections.Counter(r["Type"] for r in template["Resources"].values())
    assert kinds["AWS::SageMaker::Pipeline"] == 256
    assert kinds["AWS::IAM::Role"] == 16
    assert sum(kinds.values()) <= 500
    # Each role's statements fit IAM's managed policies a role.
    policies = collections.Counter(
        str(role) for r in template["Resources"].values() if r["Type"] == "AWS::IAM::ManagedPolicy"
        for role in r["Properties"]["Roles"])
    assert max(policies.values()) <= MAX_MANAGED_POLICIES_PER_ROLE


def test_a_stack_over_cloudformations_limit_is_refused_first_naming_the_way_out():
    stack = new_stack()
    _pipelines(stack, 256, roles_per=None)
    with pytest.raises(Exception, match=r"stack Team would hold 772 resources, over "
                                        r"CloudFormation's 500: AWS::IAM::Role \(512\), "
                                        r"AWS::SageMaker::Pipeline \(256\).*shared roles "
                                        r"\(role=, pipeline_role=.*split the pipelines over "
                                        r"stacks, one a team"):
        cdk.App.of(stack).synth()


def test_a_role_shared_by_too_many_pipelines_is_refused_before_iam_refuses_it():
    stack = new_stack()
    _pipelines(stack, 90, roles_per=90)
    with pytest.raises(Exception, match=r"role Team/Runner0 serves 90 pipelines, whose "
                                        r"statements take 1\d managed policies besides its "
                                        r"inline one; IAM attaches at most 10 to a role"):
        cdk.App.of(stack).synth()
