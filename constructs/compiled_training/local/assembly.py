"""A cloud assembly as the local runner reads it: its pipelines, each definition with the
template's references resolved to named local stand-ins, and the staged assets the
definitions and functions point to (by the S3 location they are published to)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiled_training.catalog.aws_names import arn_prefix, partition, url_suffix

# What an environment-agnostic stack resolves to here (moto's default account).
LOCAL_ACCOUNT = "123456789012"
LOCAL_REGION = "us-east-1"


class RunInputError(Exception):
    """Bad input to a local run: one line, exit code 2."""


@dataclass(frozen=True)
class Asset:
    source: Path
    """The staged file (packaging ``file``) or folder (``zip``) in the cloud assembly."""
    packaging: str


@dataclass
class StackReader:
    """One stack's template, its account and region, and what its references resolve to."""

    name: str
    template: dict[str, Any]
    account: str
    region: str
    assets: dict[str, Asset] = field(default_factory=dict)
    """Staged assets by the ``s3://bucket/key`` they are published to."""
    stand_ins: dict[str, str] = field(default_factory=dict)
    """What each reference resolved to here, for the report (``Ref Bucket`` -> its name)."""

    def resolve(self, value: Any) -> Any:
        """CloudFormation's intrinsics in ``value`` replaced by local stand-ins."""
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {key: self.resolve(item) for key, item in value.items()}
        (key, argument), = value.items()
        if key == "Ref":
            return self._ref(argument)
        if key == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) \
                else argument.split(".", 1)
            return self._get_att(logical_id, attribute)
        if key == "Fn::Join":
            separator, parts = argument
            return separator.join(str(self.resolve(part)) for part in parts)
        if key == "Fn::Sub":
            return self._sub(argument)
        if key == "Fn::FindInMap":
            mapping, first, second = (self.resolve(part) for part in argument)
            return self.template["Mappings"][mapping][first][second]
        if key == "Fn::Select":
            index, items = argument
            return self.resolve(items)[int(self.resolve(index))]
        if key == "Fn::Split":
            separator, text = argument
            return str(self.resolve(text)).split(separator)
        if key.startswith("Fn::"):
            raise RunInputError(f"stack {self.name}: the runner does not resolve {key}")
        return {key: self.resolve(argument)}

    def _pseudo(self, name: str) -> str | None:
        return {"AWS::AccountId": self.account, "AWS::Region": self.region,
                "AWS::Partition": partition(self.region),
                "AWS::URLSuffix": url_suffix(self.region),
                "AWS::StackName": self.name}.get(name)

    def _ref(self, logical_id: str) -> str:
        pseudo = self._pseudo(logical_id)
        if pseudo is not None:
            return pseudo
        if logical_id in self.template.get("Parameters", {}):
            parameter = self.template["Parameters"][logical_id]
            if "Default" not in parameter:
                raise RunInputError(f"stack {self.name}: template parameter {logical_id} has "
                                    f"no default to run with")
            return str(parameter["Default"])
        kind = self.template["Resources"][logical_id]["Type"]
        properties = self.template["Resources"][logical_id].get("Properties", {})
        if kind == "AWS::S3::Bucket":
            name = properties.get("BucketName") or re.sub(r"[^a-z0-9-]", "", logical_id.lower())
            value = str(self.resolve(name))[:63]
        elif kind == "AWS::SNS::Topic":
            value = f"arn:aws:sns:{self.region}:{self.account}:{logical_id}"
        elif kind == "AWS::SSM::Parameter":
            value = str(self.resolve(properties.get("Name", logical_id)))
        else:
            value = logical_id
        self.stand_ins[f"Ref {logical_id}"] = value
        return value

    def _get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.template["Resources"][logical_id]["Type"]
        arns = {
            "AWS::IAM::Role": f"arn:{partition(self.region)}:iam::{self.account}:role/"
                              f"{logical_id}",
            "AWS::Lambda::Function": f"{self._arn('lambda')}:function:{logical_id}",
            "AWS::KMS::Key": f"{self._arn('kms')}:key/{logical_id}",
            "AWS::SQS::Queue": f"{self._arn('sqs')}:{logical_id}",
            "AWS::S3::Bucket": f"arn:{partition(self.region)}:s3:::{self._ref(logical_id)}",
        }
        if attribute == "Arn" and kind in arns:
            value = arns[kind]
        elif attribute == "ImageUri":
            # An image built in the cloud (RuntimeImage): locally the job runs in --python.
            value = (f"{self.account}.dkr.ecr.{self.region}.{url_suffix(self.region)}/"
                     f"{logical_id.lower()}:local")
        else:
            value = f"{logical_id}.{attribute}"
        self.stand_ins[f"GetAtt {logical_id}.{attribute}"] = value
        return value

    def _arn(self, service: str) -> str:
        return arn_prefix(service, self.region, self.account)

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument

        def replace(match: re.Match[str]) -> str:
            name = match[1]
            if name in variables:
                return str(self.resolve(variables[name]))
            pseudo = self._pseudo(name)
            if pseudo is not None:
                return pseudo
            if "." in name:
                return self._get_att(*name.split(".", 1))
            return self._ref(name)

        return re.sub(r"\$\{([^}!][^}]*)\}", replace, text)

    def buckets(self) -> list[str]:
        """The names of the stack's buckets, which deploying it creates."""
        return [self._ref(logical_id) for logical_id, resource in
                sorted(self.template.get("Resources", {}).items())
                if resource["Type"] == "AWS::S3::Bucket"]

    def resource(self, logical_id: str) -> dict[str, Any]:
        return dict(self.template["Resources"][logical_id])


