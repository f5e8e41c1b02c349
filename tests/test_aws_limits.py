"""Families of input that once ended in a jsii error, a KeyError or a template AWS would reject:
each now ends in our clear error (field, value, what is allowed) or a valid template.

Generated with hypothesis (derandomized): SSM parameter names, S3 URIs part by part, the
scheduler's event age, pipeline names long enough to overflow what they are written into,
framework names, and VPCs without a route out. The rules are restated here from AWS's documents
(SSM's PutParameter naming constraints, S3's bucket naming rules, EventBridge Scheduler's
RetryPolicy, Lambda's and EC2's description limits) in a different form from the library's.
"""

from __future__ import annotations

import ipaddress
import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiled_training import (
    Compiler,
    CompilerBenchmark,
    Framework,
    InputChannel,
    ModelRegistration,
    RetrainingSchedule,
    TrainingPipeline,
)
from compiled_training.catalog.api_shapes import shown
from compiled_training.catalog.aws_names import (
    SSM_MAX_NAME,
    bucket_name_problem,
    s3_uri_problem,
    ssm_parameter_name_problem,
)
from tests.helpers import cfn_lint, new_stack

PURE = settings(max_examples=400, derandomize=True, database=None, deadline=None)
# Each example synthesizes a construct: fewer.
SYNTH = settings(max_examples=12, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))
CHANNELS = [InputChannel("train", "s3://team-data/train/"),
            InputChannel("validation", "s3://team-data/validation/")]


def _job(**overrides):
    return {"framework": Framework.pytorch("1.13.1"), "compiler": Compiler.training_compiler(),
            "instance_type": "ml.g5.48xlarge", "entry_point": "train.py",
            "channels": CHANNELS, **overrides}


# --- SSM parameter names ---------------------------------------------------------------------

def _ssm_accepts(name: str) -> bool:
    """SSM's documented constraints, restated."""
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/")
    levels = name.split("/")[1:] if name.startswith("/") else [name]
    return (0 < len(name) <= SSM_MAX_NAME and set(name) <= allowed
            and name.lstrip("/")[:3].lower() not in ("aws", "ssm")
            and ("/" not in name or name.startswith("/"))
            and all(levels) and len(levels) <= 15)


ssm_names = st.one_of(
    st.text(alphabet="ab/_.-AWSsm", max_size=40),
    st.builds(lambda parts, lead: ("/" if lead else "") + "/".join(parts),
              st.lists(st.sampled_from(["team", "aws", "SSM", "x.y", "a-b", "", "é", "c d"]),
                       min_size=1, max_size=18), st.booleans()),
    st.integers(900, 1100).map(lambda n: "/" + "a" * (n - 1)))


@PURE
@given(name=ssm_names)
def test_ssm_names_are_checked_as_ssm_checks_them(name):
    assert (ssm_parameter_name_problem(name) is None) == _ssm_accepts(name)


@SYNTH
@given(name=ssm_names)
def test_a_decision_parameter_name_gives_that_parameter_or_a_clear_error(source_dir, name):
    stack = new_stack()
    try:
        CompilerBenchmark(stack, "Bench", source_dir=source_dir, **_job(),
                          decision_parameter_name=name)
    except ValueError as error:
        assert not _ssm_accepts(name)
        assert str(error).startswith("CompilerBenchmark Team/Bench: decision_parameter_name ")
        assert str(error).endswith(f"got {shown(name)}")
        return
    assert _ssm_accepts(name)
    Template.from_stack(stack).has_resource_properties("AWS::SSM::Parameter", {"Name": name})


# --- S3 URIs ---------------------------------------------------------------------------------

