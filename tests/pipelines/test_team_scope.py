"""One role pair for a team: with a declared `TeamScope`, the roles take the team's statements
once, so one pair serves 256 pipelines in one stack, and a pipeline after the first costs a
few calls into the CDK; the roles' reach is evaluated as IAM evaluates it
(`compiled_training.local.policy`): the team's jobs, outputs and data allowed, another
team's refused. Without a scope, each pipeline's statements name it alone (the default, `test_given_roles.py`). No AWS account
here: the requests are built as SageMaker and S3 send them."""

from __future__ import annotations

import collections
import json

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_iam as iam

from compiled_training import Framework, InputChannel, TeamScope, TrainingPipeline
from compiled_training.local.policy import ALLOW, IMPLICIT_DENY, decide
from tests.helpers import ACCOUNT, REGION, new_stack, render_tree

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


def _third_pipeline(team: TeamScope | None) -> tuple[int, int]:
    """The calls into the CDK the third pipeline on a shared pair makes, and the statements it
    adds to the pair."""
    stack = new_stack()
    roles = _roles(stack)
    _pipeline(stack, 0, roles, team)
    _pipeline(stack, 1, roles, team)
    before = len(_statements(stack, "TeamPipelines") + _statements(stack, "TeamExecution"))
    stack = new_stack()
    roles = _roles(stack)
    _pipeline(stack, 0, roles, team)
    _pipeline(stack, 1, roles, team)
    with _Calls() as calls:
        _pipeline(stack, 2, roles, team)
    after = len(_statements(stack, "TeamPipelines") + _statements(stack, "TeamExecution"))
    return calls.count, after - before


def test_a_teammate_adds_no_statement_and_a_few_calls_into_the_cdk():
    (shared_calls, shared_added), (team_calls, team_added) = (_third_pipeline(None),
                                                              _third_pipeline(NLP))
    # Per pipeline, its statements go to the shared roles, one call each (the CDK merges the
    # ones identical to a teammate's: 7 new ones remain); in the team scope they are the
    # team's, given by the first pipeline: the README's 9 calls against 38.
    assert shared_added >= 5 and team_added == 0, (shared_added, team_added)
    assert team_calls <= 10 and shared_calls - team_calls >= 12, (shared_calls, team_calls)


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
    ({"pipeline_name": "cv-p0"}, r"pipeline_name 'cv-p0' must begin with team_scope's "
                                 r"name_prefix 'nlp-': the team's roles reach only pipelines "
                                 r"named so$"),
    ({"pipeline_name": None}, r"must begin with team_scope's name_prefix 'nlp-'.*; pass "
                              r"pipeline_name='nlp-...' \(the name was derived from the "
                              r"construct path\)"),
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


@pytest.mark.parametrize("other, message", [
    (TeamScope("nl", ("s3://team-data/nl/",)), r"team_scope name_prefix 'nl' overlaps another "
                                                r"team's 'nlp-' in this app"),
    (TeamScope("nlp-", ("s3://team-data/",)), r"two team scopes declare name_prefix 'nlp-' "
                                               r"with different data_uris: declare the team "
                                               r"once"),
    (TeamScope("cv-", ("s3://team-data/",)), r"team_scope 'cv-''s data_uris overlap team "
                                              r"'nlp-''s \(s3://team-data/ and "
                                              r"s3://team-data/nlp/\)"),
])
def test_teams_that_would_reach_each_other_in_one_app_are_refused(other, message):
    stack = new_stack()
    _pipeline(stack, 0, _roles(stack))
    with pytest.raises(ValueError, match=message):
        principal = iam.ServicePrincipal("sagemaker.amazonaws.com")
        others = {"role": iam.Role(stack, "OtherExecution", assumed_by=principal),
                  "pipeline_role": iam.Role(stack, "OtherPipelines", assumed_by=principal)}
        _pipeline(stack, 1, others, other, pipeline_name=f"{other.name_prefix}p1",
                  channels=[InputChannel("train", f"{other.data_uris[0]}p1/",
                                         content_type="text/csv")])


def test_a_pipeline_outside_the_team_named_under_its_prefix_is_refused_either_way():
    """The team's roles would reach its jobs and outputs (the output bucket is the stack's)."""
    outside = r"pipeline_name 'nlp-legacy' begins with team_scope 'nlp-''s prefix but the " \
              r"pipeline is not in that team"
    stack = new_stack()
    _pipeline(stack, 0, _roles(stack))
    with pytest.raises(ValueError, match=outside):
        _pipeline(stack, 1, {}, team=None, pipeline_name="nlp-legacy")
    stack = new_stack()
    _pipeline(stack, 1, {}, team=None, pipeline_name="nlp-legacy")
    with pytest.raises(ValueError, match=rf"^TrainingPipeline Team/P0: TrainingPipeline "
                                         rf"Team/P1: {outside}"):
        _pipeline(stack, 0, _roles(stack))


@pytest.mark.parametrize("props, message", [
    ({"name_prefix": "n"}, r"name_prefix must be 2 to 80 letters, digits and hyphens"),
    ({"name_prefix": "*"}, r"name_prefix must be 2 to 80 letters"),
    ({"name_prefix": "nlp-", "data_uris": ("s3://team-data/*",)},
     r"data_uris: 's3://team-data/\*' must not contain '\*' or '\?'"),
    ({"name_prefix": "nlp-", "data_uris": ("team-data/nlp/",)}, r"must begin with s3://"),
    ({"name_prefix": "nlp-", "data_uris": "s3://team-data/nlp/"},
     r"data_uris must be a sequence of S3 URIs"),
    ({"name_prefix": "nlp-", "data_uris": ("s3://team-data/nlp",)},
     r"data_uris: 's3://team-data/nlp' must end with '/' \(a folder: without it, the grant "
     r"reaches every key that begins alike, 's3://team-data/nlp-other/' too\)"),
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


def test_imported_immutable_roles_get_the_teams_statements_listed_for_every_pipeline():
    """Nothing can be attached to them, so nothing counts as given: each pipeline's warning
    lists what to grant (the team's statements, the same for each)."""
    from aws_cdk.assertions import Annotations, Match

    stack = new_stack()
    roles = {"role": iam.Role.from_role_arn(stack, "Execution",
                                            f"arn:aws:iam::{ACCOUNT}:role/nlp-exec",
                                            mutable=False),
             "pipeline_role": iam.Role.from_role_arn(stack, "Pipelines",
                                                     f"arn:aws:iam::{ACCOUNT}:role/nlp-run",
                                                     mutable=False)}
    for i in range(2):
        _pipeline(stack, i, roles)
    warnings = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("ImmutableRole"))
    assert sorted(w.id for w in warnings) == ["/Team/P0", "/Team/P0", "/Team/P1", "/Team/P1"]
    texts = sorted(str(w.entry.data) for w in warnings)
    assert all('"aws:RequestTag/compiled-training:pipeline": "nlp-*"' in t or "s3:" in t
               for t in texts)