@dataclass(frozen=True)
class AssemblyPipeline:
    """One ``AWS::SageMaker::Pipeline`` of the assembly."""

    stack: StackReader
    logical_id: str
    path: str
    """Its construct path (``aws:cdk:path``), as the tree names it."""
    name: str
    definition: dict[str, Any]
    stand_ins: dict[str, str]
    """What its definition's references resolved to here."""


def read_assembly(outdir: Path) -> list[AssemblyPipeline]:
    """Every pipeline of a synthesized cloud assembly (``cdk.out``)."""
    try:
        return _read_assembly(outdir)
    except (OSError, KeyError, TypeError, ValueError) as error:  # JSON errors are ValueErrors
        raise RunInputError(f"{outdir}: not a cloud assembly the runner can read "
                            f"({type(error).__name__}: {error})") from None


def _read_assembly(outdir: Path) -> list[AssemblyPipeline]:
    manifest_path = outdir / "manifest.json"
    if not manifest_path.is_file():
        raise RunInputError(f"{outdir} is not a cloud assembly (no manifest.json): run "
                            f"`cdk synth` (or `make synth`) first")
    manifest = json.loads(manifest_path.read_text())
    pipelines = []
    for stack_name, artifact in sorted(manifest.get("artifacts", {}).items()):
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        properties = artifact.get("properties", {})
        template = json.loads((outdir / properties["templateFile"]).read_text())
        account, region = _environment(artifact.get("environment", ""))
        stack = StackReader(stack_name, template, account, region)
        stack.assets = _assets(outdir, stack)
        paths = _construct_paths(outdir, artifact)
        for logical_id, resource in sorted(template.get("Resources", {}).items()):
            if resource["Type"] != "AWS::SageMaker::Pipeline":
                continue
            stack.stand_ins = {}
            body = stack.resolve(resource["Properties"]["PipelineDefinition"]
                                 .get("PipelineDefinitionBody"))
            if not isinstance(body, str):
                continue  # a definition in S3 is not in the assembly
            name = stack.resolve(resource["Properties"]["PipelineName"])
            path = paths.get(logical_id, f"{stack_name}/{logical_id}")
            pipelines.append(AssemblyPipeline(stack, logical_id, path, str(name),
                                              json.loads(body), dict(stack.stand_ins)))
    return pipelines


def pick(pipelines: list[AssemblyPipeline], wanted: str | None) -> AssemblyPipeline:
    """The pipeline named by its pipeline name, construct path or logical id."""
    matches = [p for p in pipelines if wanted in (p.name, p.path, p.path.removesuffix(
        "/Resource"), p.logical_id)] if wanted else []
    if len(matches) == 1:
        return matches[0]
    listed = "; ".join(f"{p.name} ({p.path.removesuffix('/Resource')})" for p in pipelines)
    if not pipelines:
        raise RunInputError("the assembly holds no pipeline with its definition inline")
    if not wanted:
        raise RunInputError(f"name a pipeline with --pipeline: {listed}")
    what = "names several pipelines" if matches else "is no pipeline of the assembly"
    raise RunInputError(f"--pipeline {wanted!r} {what}; the assembly has: {listed}")


def _construct_paths(outdir: Path, artifact: Mapping[str, Any]) -> dict[str, str]:
    """Each resource's construct path by logical id, from the stack's metadata (in the
    manifest, or the file it names)."""
    metadata = artifact.get("metadata") or {}
    extra = artifact.get("additionalMetadataFile")
    if extra and (outdir / extra).is_file():
        metadata = {**metadata, **json.loads((outdir / extra).read_text())}
    return {str(entry["data"]): path.lstrip("/") for path, entries in metadata.items()
            for entry in entries if entry.get("type") == "aws:cdk:logicalId"}


def _environment(environment: str) -> tuple[str, str]:
    account, _, region = environment.removeprefix("aws://").partition("/")
    return (LOCAL_ACCOUNT if not account.isdigit() else account,
            LOCAL_REGION if region.startswith("unknown") or not region else region)


def _assets(outdir: Path, stack: StackReader) -> dict[str, Asset]:
    """The stack's file assets by the S3 location the deployment publishes them to."""
    manifest = outdir / f"{stack.name}.assets.json"
    if not manifest.is_file():
        return {}
    assets = {}
    for entry in json.loads(manifest.read_text()).get("files", {}).values():
        source = entry["source"]
        for destination in entry["destinations"].values():
            bucket = stack.resolve({"Fn::Sub": destination["bucketName"]})
            key = stack.resolve({"Fn::Sub": destination["objectKey"]})
            assets[f"s3://{bucket}/{key}"] = Asset(outdir / source["path"],
                                                   source.get("packaging", "file"))
    return assets


def json_file(path: Path, flag: str) -> Any:
    """A JSON file named on the command line (by ``flag``), or one line saying why not."""
    try:
        return json.loads(path.read_text())
    except OSError as error:
        raise RunInputError(f"{flag} {path}: cannot read it: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise RunInputError(f"{flag} {path}: not JSON: {error}") from None


def definition_file(path: Path) -> tuple[dict[str, Any], str]:
    """A pipeline definition as ``describe-pipeline`` returns it (``PipelineDefinition``, a
    JSON string, beside its ``PipelineName``) or as the SageMaker SDK's
    ``pipeline.definition()`` writes it (no name); and the name, or ``""``."""
    document = json_file(path, "--definition")
    name = ""
    if isinstance(document, Mapping) and isinstance(document.get("PipelineDefinition"), str):
        name = str(document.get("PipelineName") or "")
        try:
            document = json.loads(document["PipelineDefinition"])
        except json.JSONDecodeError as error:
            raise RunInputError(f"{path}: its PipelineDefinition is not JSON: {error}") from None
    if not isinstance(document, Mapping) or "Steps" not in document:
        raise RunInputError(f"{path}: not a pipeline definition (no 'Steps')")
    return dict(document), name
