"""One role pair for a team: with a declared `TeamScope`, the roles take the team's statements
once, so one pair serves 256 pipelines in one stack, and a pipeline after the first costs a
few calls into the CDK; the roles' reach is evaluated as IAM evaluates it (`tests/iam_policy`):
the team's jobs, outputs and data allowed, another team's refused. Without a scope, each
pipeline's statements name it alone (the default, `test_given_roles.py`). No AWS account
here: the requests are built as SageMaker and S3 send them."""

from __future__ import annotations

import collections
import json

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_iam as iam

from compiled_training import Framework, InputChannel, TeamScope, TrainingPipeline
from tests.helpers import ACCOUNT, REGION, new_stack, render_tree
from tests.iam_policy import ALLOW, IMPLICIT_DENY, decide

NLP = TeamScope(name_prefix="nlp-", data_uris=("s3://team-data/nlp/",))
PIPELINE_TAG = "compiled-training:pipeline"
JOB = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/pipelines-abc123-train-x1y2z3"


def _roles(stack: cdk.Stack) -> dict[str, iam.IRole]:
    principal = iam.ServicePrincipal("sagemaker.amazonaws.com")
    return {"role": iam.Role(stack, "TeamExecution", assumed_by=principal),
            "pipeline_role": iam.Role(stack, "TeamPipelines", assumed_by=principal)}


def _pipeline(stack: cdk.Stack, i: int, roles: dict, team: TeamScope | None = NLP,
              **overrides) -> TrainingPipeline:
    props = {"framework": Framework.xgboost("1.7-1"), "instance_type": "ml.m5.xlarge",
             "pipeline_name": f"nlp-p{i}", "team_scope": team,
             "channels": [InputChannel("train", f"s3://team-data/nlp/p{i}/train/",
                                       content_type="text/csv")], **roles, **overrides}
    return TrainingPipeline(stack, f"P{i}", **props)


class _Calls:
    """Counts the calls into the jsii kernel (the CDK's Node process) while it is open."""

    KINDS = ("create", "get", "set", "sget", "sset", "invoke", "sinvoke")

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> _Calls:
        provider = jsii.kernel.provider
        self._saved = {kind: getattr(provider, kind) for kind in self.KINDS}
        for kind, call in self._saved.items():
            def counted(*args, _call=call, **kwargs):
                self.count += 1
                return _call(*args, **kwargs)
            setattr(provider, kind, counted)
        return self

    def __exit__(self, *exc) -> None:
        for kind, call in self._saved.items():
            setattr(jsii.kernel.provider, kind, call)


def _calls_for_third_pipeline(team: TeamScope | None) -> int:
    stack = new_stack()
    roles = _roles(stack)
    _pipeline(stack, 0, roles, team)
    _pipeline(stack, 1, roles, team)
    with _Calls() as calls:
        _pipeline(stack, 2, roles, team)
    return calls.count


def test_a_teammate_adds_no_statement_and_a_few_calls_into_the_cdk():
    shared, team = _calls_for_third_pipeline(None), _calls_for_third_pipeline(NLP)
    # Per pipeline, its statements go to the shared roles, one call each (14 statements);
    # in the team scope they are the team's, given by the first pipeline.
    assert shared - team >= 12, (shared, team)


def test_256_pipelines_share_one_role_pair_in_one_stack():
    stack = new_stack()
    roles = _roles(stack)
    for i in range(256):
        _pipeline(stack, i, roles)
    template = cdk.App.of(stack).synth().get_stack_by_name(stack.stack_name).template
    kinds = collections.Counter(r["Type"] for r in template["Resources"].values())
    assert kinds["AWS::SageMaker::Pipeline"] == 256
    assert kinds["AWS::IAM::Role"] == 2
    assert kinds["AWS::IAM::ManagedPolicy"] == 0  # the team's statements fit the default policy
    assert sum(kinds.values()) <= 500


def _statements(stack: cdk.Stack, role_id: str) -> list[dict]:
    template = cdk.App.of(stack).synth().get_stack_by_name(stack.stack_name).template
    policies = [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                and {"Ref": next(k for k in template["Resources"] if k.startswith(role_id))}
                in r["Properties"]["Roles"]]
    return render_tree([s for p in policies for s in p["Properties"]["PolicyDocument"][
        "Statement"]], template)


@pytest.fixture(scope="module")
def team_statements():
    stack = new_stack()
    roles = _roles(stack)
    for i in range(3):
        _pipeline(stack, i, roles)
    return _statements(stack, "TeamPipelines"), _statements(stack, "TeamExecution")


def _creating(pipeline_name: str) -> dict:
    return {f"aws:RequestTag/{PIPELINE_TAG}": pipeline_name,
            "aws:TagKeys": [PIPELINE_TAG, "sagemaker:pipeline-execution-arn"],
            "sagemaker:TaggingAction": "CreateTrainingJob"}


@pytest.mark.parametrize("pipeline_name, decision", [
    ("nlp-p1", ALLOW), ("nlp-a-new-teammate", ALLOW), ("cv-p1", IMPLICIT_DENY),
    ("p1", IMPLICIT_DENY)])
def test_the_pipeline_role_creates_tags_describes_and_stops_the_teams_jobs_only(
        team_statements, pipeline_name, decision):
    pipelines, _ = team_statements
    for action in ("sagemaker:CreateTrainingJob", "sagemaker:AddTags"):
        assert decide(pipelines, action, JOB, _creating(pipeline_name)) == decision
    existing = {f"aws:ResourceTag/{PIPELINE_TAG}": pipeline_name}
    for action in ("sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"):
        assert decide(pipelines, action, JOB, existing) == decision


