"""Tags reach the jobs: set with ``Tags.of(scope)`` at any level above a pipeline, or with its
``tags`` prop, they are in every job request of its definition (training, the benchmark's arms
and comparison), merged with the library's own, in one order, within SageMaker's rules; the
pipeline role may add exactly those keys, as the job is created."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from compiled_training.pipelines.base import PIPELINE_TAG
from tests.helpers import (
    SAMPLE_ENTRY_POINT,
    definitions,
    new_stack,
    validate_envelope,
    validate_job_arguments,
)
from tests.pipelines.test_compiler_benchmark import _benchmark


def _pipeline(stack: cdk.Stack, source_dir, construct_id: str = "Bert",
              **props) -> TrainingPipeline:
    props = {"channels": [InputChannel("train", "s3://team-data/bert/train/")], **props}
    return TrainingPipeline(stack, construct_id, framework=Framework.pytorch("2.9.0"),
                            compiler=Compiler.torch_compile(), instance_type="ml.g5.12xlarge",
                            source_dir=source_dir, entry_point="train.py", **props)


def _job_tags(template: dict) -> dict[str, list[dict[str, str]]]:
    (definition,) = definitions(template)
    validate_envelope(definition)
    validate_job_arguments(definition)
    return {step["Name"]: step["Arguments"]["Tags"] for step in definition["Steps"]
            if "Tags" in step.get("Arguments", {})}


def _add_tags_keys(template: dict) -> list[list[str]]:
    roles = [r for k, r in template["Resources"].items()
             if r["Type"] == "AWS::IAM::Role" and "PipelineRole" in k]
    return [statement["Condition"]["ForAllValues:StringLike"]["aws:TagKeys"]
            for role in roles
            for statement in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            if statement["Action"] == "sagemaker:AddTags"]


def test_tags_set_on_the_stack_reach_the_training_job(source_dir):
    app = cdk.App()
    stack = new_stack(app=app)
    scope = cdk.Stage(app, "Unused")  # a tag elsewhere reaches nothing here
    cdk.Tags.of(scope).add("elsewhere", "no")
    pipeline = _pipeline(stack, source_dir)
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    cdk.Tags.of(pipeline).add("owner", "nlp-team")
    template = Template.from_stack(stack).to_json()
    assert _job_tags(template) == {"Train": [
        {"Key": PIPELINE_TAG, "Value": pipeline.pipeline_name},
        {"Key": "cost-center", "Value": "ml-42"},
        {"Key": "owner", "Value": "nlp-team"}]}
    # The pipeline role adds those keys, and SageMaker's own, as it creates the job.
    assert _add_tags_keys(template) == [[PIPELINE_TAG, "cost-center", "owner", "sagemaker:*"]]


def test_without_tags_a_job_carries_the_librarys_own_only(source_dir):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    template = Template.from_stack(stack).to_json()
    assert _job_tags(template) == {"Train": [{"Key": PIPELINE_TAG,
                                              "Value": pipeline.pipeline_name}]}
    assert _add_tags_keys(template) == [[PIPELINE_TAG, "sagemaker:*"]]


def test_the_benchmarks_arms_and_comparison_carry_the_tags_prop_and_the_stacks(source_dir):
    stack = new_stack()
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "train.py").write_text(SAMPLE_ENTRY_POINT)
    benchmark = _benchmark(stack, source_dir, tags={"trial": "compiler"})
    template = Template.from_stack(stack).to_json()
    expected = [{"Key": PIPELINE_TAG, "Value": benchmark.pipeline_name},
                {"Key": "cost-center", "Value": "ml-42"}, {"Key": "trial", "Value": "compiler"}]
    assert _job_tags(template) == {"TrainBaseline": expected, "TrainCompiler": expected,
                                   "Compare": expected}
    # The prop tags the construct's own resources too (the pipeline, its roles).
    pipelines = Template.from_stack(stack).find_resources("AWS::SageMaker::Pipeline")
    (resource,) = pipelines.values()
    assert {"Key": "trial", "Value": "compiler"} in resource["Properties"]["Tags"]
    assert _add_tags_keys(template) == [[PIPELINE_TAG, "cost-center", "trial", "sagemaker:*"]] * 2


def test_the_same_tags_give_the_same_template(source_dir):
    bodies = []
    for order in (("a", "b"), ("b", "a")):
        stack = new_stack()
        for key in order:
            cdk.Tags.of(stack).add(key, key.upper())
        _pipeline(stack, source_dir)
        bodies.append(Template.from_stack(stack).to_json())
    assert bodies[0] == bodies[1]


@pytest.mark.parametrize(("tags", "message"), [
    ({"aws:cost": "x"}, "tag key 'aws:cost' starts with the reserved 'aws:' prefix"),
    ({PIPELINE_TAG: "other"}, f"tag key '{PIPELINE_TAG}' is the library's own"),
    ({"team": "x" * 257}, "tag 'team''s value must be at most 256 characters"),
    ({"k" * 129: "x"}, "tag key must be at most 128 characters"),
    ({f"key{i}": "x" for i in range(50)},
     "its jobs would carry 51 tags (with the library's own 'compiled-training:pipeline'), "
     "over SageMaker's 50"),
])
def test_tags_sagemaker_would_refuse_fail_the_synth_naming_them(source_dir, tags, message):
    stack = new_stack()
    _pipeline(stack, source_dir, tags=tags)
    with pytest.raises(Exception, match=re.escape(message)):
        cdk.App.of(stack).synth()


def test_registered_versions_take_their_groups_tags_which_carry_the_tags(source_dir):
    # CreateModelPackage refuses Tags for a version in a group ("uses the tags associated
    # with the model group": botocore's documentation of the shape, read here), so the
    # RegisterModel step carries none and the group the stack creates carries them.
    from compiled_training import ModelRegistration
    from tests.helpers import botocore_sagemaker_model

    documented = botocore_sagemaker_model().operation_model(
        "CreateModelPackage").input_shape.members["Tags"].documentation
    assert "uses the tags associated with the model group" in documented
    assert "you cannot supply a <code>tag</code> argument" in documented
    stack = new_stack()
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    _pipeline(stack, source_dir, tags={"owner": "nlp-team"}, pipeline_name="bert-registered",
              channels=[InputChannel("train", "s3://team-data/bert/train/"),
                        InputChannel("validation", "s3://team-data/bert/validation/")],
              registration=ModelRegistration(
                  model_package_group_name="bert-classifier",
                  inference_image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/serve:1"))
    template = Template.from_stack(stack).to_json()
    (definition,) = definitions(template)
    steps = [*definition["Steps"], *(s for step in definition["Steps"]
                                     for s in step["Arguments"].get("IfSteps", []))]
    (register,) = [s for s in steps if s["Type"] == "RegisterModel"]
    assert "Tags" not in register["Arguments"]
    (group,) = [r for r in template["Resources"].values()
                if r["Type"] == "AWS::SageMaker::ModelPackageGroup"]
    assert group["Properties"]["Tags"] == [{"Key": "cost-center", "Value": "ml-42"},
                                           {"Key": "owner", "Value": "nlp-team"}]


def test_an_aspect_that_resolves_early_does_not_fix_the_tags_before_the_tag_aspects(source_dir):
    # A policy checker written as an aspect may resolve the roles' policies (and so the
    # tag keys) while the aspects run, before Tags reaches the pipeline: what it reads is the
    # first writing, and the stack's validation, after every aspect, writes the final tags.
    import jsii
    from aws_cdk import aws_iam as iam

    @jsii.implements(cdk.IAspect)
    class ResolvesPolicies:
        def visit(self, node):
            if isinstance(node, iam.CfnRole):
                cdk.Stack.of(node).resolve(node.policies)

    stack = new_stack()
    cdk.Aspects.of(stack).add(ResolvesPolicies())
    _pipeline(stack, source_dir, tags={"owner": "nlp-team"})
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    template = Template.from_stack(stack).to_json()
    keys = ["compiled-training:pipeline", "cost-center", "owner"]
    assert [t["Key"] for t in _job_tags(template)["Train"]] == keys
    assert _add_tags_keys(template) == [[*keys, "sagemaker:*"]]


def test_a_tag_an_aspect_removes_leaves_the_definition_and_the_policy(source_dir):
    # Written with the tags prop when the pipeline is made, written again once the aspects
    # have run: a RemoveTag aspect takes the key out of both.
    stack = new_stack()
    _pipeline(stack, source_dir, tags={"owner": "nlp-team", "draft": "yes"})
    cdk.Tags.of(stack).remove("draft")
    template = Template.from_stack(stack).to_json()
    keys = ["compiled-training:pipeline", "owner"]
    assert [t["Key"] for t in _job_tags(template)["Train"]] == keys
    assert _add_tags_keys(template) == [[*keys, "sagemaker:*"]]


def test_the_tags_call_back_into_python_once_a_stack_not_at_each_resolution(source_dir,
                                                                              monkeypatch):
    # Every value Python produces at synthesis is a round trip from CDK's Node process, each
    # time CDK resolves it: a template is resolved three times (preparing, writing it, the
    # tree). The tags are values in the template; the stack's validation reads them once
    # the aspects have run, and writes them again where they changed, in one call back for
    # the stack whatever the number of pipelines.
    import jsii._kernel as kernel

    callbacks = []
    handle = kernel._handle_callback
    monkeypatch.setattr(kernel, "_handle_callback",
                        lambda *args: (callbacks.append(args), handle(*args))[1])
    counts = []
    for pipelines in (1, 3):
        stack = new_stack()
        cdk.Tags.of(stack).add("cost-center", "ml-42")
        for index in range(pipelines):
            _pipeline(stack, source_dir, f"Bert{index}", tags={"owner": f"team-{index}"})
        callbacks.clear()
        template = Template.from_stack(stack).to_json()
        counts.append(len(callbacks))
        assert [_add_tags_keys(template)] == [
            [[PIPELINE_TAG, "cost-center", "owner", "sagemaker:*"]] * pipelines]
    assert counts[0] == counts[1] > 0  # > 0: the callbacks are counted where they happen


def test_roles_customize_roles_keeps_out_of_the_template_list_the_tags_prop_keys(source_dir,
                                                                                  tmp_path):
    # iam.Role.customize_roles: no role in the template, aws-cdk-lib's report lists each
    # role's policy for the account's administrators to create it (with the pipeline role's
    # tag keys, from the tags prop).
    from aws_cdk import aws_iam as iam

    app = cdk.App(outdir=str(tmp_path))
    iam.Role.customize_roles(app)
    stack = cdk.Stack(app, "Governed", env=cdk.Environment(account="123456789012",
                                                           region="us-east-1"))
    _pipeline(stack, source_dir, tags={"cost-center": "ml-42"})
    template = Template.from_stack(stack).to_json()
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    report = json.loads((tmp_path / "iam-policy-report.json").read_text())
    (runner,) = [r for r in report["roles"] if r["roleConstructPath"] == "Governed/Bert/PipelineRole"]
    assert [s["Condition"]["ForAllValues:StringLike"]["aws:TagKeys"]
            for s in runner["identityPolicyStatements"] if s["Action"] == "sagemaker:AddTags"] \
        == [[PIPELINE_TAG, "cost-center", "sagemaker:*"]]


def test_tags_set_above_a_role_customize_roles_keeps_out_fail_the_synth_saying_why(source_dir):
    # Its report is written from the policy as the pipeline was made: keys Tags.of adds at
    # synthesis cannot reach it, and a role created from it would refuse them at run time.
    from aws_cdk import aws_iam as iam

    app = cdk.App()
    iam.Role.customize_roles(app)
    stack = cdk.Stack(app, "Governed", env=cdk.Environment(account="123456789012",
                                                           region="us-east-1"))
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    _pipeline(stack, source_dir)
    with pytest.raises(Exception, match=re.escape(
            "iam.Role.customize_roles keeps role Governed/Bert/PipelineRole out of the "
            "template") + ".*give the tags with the pipeline's tags prop"):
        app.synth()


def test_a_tag_value_an_aspect_changes_keeps_a_customize_roles_report_valid(source_dir):
    # The same keys, another value: the definition is written again, the policy (and the
    # report of a role customize_roles keeps out of the template) need not be.
    from aws_cdk import aws_iam as iam

    app = cdk.App()
    iam.Role.customize_roles(app)
    stack = cdk.Stack(app, "Governed", env=cdk.Environment(account="123456789012",
                                                           region="us-east-1"))
    _pipeline(stack, source_dir, tags={"cost-center": "ml-1"})
    cdk.Tags.of(stack).add("cost-center", "ml-42", priority=200)
    # The role names are the administrators' to give (usePrecreatedRoles), so the jobs'
    # RoleArn is incomplete here: the tags are read from the definition as it is.
    (definition,) = definitions(Template.from_stack(stack).to_json())
    (train,) = [step for step in definition["Steps"] if step["Name"] == "Train"]
    assert {"Key": "cost-center", "Value": "ml-42"} in train["Arguments"]["Tags"]