def _bucket_ok(bucket: str) -> bool:
    """S3's naming rules for general purpose buckets, restated."""
    try:
        ipaddress.ip_address(bucket)
        return False
    except ValueError:
        pass
    return (3 <= len(bucket) <= 63 and re.fullmatch(r"[a-z0-9.-]+", bucket) is not None
            and bucket[0].isalnum() and bucket[-1].isalnum()
            and not any(pair in bucket for pair in ("..", ".-", "-."))
            and not bucket.startswith(("xn--", "sthree-", "amzn-s3-demo-"))
            and not bucket.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")))


buckets = st.one_of(st.text(alphabet="ab9.-X_", min_size=0, max_size=66),
                    st.sampled_from(["b", "10.0.0.1", "xn--abc", "data-s3alias", "team-data",
                                     "a" * 63, "a" * 64, "my.bucket"]))
keys = st.one_of(st.sampled_from(["", "train/", "a/b/c.csv"]),
                 st.integers(1020, 1030).map(lambda n: "k" * n))


@PURE
@given(bucket=buckets, key=keys)
def test_s3_uris_are_checked_part_by_part(bucket, key):
    problem = s3_uri_problem(f"s3://{bucket}/{key}")
    if not _bucket_ok(bucket):
        assert problem is not None and problem.startswith(f"its bucket name {bucket!r} ")
        assert bucket_name_problem(bucket) in problem
    elif len(key.encode()) > 1024:
        assert problem == f"its key must be at most 1024 bytes, got {len(key.encode())}"
    else:
        assert problem is None


@SYNTH
@given(bucket=buckets)
def test_a_channel_uri_gives_a_template_or_an_error_naming_the_part(source_dir, bucket):
    stack = new_stack()
    uri = f"s3://{bucket}/train/"
    try:
        TrainingPipeline(stack, "Bert", source_dir=source_dir,
                         **_job(channels=[InputChannel("train", uri)]))
    except ValueError as error:
        assert not _bucket_ok(bucket)
        assert f"channel 'train' URI {shown(uri)} is not an S3 URI" in str(error)
        assert f"its bucket name {bucket!r}" in str(error)
        return
    assert _bucket_ok(bucket)
    assert uri in json.dumps(Template.from_stack(stack).to_json())


# --- durations -------------------------------------------------------------------------------

@SYNTH
@given(seconds=st.one_of(st.integers(0, 100), st.integers(86_300, 90_000),
                         st.integers(60, 86_400)))
def test_max_event_age_gives_the_retry_policy_or_a_clear_error(source_dir, seconds):
    stack = new_stack()
    pipeline = TrainingPipeline(stack, "Bert", source_dir=source_dir, **_job())
    try:
        RetrainingSchedule(stack, "Nightly", pipeline=pipeline, team="nlp",
                           expression="rate(1 day)", max_event_age=cdk.Duration.seconds(seconds))
    except ValueError as error:
        assert not 60 <= seconds <= 86_400
        assert str(error) == (f"RetrainingSchedule Team/Nightly: max_event_age must be 60 "
                              f"seconds to 24 hours, got {seconds} seconds")
        return
    Template.from_stack(stack).has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"RetryPolicy": Match.object_like(
            {"MaximumEventAgeInSeconds": seconds})})})


# --- names and descriptions derived from a pipeline name -------------------------------------

@SYNTH
@given(name=st.integers(1, 256).flatmap(
    lambda n: st.text(alphabet="abcdefghij0123456789-", min_size=n, max_size=n).filter(
        lambda s: s[0] != "-" and s[-1] != "-" and "--" not in s)))
def test_a_pipeline_name_of_any_allowed_length_fits_every_description_it_lands_in(source_dir,
                                                                                  name):
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=1)
    CompilerBenchmark(stack, "Bench", source_dir=source_dir, **_job(), pipeline_name=name,
                      vpc=vpc)
    template = Template.from_stack(stack)
    functions = template.find_resources("AWS::Lambda::Function")
    assert functions and all(len(f["Properties"]["Description"]) <= 256
                             for f in functions.values())
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    assert groups and all(len(g["Properties"]["GroupDescription"]) <= 255
                          for g in groups.values())


def test_the_longest_pipeline_name_passes_cloudformations_own_schemas(source_dir, tmp_path):
    """Not our restated limits: cfn-lint reads the resource types' published schemas (E3033
    "longer than 256" on a Lambda description, 255 on a security group's)."""
    stack = new_stack(outdir=tmp_path)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=1)
    name = "a" * 256
    CompilerBenchmark(stack, "Bench", source_dir=source_dir, **_job(), pipeline_name=name, vpc=vpc)
    TrainingPipeline(stack, "Bert", source_dir=source_dir, **_job(), pipeline_name="b" * 256,
                     vpc=vpc, registration=ModelRegistration(model_package_group_name="bert",
                                                             gate_metric="validation_accuracy",
                                                             gate_threshold=0.9))
    template = stack.node.root.synth().get_stack_by_name(stack.stack_name).template_full_path
    assert len(Template.from_stack(stack).find_resources("AWS::Lambda::Function")) == 2
    assert [f for f in cfn_lint(template) if "E3033" in f] == []


# --- frameworks ------------------------------------------------------------------------------

@PURE
@given(name=st.one_of(st.text(max_size=12), st.sampled_from(["tensorflow", "mxnet", "pytorch"])))
def test_a_framework_name_is_one_the_library_knows_or_a_clear_error(name):
    try:
        framework = Framework(name, "2.0")
    except ValueError as error:
        assert name not in ("huggingface", "pytorch", "xgboost")
        assert str(error) == (
            "Framework.name: must be one of huggingface, pytorch, xgboost (build one with "
            "Framework.huggingface(), Framework.pytorch(), Framework.xgboost()), "
            f"got {name!r}")
        return
    assert name in ("huggingface", "pytorch", "xgboost") and framework.name == name


# --- network settings ------------------------------------------------------------------------

SUBNET_TYPES = [ec2.SubnetType.PUBLIC, ec2.SubnetType.PRIVATE_WITH_EGRESS,
                ec2.SubnetType.PRIVATE_ISOLATED]


@SYNTH
@given(types=st.lists(st.sampled_from(SUBNET_TYPES), min_size=1, max_size=3, unique=True),
       selected=st.one_of(st.none(), st.sampled_from(SUBNET_TYPES)))
