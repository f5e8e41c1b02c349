"""Bring-your-own roles for the image builds: ``build_role`` and ``build_handler_role`` on
RuntimeImage, as aws-cdk-lib's ``Project`` and ``Function`` take a ``role``. The stack's one
build project and handler serve every image, so every image gives the same roles. An imported,
immutable role gets nothing, and a warning lists what the library would have granted: held
equal here to the policies of the roles aws-cdk-lib creates for the same images."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

from compiled_training import BuildMode, Compiler, Framework, RuntimeImage
from tests.helpers import new_stack
from tests.iam_policy import as_iam_reads

BUILD_ARN = "arn:aws:iam::123456789012:role/image-builds"
HANDLER_ARN = "arn:aws:iam::123456789012:role/image-build-handler"


def _images(stack: cdk.Stack, **roles) -> None:
    RuntimeImage(stack, "Bert", framework=Framework.pytorch("1.13.1"),
                 compiler=Compiler.training_compiler(), **roles)
    RuntimeImage(stack, "Diffusion", framework=Framework.pytorch("2.5.1"),
                 compiler=Compiler.torch_compile(), **roles)


def _immutable(stack: cdk.Stack) -> dict:
    return {"build_role": iam.Role.from_role_arn(stack, "Builds", BUILD_ARN, mutable=False),
            "build_handler_role": iam.Role.from_role_arn(stack, "BuildHandler", HANDLER_ARN,
                                                         mutable=False)}


def _granted_by_cdk(role_prefix: str) -> list[dict]:
    """The default policy aws-cdk-lib writes for the role it creates, same images."""
    stack = new_stack()
    _images(stack)
    template = Template.from_stack(stack)
    (policy,) = [p for k, p in template.find_resources("AWS::IAM::Policy").items()
                 if k.startswith(role_prefix)]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_immutable_roles_run_the_builds_with_every_grant_listed():
    app = cdk.App()
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack = new_stack(app=app)
    _images(stack, **_immutable(stack))
    template = Template.from_stack(stack)  # synthesizes: cdk-nag finds nothing unexplained
    template.resource_count_is("AWS::IAM::Role", 0)
    template.resource_count_is("AWS::IAM::Policy", 0)
    template.has_resource_properties("AWS::CodeBuild::Project", {"ServiceRole": BUILD_ARN})
    template.has_resource_properties("AWS::Lambda::Function", {"Role": HANDLER_ARN})
    warned = {}
    for warning in Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(
            "is imported and immutable")):
        assert warning.id == "/Team/CompiledTrainingImageBuilder"
        prop = warning.entry.data.split(" ", 1)[0]
        document = re.search(r"alone\): (\{.*\}) \[ack:", warning.entry.data)[1]
        warned[prop] = json.loads(document)["Statement"]
    assert as_iam_reads(warned["build_role"]) == as_iam_reads(
        _granted_by_cdk("CompiledTrainingImageBuilderProjectRole"))
    # The created handler role writes its logs through AWS's basic execution policy; a given
    # role is granted its own log group instead.
    own_logs = [s for s in warned["build_handler_role"] if s["Action"][0].startswith("logs:")]
    assert [s["Action"] for s in own_logs] == [["logs:CreateLogStream", "logs:PutLogEvents"]]
    assert own_logs[0]["Resource"] == [{"Fn::GetAtt": [
        [k for k in template.find_resources("AWS::Logs::LogGroup") if "HandlerLogs" in k][0],
        "Arn"]}]
    assert as_iam_reads([s for s in warned["build_handler_role"] if s not in own_logs]) == \
        as_iam_reads(_granted_by_cdk("CompiledTrainingImageBuilderHandlerServiceRole"))


def test_a_build_role_made_in_the_app_gets_the_grants():
    stack = new_stack()
    role = iam.Role(stack, "Builds", assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"))
    _images(stack, build_role=role)
    template = Template.from_stack(stack)
    roles = template.find_resources("AWS::IAM::Role")
    assert not [k for k in roles if k.startswith("CompiledTrainingImageBuilderProjectRole")]
    (policy,) = [p for k, p in template.find_resources("AWS::IAM::Policy").items()
                 if k.startswith("BuildsDefaultPolicy")]
    assert as_iam_reads(policy["Properties"]["PolicyDocument"]["Statement"]) == \
        as_iam_reads(_granted_by_cdk("CompiledTrainingImageBuilderProjectRole"))
    # Each build starts once the role's policy holds its grants: the policy is the role's,
    # outside the project the build otherwise waits for.
    (policy_id,) = [k for k in template.find_resources("AWS::IAM::Policy")
                    if k.startswith("BuildsDefaultPolicy")]
    builds = template.find_resources("Custom::RuntimeImageBuild")
    assert len(builds) == 2
    assert all(policy_id in build["DependsOn"] for build in builds.values())
    assert Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("immutable")) == []


def test_images_of_a_stack_must_give_the_same_roles():
    stack = new_stack()
    RuntimeImage(stack, "Bert", framework=Framework.pytorch("1.13.1"),
                 compiler=Compiler.training_compiler(), **_immutable(stack))
    with pytest.raises(ValueError, match=r"^RuntimeImage Team/Diffusion: build_role must be the "
                                         r"one the stack's other runtime images give \(role "
                                         r"Team/Builds\): they share one image build project "
                                         r"and handler, got none: roles of its own$"):
        RuntimeImage(stack, "Diffusion", framework=Framework.pytorch("2.5.1"),
                     compiler=Compiler.torch_compile())


def test_a_local_build_takes_no_build_roles():
    stack = new_stack()
    with pytest.raises(ValueError, match=r"build_role and build_handler_role apply to cloud "
                                         r"builds"):
        RuntimeImage(stack, "Bert", framework=Framework.pytorch("1.13.1"),
                     compiler=Compiler.training_compiler(), build_mode=BuildMode.LOCAL,
                     build_role=iam.Role.from_role_arn(stack, "Builds", BUILD_ARN))
