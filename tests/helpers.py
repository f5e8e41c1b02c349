"""Test helpers: synthesis, and the validators every template goes through."""

from __future__ import annotations

import json
import logging
import os
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import jsonschema

from compiled_training.catalog import api_shapes
from compiled_training_runtime import local

ROOT = Path(__file__).resolve().parent.parent
# A user's entry point as every launcher takes it: the pytorchxla launcher imports the script
# and calls _mp_fn(index) in each process; the others run it as a script.
SAMPLE_ENTRY_POINT = """\
def main():
    print("training")


def _mp_fn(index):
    main()


if __name__ == "__main__":
    main()
"""
# The published pipeline-definition schema, kept in the repository (tests/schemas/README.md
# says where it comes from): a clone outside the workplace runs the tests too.
SCHEMA_PATH = ROOT / "tests" / "schemas" / "sagemaker-pipeline-definition.schema.json"
SHARED_SCHEMA_PATH = ROOT.parent / "shared" / "schemas" / SCHEMA_PATH.name
SCHEMA_ADDITIONS_PATH = SCHEMA_PATH.parent / "sdk-v3-additions.schema.json"
ACCOUNT = "123456789012"
REGION = "us-east-1"
ENV = cdk.Environment(account=ACCOUNT, region=REGION)
# The bench's tiny BERT, trained briefly: a batch of 4, logging and checkpoints out of the way.
TINY_BERT = {**local.TINY_BERT, "batch_size": 4, "learning_rate": 1e-3, "epochs": 1,
             "log_every": 1000, "checkpoint_every": 1000, "seed": 7}


# --- the SageMaker SDK v2, the test oracle (the library imports no SDK) -----------------------

def sdk_image_uris() -> ModuleType:
    """SDK v2's ``sagemaker.image_uris``, imported quietly and offline."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("sagemaker.config", "sagemaker.image_uris", "sagemaker"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from sagemaker import image_uris

    return image_uris


@cache
def sdk_v2_config(name: str, scope: str = "training") -> dict[str, Any]:
    """SDK v2's own ``image_uri_config/<name>.json`` (frozen at PyTorch 2.8)."""
    config = json.loads((Path(sdk_image_uris().__file__).parent / "image_uri_config"
                         / f"{name}.json").read_text())
    return config.get(scope, config)


def new_stack(name: str = "Team", *, env: cdk.Environment | None = ENV, app: cdk.App | None = None,
          outdir: Path | None = None) -> cdk.Stack:
    """A stack in a new app (or in ``app``), in the account and region that rendered values
    use; ``env=None`` makes it environment-agnostic. ``outdir``: where the app synthesizes."""
    app = app or cdk.App(outdir=str(outdir) if outdir else None)
    return cdk.Stack(app, name, env=env)


def cdk_json_context() -> dict[str, Any]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def synth_reference_app(outdir: Path, context: dict[str, Any] | None = None) -> cdk.CloudAssembly:
    from app import build_app

    app = cdk.App(outdir=str(outdir), context=context or cdk_json_context())
    return build_app(app).synth()