def test_a_vpc_gives_jobs_with_a_route_out_a_warning_or_a_clear_error(source_dir, types,
                                                                      selected):
    if ec2.SubnetType.PRIVATE_WITH_EGRESS in types and ec2.SubnetType.PUBLIC not in types:
        types = [ec2.SubnetType.PUBLIC, *types]  # its NAT gateway's
    if ec2.SubnetType.PRIVATE_WITH_EGRESS in types and ec2.SubnetType.PUBLIC not in types:
        types = [ec2.SubnetType.PUBLIC, *types]  # its NAT gateway's
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1,
                  nat_gateways=1 if ec2.SubnetType.PRIVATE_WITH_EGRESS in types else 0,
                  subnet_configuration=[ec2.SubnetConfiguration(name=t.value, subnet_type=t)
                                        for t in types])
    wanted = selected or ec2.SubnetType.PRIVATE_WITH_EGRESS
    try:
        TrainingPipeline(stack, "Bert", source_dir=source_dir, **_job(), vpc=vpc,
                         vpc_subnets=ec2.SubnetSelection(subnet_type=selected)
                         if selected else None)
    except ValueError as error:
        assert wanted not in types
        assert str(error).startswith("TrainingPipeline Team/Bert: vpc_subnets selects no "
                                     "subnets in the vpc (")
        return
    assert wanted in types
    warnings = Annotations.from_stack(stack).find_warning(
        "/Team/Bert", Match.string_like_regexp("isolated subnets"))
    assert len(warnings) == (wanted == ec2.SubnetType.PRIVATE_ISOLATED)


@pytest.mark.parametrize("name", ["aws-decision", "/ssm/team/decision", "/AWS/x"])
def test_reserved_ssm_prefixes_are_refused_in_any_case(name):
    assert ssm_parameter_name_problem(name) == (
        "must not begin with 'aws' or 'ssm' (any case): SSM reserves them")


# --- typos in closed sets, folder-like channel URIs -----------------------------------------

def _instance_types() -> list[str]:
    from compiled_training.catalog.instances import training_instance_types

    return list(training_instance_types())


def _typos(values: list[str]) -> st.SearchStrategy[str]:
    """An allowed value with one character dropped, doubled or replaced."""
    def typo(value: str, at: int, kind: int, char: str) -> str:
        at %= len(value)
        return (value[:at] + value[at + 1:], value[:at] + value[at] * 2 + value[at + 1:],
                value[:at] + char + value[at + 1:])[kind]
    return st.builds(typo, st.sampled_from(values), st.integers(0, 40), st.integers(0, 2),
                     st.sampled_from("xl.0-9_"))


@PURE
@given(value=_typos(_instance_types()))
def test_a_misspelled_instance_type_is_refused_with_a_real_one_suggested(value):
    from compiled_training.catalog.instances import instance_type_problem

    problem = instance_type_problem(value)
    if value in _instance_types():  # the "typo" happened to spell another type
        assert problem is None
        return
    assert problem is not None and problem.startswith(
        f"instance_type must be a SageMaker training instance type such as 'ml.g5.48xlarge', "
        f"got {value!r}")
    suggested = re.findall(r"\(did you mean '([^']+)'\?\)$", problem)
    assert all(s in _instance_types() for s in suggested)
    # One edit away from a real type: close enough to be named (a suggestion, not silence).
    if len(value) >= 10 and value.startswith("ml."):
        assert suggested, problem


def _prefix_read(uri: str) -> bool:
    """S3 reads a key prefix: a URI means "this folder" only with its trailing '/', and one
    whose last segment has an extension names an object (restated from S3's ListObjects)."""
    key = uri.split("/", 3)[3] if uri.count("/") >= 3 else ""
    last = key.split("/")[-1]
    return bool(last) and "." not in last


channel_uris = st.builds(
    lambda parts, end: "s3://team-data/" + "/".join(parts) + end,
    st.lists(st.sampled_from(["ltr", "train", "2025-11", "part-0", "data"]), min_size=1,
             max_size=3),
    st.sampled_from(["", "/", ".csv", ".jsonl.gz", "/part-0.parquet"]))


@SYNTH
@given(uri=channel_uris)
def test_a_channel_uri_warns_exactly_when_sagemaker_would_read_a_prefix(source_dir, uri):
    stack = new_stack()
    TrainingPipeline(stack, "Bert", source_dir=source_dir, pipeline_name="bert",
                     **_job(channels=[InputChannel("train", uri)]))
    annotations = Annotations.from_stack(stack)
    warning = Match.string_like_regexp(
        f"^channel 'train' URI {re.escape(repr(uri))} ends without '/': SageMaker reads every "
        f"key that begins with .* end it with '/' \\({re.escape(uri)}/\\) to mean that folder")
    if _prefix_read(uri):
        annotations.has_warning("/Team/Bert", warning)
    else:
        annotations.has_no_warning("/Team/Bert", Match.string_like_regexp("ChannelPrefix"))