def test_a_teammates_job_is_tagged_only_as_it_is_created(team_statements):
    pipelines, _ = team_statements
    retag = {**_creating("nlp-p1")}
    del retag["sagemaker:TaggingAction"]
    assert decide(pipelines, "sagemaker:AddTags", JOB, retag) == IMPLICIT_DENY


@pytest.mark.parametrize("action, resource, context, decision", [
    ("s3:GetObject", "arn:aws:s3:::team-data/nlp/p7/train/part-0.csv", {}, ALLOW),
    ("s3:GetObject", "arn:aws:s3:::team-data/cv/p1/train/part-0.csv", {}, IMPLICIT_DENY),
    ("s3:ListBucket", "arn:aws:s3:::team-data", {"s3:prefix": "nlp/p7/train/"}, ALLOW),
    ("s3:ListBucket", "arn:aws:s3:::team-data", {"s3:prefix": "cv/"}, IMPLICIT_DENY),
])
def test_the_execution_role_reads_the_teams_declared_data_only(
        team_statements, action, resource, context, decision):
    _, execution = team_statements
    assert decide(execution, action, resource, context) == decision


def test_the_execution_role_writes_under_the_teams_prefix_only(team_statements):
    _, execution = team_statements
    (bucket,) = {r.split(":::")[1].split("/")[0] for s in execution
                 for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
                 if r.startswith("arn:aws:s3:::") and r.endswith("nlp-*")}
    for key, decision in (("nlp-p9/output/model.tar.gz", ALLOW),
                          ("cv-p1/output/model.tar.gz", IMPLICIT_DENY)):
        assert decide(execution, "s3:PutObject", f"arn:aws:s3:::{bucket}/{key}", {}) == decision


def test_without_a_scope_each_pipeline_still_reaches_its_own_jobs_alone():
    stack = new_stack()
    roles = _roles(stack)
    for i in range(2):
        _pipeline(stack, i, roles, team=None)
    pipelines = _statements(stack, "TeamPipelines")
    assert decide(pipelines, "sagemaker:CreateTrainingJob", JOB, _creating("nlp-p1")) == ALLOW
    assert decide(pipelines, "sagemaker:CreateTrainingJob", JOB,
                  _creating("nlp-a-new-teammate")) == IMPLICIT_DENY


@pytest.mark.parametrize("overrides, message", [
    ({"pipeline_name": "cv-p0"}, r"P0 \(pipeline cv-p0\)|pipeline_name 'cv-p0' must begin "
                                 r"with team_scope's name_prefix 'nlp-'"),
    ({"channels": [InputChannel("train", "s3://team-data/cv/train/", content_type="text/csv")]},
     r"channel 'train' URI 's3://team-data/cv/train/' is outside team_scope 'nlp-''s "
     r"data_uris \(s3://team-data/nlp/\)"),
    ({"pipeline_role": None}, r"team_scope is for a role pair given to the team's pipelines; "
                              r"give pipeline_role= too"),
])
def test_a_pipeline_outside_its_team_scope_is_refused(overrides, message):
    stack = new_stack()
    roles = _roles(stack)
    with pytest.raises(ValueError, match=message):
        _pipeline(stack, 0, {**roles, **{k: v for k, v in overrides.items() if k in roles}},
                  **{k: v for k, v in overrides.items() if k not in roles})


def test_overlapping_team_prefixes_in_one_app_are_refused():
    stack = new_stack()
    roles = _roles(stack)
    _pipeline(stack, 0, roles)
    wider = TeamScope(name_prefix="nl", data_uris=("s3://team-data/nlp/",))
    with pytest.raises(ValueError, match=r"team_scope name_prefix 'nl' overlaps another "
                                         r"team's 'nlp-' in this app"):
        _pipeline(stack, 1, roles, wider)


@pytest.mark.parametrize("props, message", [
    ({"name_prefix": "n"}, r"name_prefix must be 2 to 80 letters, digits and hyphens"),
    ({"name_prefix": "*"}, r"name_prefix must be 2 to 80 letters"),
    ({"name_prefix": "nlp-", "data_uris": ("s3://team-data/*",)},
     r"data_uris: 's3://team-data/\*' must not contain '\*' or '\?'"),
    ({"name_prefix": "nlp-", "data_uris": ("team-data/nlp/",)}, r"must begin with s3://"),
    ({"name_prefix": "nlp-", "data_uris": "s3://team-data/nlp/"},
     r"data_uris must be a sequence of S3 URIs"),
])
def test_a_team_scope_names_what_is_wrong(props, message):
    with pytest.raises(ValueError, match=rf"^TeamScope: .*{message}"):
        TeamScope(**props)


def test_a_team_of_script_pipelines_passes_cdk_nag_with_its_wildcards_explained(source_dir):
    """Every wildcard a team statement grants (the team's prefixes) carries its reason."""
    from aws_cdk.assertions import Template
    from cdk_nag import AwsSolutionsChecks

    from compiled_training import Compiler

    app = cdk.App()
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack = new_stack(app=app)
    roles = _roles(stack)
    for i in range(2):
        _pipeline(stack, i, roles, framework=Framework.pytorch("2.9.0"),
                  compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
                  source_dir=source_dir, entry_point="train.py",
                  channels=[InputChannel("train", f"s3://team-data/nlp/p{i}/train/")])
    template = Template.from_stack(stack)  # synthesizes: cdk-nag finds nothing unexplained
    (policy,) = [p for k, p in template.find_resources("AWS::IAM::Policy").items()
                 if k.startswith("TeamExecution")]
    code_reads = [s for s in policy["Properties"]["PolicyDocument"]["Statement"]
                  if s["Action"] == "s3:GetObject" and "cdk-" in json.dumps(s["Resource"])]
    assert len(code_reads) == 1  # one code folder: one archive, granted once