def synth_example(folder: Path, outdir: Path) -> Path:
    """An example app synthesized in its own process, from its own folder, as ``cdk synth``
    runs it (``python app.py`` with the CLI's output folder and its cdk.json's context)."""
    import subprocess
    import sys

    context = json.loads((folder / "cdk.json").read_text())["context"]
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(context),
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run([sys.executable, "app.py"], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return outdir


def templates(assembly: cdk.CloudAssembly) -> dict[str, dict[str, Any]]:
    return {stack.stack_name: stack.template for stack in assembly.stacks}


def pipeline_resources(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Pipeline"]


# --- turning a synthesized definition back into JSON ------------------------------------

def render(value: Any, template: dict[str, Any]) -> str:
    """A CloudFormation string expression rendered with plausible deploy-time values."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(render(p, template) for p in parts)
    if "Ref" in value:
        ref = value["Ref"]
        pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
                  "AWS::URLSuffix": "amazonaws.com"}
        if ref in pseudo:
            return pseudo[ref]
        kind = template["Resources"][ref]["Type"]
        if kind == "AWS::EC2::Subnet":
            return "subnet-0123456789abcdef0"
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{REGION}:{ACCOUNT}:{ref}"
        if kind == "AWS::CodeBuild::Project":
            return ref
        assert kind == "AWS::S3::Bucket", value
        return re.sub(r"[^a-z0-9-]", "", ref.lower())[:63]
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        kind = template["Resources"][logical_id]["Type"]
        rendered = {
            ("AWS::IAM::Role", "Arn"): f"arn:aws:iam::{ACCOUNT}:role/{logical_id}",
            ("AWS::KMS::Key", "Arn"):
                f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            ("AWS::EC2::SecurityGroup", "GroupId"): "sg-0123456789abcdef0",
            ("AWS::SQS::Queue", "Arn"): f"arn:aws:sqs:{REGION}:{ACCOUNT}:{logical_id}",
            ("AWS::Lambda::Function", "Arn"):
                f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical_id}",
            ("Custom::RuntimeImageBuild", "ImageUri"):
                f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{logical_id.lower()}:0123456789abcdef0123",
        }
        if (kind, attribute) == ("AWS::S3::Bucket", "Arn"):
            return f"arn:aws:s3:::{render({'Ref': logical_id}, template)}"
        assert (kind, attribute) in rendered, value
        return rendered[(kind, attribute)]
    if "Fn::FindInMap" in value:
        mapping, key, attribute = value["Fn::FindInMap"]
        key = render(key, template)
        return template["Mappings"][mapping][key][attribute]
    if "Fn::Sub" in value:
        return render({"Fn::Join": ["", [value["Fn::Sub"]]]}, template).replace(
            "${AWS::AccountId}", ACCOUNT).replace("${AWS::Region}", REGION)
    raise AssertionError(f"unexpected intrinsic in a pipeline definition: {value}")


def render_tree(value: Any, template: dict[str, Any]) -> Any:
    """Every intrinsic inside a property tree rendered with plausible deploy-time values."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in ("Ref", "Fn::GetAtt", "Fn::Join",
                                                     "Fn::FindInMap", "Fn::Sub"):
            return render(value, template)
        return {k: render_tree(v, template) for k, v in value.items()}
    if isinstance(value, list):
        return [render_tree(v, template) for v in value]
    return value


def definitions(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pipeline definition in a template, as JSON."""
    return [
        json.loads(render(r["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"],
                          template))
        for r in pipeline_resources(template)
    ]


# --- the published pipeline-definition schema --------------------------------------------

@cache
def _schema_validator() -> Any:
    """The schema's validator, with SDK v3's additions (``ForEach`` and ``Cleanup`` steps, a
    string parameter's ``EnumValues``, the experiment and MLflow settings, botocore's
    ``StepDisplayName``, run conditions in ``DependsOn``:
    tests/schemas/sdk-v3-additions.schema.json), the
    schema itself checked once (jsonschema.validate checks it again on every call, about a
    second each)."""
    schema = json.loads(SCHEMA_PATH.read_text())
    additions = json.loads(SCHEMA_ADDITIONS_PATH.read_text())
    schema["definitions"].update(additions["definitions"])
    schema["properties"].update(additions["properties"])
    schema["properties"]["Steps"]["items"]["oneOf"] += [
        {"$ref": "#/definitions/ForEachStep"}, {"$ref": "#/definitions/CleanupStep"}]
    schema["definitions"]["StringParameter"]["properties"]["EnumValues"] = {
        "$ref": "#/definitions/EnumValues"}
    for definition in schema["definitions"].values():
        if "DisplayName" in definition.get("properties", {}):
            definition["properties"]["DisplayName"] = {"$ref": "#/definitions/StepDisplayName"}
        if "DependsOn" in definition.get("properties", {}):
            definition["properties"]["DependsOn"] = {
                "type": "array", "items": {"$ref": "#/definitions/DependsOnEntry"}}
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(schema)


def validate_envelope(definition: dict[str, Any]) -> None:
    """Version, parameters, step types, dependencies, retry policies against the schema,
    the steps inside a condition's branches included.

    Relaxation, named: the published schema is stale on step arguments (it rejects
    ``S3DataDistributionType`` in a training input, ``Std:Join`` values in hyperparameters
    and error messages, and ``Std:JsonGet`` in conditions, all accepted by the API and
    written by the SageMaker SDK), so each step's ``Arguments`` is replaced by an empty
    object here; jobs' arguments are checked against botocore's shapes instead
    (`validate_job_arguments`) and conditions by `condition_outcome`.

    Relaxation, named: the schema has no ``PropertyFiles`` on a processing step, which the
    SageMaker SDK writes and ``Std:JsonGet`` reads; each is checked here instead (a name, a
    file path, and the name of one of the step's own outputs) and then set aside.

    Relaxation, named: the schema types a retry policy's ``ExceptionType`` as one string,
    while the API and the SageMaker SDK use a list; each list is split into one policy per
    exception type, so every type is still checked against the schema's enum.

    A ``ForEach`` step's and a ``Cleanup`` step's own arguments are checked whole (they are
    the additions' and name no job); a ``ForEach`` body's steps as a branch's are.
    """
    envelope = json.loads(json.dumps(definition))
    nested, steps = [], list(envelope["Steps"])
    while steps:
        step = steps.pop()
        arguments = step["Arguments"]
        inside = [*arguments.get("IfSteps", []), *arguments.get("ElseSteps", [])] \
            if step["Type"] == "Condition" else []
        if step["Type"] == "ForEach":  # the body checked as steps; its shape as the step's
            inside = arguments["ForEachBody"]
            arguments["ForEachBody"] = [{"Name": s["Name"], "Type": s["Type"]} for s in inside]
        nested += inside
        steps += inside
    for step in [*envelope["Steps"], *nested]:
        _blank(step)
    _schema_validator().validate(envelope)
    if nested:
        _schema_validator().validate({"Version": envelope["Version"], "Steps": nested})


def _blank(step: dict[str, Any]) -> None:
    outputs = {o["OutputName"] for o in step["Arguments"].get(
        "ProcessingOutputConfig", {}).get("Outputs", [])}
    for property_file in step.pop("PropertyFiles", []):
        assert set(property_file) == {"PropertyFileName", "OutputName", "FilePath"}, property_file
        assert re.fullmatch(r"[A-Za-z0-9\-_]{1,64}", property_file["PropertyFileName"])
        assert property_file["OutputName"] in outputs, (property_file, outputs)
        assert property_file["FilePath"] and not property_file["FilePath"].startswith("/")
    if step["Type"] in ("ForEach", "Cleanup"):
        return
    step["Arguments"] = {"Conditions": []} if step["Type"] == "Condition" else {}
    if "RetryPolicies" in step:
        step["RetryPolicies"] = [
            {**policy, "ExceptionType": exception}
            for policy in step["RetryPolicies"]
            for exception in policy["ExceptionType"]
        ]


def condition_outcome(condition_step: dict[str, Any], parameters: dict[str, Any],
                      property_files: dict[str, Any]) -> bool:
    """What Pipelines would decide for a condition step, given the parameter values and the
    JSON documents of the property files (by name)."""
    operators = {
        "GreaterThanOrEqualTo": lambda a, b: a >= b, "GreaterThan": lambda a, b: a > b,
        "LessThanOrEqualTo": lambda a, b: a <= b, "LessThan": lambda a, b: a < b,
        "Equals": lambda a, b: a == b, "NotEquals": lambda a, b: a != b,
    }

    def value(expression: Any) -> Any:
        if isinstance(expression, dict) and "Std:JsonGet" in expression:
            get = expression["Std:JsonGet"]
            document = property_files[get["PropertyFile"]["Get"].rsplit(".", 1)[1]]
            for key in get["Path"].split("."):
                document = document[key]
            return document
        return substitute_expressions(expression, parameters)

    return all(operators[c["Type"]](value(c["LeftValue"]), value(c["RightValue"]))
               for c in condition_step["Arguments"]["Conditions"])


# --- botocore's job input shapes ----------------------------------------------

# What a run-time value (an execution id, a job name) renders as here.
RUN_TIME_VALUE = "execution-0123456789ab"


def substitute_expressions(value: Any, parameters: dict[str, Any]) -> Any:
    """Pipeline expressions replaced by what they evaluate to at run time."""
    return api_shapes.substitute_expressions(value, parameters, _run_time_value)


def _run_time_value(path: str) -> str:
    """A plausible value for what only an execution knows, by the expression's path."""
    if path.endswith(".ModelArtifacts.S3ModelArtifacts"):
        return "s3://output-bucket/pipeline/output/job-0123/output/model.tar.gz"
    if path.endswith(".OutputParameters['statistics']"):  # the model-quality report
        return "s3://output-bucket/pipeline/model-metrics/0123456789ab/statistics.json"
    if path == "Execution.PipelineExecutionArn":
        return "arn:aws:sagemaker:us-east-1:123456789012:pipeline/pipeline/execution/0123456789ab"
    return RUN_TIME_VALUE


@cache
def botocore_sagemaker_model() -> Any:
    """botocore's own SageMaker ``ServiceModel``, loaded as a client loads it: the oracle
    beside the library's reading of the same files."""
    from botocore.loaders import Loader
    from botocore.model import ServiceModel

    return ServiceModel(Loader().load_service_model("sagemaker", "service-2"), "sagemaker")


def validate_job_arguments(definition: dict[str, Any]) -> None:
    """Each training, processing and model-registration step's request (those in a
    condition's branches too) against CreateTrainingJob, CreateProcessingJob and
    CreateModelPackage: botocore's own ParamValidator (types, required members, minimums),
    then the library's check of the same shapes (which adds maximums, enums, lengths and
    full-match patterns)."""
    from botocore.validate import ParamValidator

    model = botocore_sagemaker_model()
    for _, operation, request in api_shapes.job_requests(definition, _run_time_value):
        report = ParamValidator().validate(request, model.operation_model(operation).input_shape)
        assert not report.has_errors(), report.generate_report()
    problems = api_shapes.definition_problems(definition, _run_time_value)
    assert not problems, "\n".join(problems)


def cfn_lint(template_path: str) -> list[str]:
    """cfn-lint's findings (errors and warnings) for one template file."""
    from pathlib import Path as _Path

    from cfnlint.api import lint_file

    return [str(match) for match in lint_file(_Path(template_path))]
