"""The pipeline role's tag permissions, evaluated as IAM evaluates them (`compiled_training.local.policy`):
SageMaker Pipelines creates each job with the definition's tags, which IAM authorizes as
``sagemaker:CreateTrainingJob`` and, for the tags, ``sagemaker:AddTags`` with
``sagemaker:TaggingAction`` (tagging on creation). The role may tag its own jobs as they are
created, with exactly the keys the pipeline's jobs carry (and SageMaker's own), and nothing
else. No AWS account here: the requests are built as SageMaker sends them."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from compiled_training.local.policy import ALLOW, IMPLICIT_DENY, UnreadPolicy, decide
from tests.helpers import ACCOUNT, REGION, definitions, new_stack, render_tree

JOB = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/pipelines-abc123-train-x1y2z3"
SAGEMAKERS_OWN = "sagemaker:pipeline-execution-arn"


def _synth(source_dir) -> tuple[list[dict], list[dict[str, str]]]:
    """The pipeline role's statements and the training step's tags, rendered."""
    stack = new_stack()
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    TrainingPipeline(stack, "Bert", framework=Framework.pytorch("2.9.0"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.12xlarge",
                     source_dir=source_dir, entry_point="train.py", pipeline_name="nlp-bert",
                     tags={"owner": "nlp-team"},
                     channels=[InputChannel("train", "s3://team-data/bert/train/")])
    template = Template.from_stack(stack).to_json()
    (role,) = [r for k, r in template["Resources"].items() if k.startswith("BertPipelineRole")]
    statements = render_tree(role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"],
                             template)
    (definition,) = definitions(template)
    return statements, definition["Steps"][0]["Arguments"]["Tags"]


def _request(tags: list[dict[str, str]], *, tagging_action: str | None = "CreateTrainingJob"
             ) -> dict:
    context = {f"aws:RequestTag/{t['Key']}": t["Value"] for t in tags}
    context["aws:TagKeys"] = [t["Key"] for t in tags]
    if tagging_action:
        context["sagemaker:TaggingAction"] = tagging_action
    return context


@pytest.fixture(scope="module")
def synthesized(source_dir):
    return _synth(source_dir)


def test_the_job_is_created_with_every_tag_of_its_definition(synthesized):
    statements, tags = synthesized
    assert [t["Key"] for t in tags] == ["compiled-training:pipeline", "cost-center", "owner"]
    with_sagemakers = [*tags, {"Key": SAGEMAKERS_OWN, "Value": "arn:..."}]
    request = _request(with_sagemakers)
    assert decide(statements, "sagemaker:CreateTrainingJob", JOB, request) == ALLOW
    assert decide(statements, "sagemaker:AddTags", JOB, request) == ALLOW


@pytest.mark.parametrize("change, why", [
    (lambda tags: [*tags, {"Key": "team", "Value": "x"}], "a key the pipeline's jobs lack"),
    (lambda tags: [t if t["Key"] != "compiled-training:pipeline" else
                   {**t, "Value": "other-pipeline"} for t in tags], "another pipeline's job"),
])
def test_tags_the_definition_does_not_carry_are_refused(synthesized, change, why):
    statements, tags = synthesized
    assert decide(statements, "sagemaker:AddTags", JOB, _request(change(tags))) == \
        IMPLICIT_DENY, why


def test_a_job_that_exists_cannot_be_retagged(synthesized):
    # Retagging another pipeline's job would hand its describe and stop to this role.
    statements, tags = synthesized
    assert decide(statements, "sagemaker:AddTags", JOB,
                  _request(tags, tagging_action=None)) == IMPLICIT_DENY


def test_the_evaluator_reads_sets_as_iam_does():
    allow_keys = [{"Effect": "Allow", "Action": "sagemaker:AddTags", "Resource": "*",
                   "Condition": {"ForAllValues:StringLike": {"aws:TagKeys": ["a", "s:*"]}}}]
    assert decide(allow_keys, "sagemaker:AddTags", JOB, {"aws:TagKeys": ["a", "s:x"]}) == ALLOW
    assert decide(allow_keys, "sagemaker:AddTags", JOB, {"aws:TagKeys": ["a", "b"]}) == \
        IMPLICIT_DENY
    assert decide(allow_keys, "sagemaker:AddTags", JOB, {}) == ALLOW  # no keys: all of none
    with pytest.raises(UnreadPolicy, match="NumericLessThan is not read"):
        decide([{**allow_keys[0], "Condition": {"NumericLessThan": {"k": "1"}}}],
               "sagemaker:AddTags", JOB, {})
