"""What the constructs read from CDK once (`stack_reads`, the token test, the wildcard names):
each answer stays with the stack it came from, and a warm process synthesizes what a fresh one
does, byte for byte."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import Aws, Fn, Token
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from hypothesis import given, settings
from hypothesis import strategies as st

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import resolve_dlc
from compiled_training.wiring.acknowledgements import _finding_names, flatten
from tests.helpers import definitions

ROOT = Path(__file__).resolve().parents[2]
BERT = Framework.pytorch("1.13.1")


def _pipeline(stack: cdk.Stack, construct_id: str, source_dir: Path) -> TrainingPipeline:
    return TrainingPipeline(
        stack, construct_id, framework=BERT, compiler=Compiler.training_compiler(),
        instance_type="ml.g5.48xlarge", source_dir=source_dir, entry_point="train.py",
        pipeline_name=f"{stack.stack_name.lower()}-{construct_id.lower()}",
        channels=[InputChannel("train", f"s3://team-data/{construct_id.lower()}/")])


def _images(stack: cdk.Stack) -> list:
    return [d["Steps"][0]["Arguments"]["AlgorithmSpecification"]["TrainingImage"]
            for d in definitions(Template.from_stack(stack).to_json())]


# --- the token test --------------------------------------------------------------------------

def _real_tokens() -> list[str]:
    stack = cdk.Stack(cdk.App(), "Tokens")
    bucket = s3.Bucket(stack, "Bucket")
    number = Token.as_number(Fn.ref("Count"))
    return [Aws.REGION, bucket.bucket_name, f"arn:{Aws.PARTITION}:s3:::{bucket.bucket_name}/*",
            Fn.join("-", [Aws.REGION, "x"]), f"count {number}", Token.as_string(number)]


NEAR_MISSES = [
    "", "plain", "Token[", "${Token[", "${Token[]}", "${Token[a b]}", "{Token[AWS.Region.1]}",
    "$Token[AWS.Region.1]}", "#{Token[TOKEN.1]}", "${Token[AWS.Region.1]", "${Token[X.1]}",
    "-1.8881545897087626e+289", "Token[ -1.8881545897087626e+289", "Token[ -1.88e+289",
    "Token[ -1.\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660e+289",
    "s3://bucket/${Token[TOKEN.12]}/key", "${token[AWS.Region.1]}",
]


# Ids by position: a real token's text numbers the tokens made before it, which differs
# between xdist workers, and the workers must collect the same ids.
@pytest.mark.parametrize("value", [*NEAR_MISSES, *_real_tokens()],
                         ids=lambda _value: "value")
def test_is_token_answers_as_cdk_does(value):
    assert is_token(value) is Token.is_unresolved(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["$", "{", "}", "Token[", "]", "]}", "AWS.Region.1", " ",
                                 "-1.", "8881545897", "e+289", "a", ":", "_"]), max_size=8))
def test_is_token_answers_as_cdk_does_for_marker_like_strings(parts):
    value = "".join(parts)
    assert is_token(value) is Token.is_unresolved(value)


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def test_is_token_answers_as_cdk_does_for_number_tokens():
    tokens = [Token.as_number(Fn.ref(f"Count{i}")) for i in range(3)]
    assert all(is_token(t) and Token.is_unresolved(t) for t in tokens)


# Doubles whose top 16 bits are the number-token marker (0xFBFF) or next to it, and any others:
# is_token reads the bits without the kernel, and must answer as the kernel does (JSON, and so
# jsii, carries no NaN or infinity).
@settings(max_examples=200, deadline=None)
@given(st.one_of(
    st.builds(lambda top, low: _double(top << 48 | low),
              st.sampled_from([0xFBFF, 0xFBFE, 0xFC00, 0x7BFF, 0xFFEF, 0x0000]),
              st.integers(0, 2**48 - 1)),
    st.floats(allow_nan=False, allow_infinity=False)))
def test_is_token_answers_as_cdk_does_for_numbers(value):
    assert is_token(value) is Token.is_unresolved(value)


# --- no answer leaks between stacks or apps -----------------------------------------------------

def test_each_stack_answers_for_itself(source_dir):
    app = cdk.App()
    east = cdk.Stack(app, "East", env=cdk.Environment(account="111111111111", region="us-east-1"))
    west = cdk.Stack(app, "West", env=cdk.Environment(account="222222222222", region="eu-west-1"))
    agnostic = cdk.Stack(app, "Agnostic")
    pipelines = {stack: [_pipeline(stack, f"P{i}", source_dir) for i in range(2)]
                 for stack in (east, west, agnostic)}
    dlc = resolve_dlc(BERT, True, "ml.g5.48xlarge")

    for stack, region, account in ((east, "us-east-1", "111111111111"),
                                   (west, "eu-west-1", "222222222222")):
        template = Template.from_stack(stack).to_json()
        registry = f"{dlc.account(region)}.dkr.ecr.{region}.amazonaws.com/{dlc.path}"
        assert _images(stack) == [registry, registry]
        for pipeline in pipelines[stack]:
            assert stack.resolve(pipeline.pipeline_arn)["Fn::Join"][1][2] == (
                f":sagemaker:{region}:{account}:pipeline/{pipeline.pipeline_name}")
        trusts = [r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]
                  for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
        assert trusts and all(c == {"StringEquals": {"aws:SourceAccount": account}}
                              for c in trusts)
        pulls = [stack.resolve(s["Resource"]) for r in template["Resources"].values()
                 if r["Type"] == "AWS::IAM::Role"
                 for p in r["Properties"].get("Policies", [])
                 for s in p["PolicyDocument"]["Statement"] if "ecr:BatchGetImage" in s["Action"]]
        assert pulls == [{"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"},
            f":ecr:{region}:{dlc.account(region)}:repository/{dlc.repository}"]]}] * 2
        types = [r["Type"] for r in template["Resources"].values()]
        assert types.count("AWS::S3::Bucket") == 2  # its own output bucket and access logs
    # Only the stack without a region maps registries per region, once for both pipelines.
    assert "Mappings" not in Template.from_stack(east).to_json()
    template = Template.from_stack(agnostic).to_json()
    (mapping,) = template["Mappings"]
    bodies = [json.dumps(r["Properties"]["PipelineDefinition"])
              for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Pipeline"]
    assert len(bodies) == 2 and all(f'"Fn::FindInMap": ["{mapping}"' in b for b in bodies)


def test_a_stack_of_another_app_with_the_same_name_answers_for_itself(source_dir):
    stacks = [cdk.Stack(cdk.App(), "Team", env=cdk.Environment(account="123456789012",
                                                                region=region))
              for region in ("us-east-1", "eu-west-1")]
    for stack in stacks:
        _pipeline(stack, "Bert", source_dir)
    assert [_images(stack)[0].split(".")[3] for stack in stacks] == ["us-east-1", "eu-west-1"]


def test_every_pipelines_wildcards_are_acknowledged_in_every_stack(tmp_path, source_dir):
    # Pipelines share most wildcard names (logs, jobs); their bucket prefixes differ. An
    # unacknowledged AwsSolutions error makes synth raise.
    app = cdk.App(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    for name, region in (("East", "us-east-1"), ("West", "eu-west-1")):
        stack = cdk.Stack(app, name, env=cdk.Environment(account="123456789012", region=region))
        for i in range(3):
            _pipeline(stack, f"P{i}", source_dir)
    app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert [v for p in report["pluginReports"] for v in p.get("violations", [])] == []


class _CountingStack(cdk.Stack):
    """A stack that counts the resolve calls made from Python."""

    resolves = 0

    def resolve(self, obj):
        type(self).resolves += 1
        return super().resolve(obj)


def test_wildcard_names_resolve_each_token_once_and_read_as_the_whole_string_does():
    # Each token is resolved once per stack and put back into each string; the names must be
    # what resolving each whole string (intrinsics and all) and flattening it gives.
    stack = _CountingStack(cdk.App(), "Names")
    bucket = s3.Bucket(stack, "Bucket")
    resources = [f"arn:{Aws.PARTITION}:s3:::{bucket.bucket_name}/team/*",
                 bucket.arn_for_objects("other/*"), f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:*",
                 "arn:aws:sagemaker:us-east-1:123456789012:training-job/*",
                 Fn.join("/", [bucket.bucket_arn, "*"])]
    names = _finding_names(stack, resources)
    assert _CountingStack.resolves == 1  # one call for every token of every string
    expected = [flatten(stack.resolve(resource)) for resource in resources]
    assert names == expected
    assert expected[0] == "arn:<AWS::Partition>:s3:::<Bucket83908E77>/team/*"
    resolves = _CountingStack.resolves
    another = f"arn:{Aws.PARTITION}:s3:::{bucket.bucket_name}/another/*"
    assert _finding_names(stack, [another]) == [flatten(stack.resolve(another))]
    assert _CountingStack.resolves == resolves + 1  # only the check's own: its tokens are known


# --- a warm process, a fresh process: the same template ---------------------------------------

_SYNTH = """
import json, sys
from pathlib import Path
import aws_cdk as cdk
from tests.wiring.test_stack_reads import build_app
print(json.dumps({s.stack_name: s.template for s in build_app(Path(sys.argv[1])).synth().stacks}))
"""


def build_app(source_dir: Path) -> cdk.App:
    app = cdk.App()
    for name, region in (("East", "us-east-1"), ("Agnostic", None)):
        stack = cdk.Stack(app, name, env=cdk.Environment(account="123456789012", region=region)
                          if region else None)
        for i in range(3):
            _pipeline(stack, f"P{i}", source_dir)
    return app


def test_a_warm_process_synthesizes_the_templates_of_a_fresh_one(source_dir):
    # This process has built pipelines from the same source in other apps already.
    build_app(source_dir).synth()
    warm = {s.stack_name: s.template for s in build_app(source_dir).synth().stacks}
    fresh = subprocess.run([sys.executable, "-c", _SYNTH, str(source_dir)], check=True,
                           capture_output=True, text=True, cwd=ROOT)
    assert json.dumps(warm, sort_keys=True) == json.dumps(
        json.loads(fresh.stdout.strip().splitlines()[-1]), sort_keys=True)
