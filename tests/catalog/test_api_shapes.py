"""The library's check of requests against botocore's real SageMaker service model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest

from compiled_training.catalog.api_shapes import (
    RUN_TIME,
    api_shape,
    definition_problems,
    operation_input,
    shape_problems,
    substitute_expressions,
)
from compiled_training.catalog.java_patterns import PATTERN_WORDS, java_regex
from tests.helpers import botocore_sagemaker_model, validate_job_arguments


def _problems(value, shape_name: str) -> list[str]:
    return [str(p) for p in shape_problems(value, api_shape(shape_name), "Field")]


def _reachable_patterns(shape, seen: set[str]) -> set[str]:
    if shape.name in seen:
        return set()
    seen.add(shape.name)
    children = {"structure": lambda: list(shape.members.values()),
                "list": lambda: [shape.member], "map": lambda: [shape.key, shape.value]}
    found = {shape.metadata["pattern"]} if "pattern" in shape.metadata else set()
    for child in children.get(shape.type_name, list)():
        found |= _reachable_patterns(child, seen)
    return found


@pytest.mark.parametrize("operation", ["CreateTrainingJob", "CreateProcessingJob",
                                       "CreatePipeline", "StartPipelineExecution"])
def test_every_pattern_of_the_operations_reads_as_python(operation):
    patterns = _reachable_patterns(operation_input(operation), set())
    assert patterns
    for pattern in patterns:
        java_regex(pattern, True)
        java_regex(pattern, False)


@pytest.mark.parametrize(("value", "shape", "message"), [
    # A prefix that matches is not a match: the whole value must.
    ("train!", "ChannelName", r"Field must hold only letters, digits, '\.', '-' and '_', got 'train!'$"),
    ("s3:/bucket", "S3Uri", r"Field must be an s3:// or https:// URL with a bucket or host, got 's3:/bucket'$"),
    ("a" * 65, "ChannelName", r"Field must be at most 64 characters, got 'a+'\.\.\. \(65 characters\)"),
    ("", "ChannelName", r"Field must be at least 1 character, got ''"),
    ("ml.g5.mega", "TrainingInstanceType", r"Field must be one of TrainingInstanceType values, got 'ml.g5.mega'"),
    ("Pipe", "S3DataType", r"Field must be one of ManifestFile, S3Prefix, AugmentedManifestFile.*, got 'Pipe'"),
    (2**31, "TrainingInstanceCount", r"Field must be at most 2147483647, got 2147483648"),
    (-(2**31) - 1, "TrainingInstanceCount", r"Field must be at least 0, got -2147483649"),
    (10**40, "VolumeSizeInGB", r"Field must be at most 2147483647, got an integer of about 41 digits"),
    (28 * 86400 + 1, "MaxRuntimeInSeconds", r"Field must be at most 2419200 seconds \(28 days\), got 2419201 seconds"),
    ("3", "TrainingInstanceCount", r"Field must be an integer, got str '3'"),
    (True, "TrainingInstanceCount", r"Field must be an integer, got bool True"),
    (1, "Boolean", r"Field must be a boolean, got int 1"),
    ("line\nbreak", "PipelineDescription", r"Field must be one line, got 'line\\nbreak' \(a line break is not allowed\)"),
    ("carriage\rreturn", "PipelineDescription", r"\(a line break is not allowed\)"),
    ("a\u2028b", "PipelineDescription", r"\(a line break is not allowed\)"),
    ("team*", "TagValue", r"Field must hold only letters, digits, spaces and _ \. : / = \+ - @, got 'team\*'$"),
    ([{"ChannelName": f"c{i}", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://b/d"}}} for i in range(21)],
     "InputDataConfig", r"Field must be at most 20 items, got 21 items"),
])
def test_fails_on_a_value_the_api_refuses(value, shape, message):
    problems = _problems(value, shape)
    assert len(problems) == 1, problems
    assert re.search(message, problems[0]), problems[0]


@pytest.mark.parametrize(("value", "shape"), [
    ("train.v2-a_b", "ChannelName"),
    ("s3://bucket/prefix/", "S3Uri"),
    (2**31 - 1, "TrainingInstanceCount"),
    (28 * 86400, "MaxRuntimeInSeconds"),
    ("Team NLP: Ünïcödé ① bert-2 @x", "TagValue"),  # \p{L}, \p{Z}, \p{N} read as Java does
    ("tab\tis fine", "PipelineDescription"),
    ("", "PipelineDescription"),
])
def test_accepts_what_the_api_accepts(value, shape):
    assert _problems(value, shape) == []


def test_fails_on_missing_required_and_unknown_members():
    request = {"TrainingJobName": "job", "OutputDataConfig": {}, "Unknown": 1}
    problems = [str(p) for p in shape_problems(request, operation_input("CreateTrainingJob"), "")]
    assert problems == ["RoleArn is required",
                        "OutputDataConfig.S3OutputPath is required",
                        "Unknown is not a member of CreateTrainingJobRequest"]


def test_fails_on_a_non_finite_float():
    operation = operation_input("CreateTrainingJob")
    shape = operation.members["ResourceConfig"]
    assert not list(shape_problems({"InstanceType": "ml.g5.xlarge", "InstanceCount": 1,
                                    "VolumeSizeInGB": 30}, shape, ""))
    (problem,) = shape_problems(float("nan"), api_shape("Double"), "Field")
    assert str(problem) == "Field must be a finite number, got nan"


def test_skips_unresolved_tokens_and_run_time_values():
    bucket = cdk.Fn.ref("Bucket")  # an unresolved token, as the constructs' bucket names are
    assert cdk.Token.is_unresolved(bucket)
    assert _problems(f"s3://{bucket}/" + "a" * 2000, "S3Uri") == []
    assert _problems(cdk.Token.as_number(cdk.Fn.ref("Count")), "TrainingInstanceCount") == []
    assert _problems(RUN_TIME, "S3Uri") == []


def test_substitutes_parameters_and_leaves_run_time_values_unknown():
    arguments = {"Uri": {"Get": "Parameters.Data"},
                 "Joined": {"Std:Join": {"On": "/", "Values": ["s3://b", {"Get": "Parameters.On"}]}},
                 "Checkpoint": {"Std:Join": {"On": "/", "Values": [
                     "s3://b", {"Get": "Execution.PipelineExecutionId"}]}}}
    assert substitute_expressions(arguments, {"Data": "s3://b/d", "On": True}) == {
        "Uri": "s3://b/d", "Joined": "s3://b/true", "Checkpoint": RUN_TIME}


def test_checks_every_job_step_of_a_definition_the_processing_step_too():
    definition = {"Parameters": [{"Name": "Count", "Type": "Integer", "DefaultValue": 2**31}],
                  "Steps": [
                      {"Name": "Train", "Type": "Training", "Arguments": {
                          "RoleArn": "arn:aws:iam::123456789012:role/r",
                          "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
                          "ResourceConfig": {"InstanceType": "ml.g5.xlarge",
                                             "InstanceCount": {"Get": "Parameters.Count"},
                                             "VolumeSizeInGB": 30}}},
                      {"Name": "Compare", "Type": "Processing", "Arguments": {
                          "RoleArn": "arn:aws:iam::123456789012:role/r",
                          "AppSpecification": {"ImageUri": "image"},
                          "ProcessingResources": {"ClusterConfig": {
                              "InstanceType": "ml.m5.large", "InstanceCount": 1,
                              "VolumeSizeInGB": 20000}}}},
                      {"Name": "Decide", "Type": "Condition", "Arguments": {"Conditions": []}},
                  ]}
    assert definition_problems(definition) == [
        "step Train: ResourceConfig.InstanceCount must be at most 2147483647, got 2147483648",
        "step Compare: ProcessingResources.ClusterConfig.VolumeSizeInGB must be at most 16384, "
        "got 20000",
    ]


def test_the_test_helper_is_the_library_check_and_refuses_a_matching_prefix():
    # tests/helpers.py used regex.match on unanchored patterns: 'train!' passed as 'train'.
    definition = {"Steps": [{"Name": "Train", "Type": "Training", "Arguments": {
        "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "image"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1,
                           "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "InputDataConfig": [{"ChannelName": "train!", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://b/d"}}}]}}]}
    with pytest.raises(AssertionError, match=r"step Train: InputDataConfig\[0\].ChannelName must hold only letters"):
        validate_job_arguments(definition)


def test_a_quantified_end_anchor_reads_as_java_reads_it():
    # CustomerMetadataKey's pattern ends in `${1,128}`: Java accepts it, Python's re does not.
    from compiled_training.catalog.api_shapes import api_shape
    from compiled_training.catalog.java_patterns import java_regex

    pattern = java_regex(api_shape("CustomerMetadataKey").metadata["pattern"])
    assert pattern.fullmatch("pipeline:execution") and not pattern.fullmatch("tab\there")


# --- the model as read here, against botocore's own ServiceModel ---------------------------

def _walk(shape, seen: dict[str, object]) -> None:
    if shape.name in seen:
        return
    seen[shape.name] = shape
    children = {"structure": lambda: list(shape.members.values()),
                "list": lambda: [shape.member], "map": lambda: [shape.key, shape.value]}
    for child in children.get(shape.type_name, list)():
        _walk(child, seen)


def _described(shape) -> dict:
    """What this library reads of a shape, in botocore's terms."""
    kids = {"structure": lambda: {n: m.name for n, m in shape.members.items()},
            "list": lambda: shape.member.name,
            "map": lambda: (shape.key.name, shape.value.name)}
    return {"type": shape.type_name, "metadata": dict(shape.metadata),
            # botocore has these on strings and structures only; the reader, on every shape
            "enum": list(getattr(shape, "enum", [])),
            "required": list(getattr(shape, "required_members", [])),
            "children": kids.get(shape.type_name, lambda: None)()}


def test_the_model_read_as_json_equals_botocores_service_model():
    """The shapes are read from botocore's data files without botocore's loader (a quarter of
    a second per synth); botocore's ServiceModel, loaded as a client loads it, is the oracle
    for every shape the library checks requests against."""
    oracle = botocore_sagemaker_model()
    ours: dict[str, object] = {}
    theirs: dict[str, object] = {}
    for operation in ("CreateTrainingJob", "CreateProcessingJob", "CreateModelPackage",
                      "CreatePipeline", "StartPipelineExecution"):
        _walk(operation_input(operation), ours)
        _walk(oracle.operation_model(operation).input_shape, theirs)
    for name in ("TrainingInstanceType", "ProcessingInstanceType", "PipelineParameterName",
                 "InferenceSpecification"):
        _walk(api_shape(name), ours)
        _walk(oracle.shape_for(name), theirs)
    assert len(ours) > 300
    assert ours.keys() == theirs.keys()
    differing = [name for name in ours
                 if _described(ours[name]) != _described(theirs[name])]
    assert not differing, differing[:5]


def test_the_users_models_folder_wins_and_the_newest_version_is_read(tmp_path, monkeypatch):
    """As botocore's Loader: ``~/.aws/models`` is searched before botocore's own data (the
    same API version in both: the user's file is read), and the newest API version of any
    search path is the one read (gzipped or not)."""
    import gzip

    from compiled_training.catalog import api_shapes

    newest = sorted(p.name for p in (Path(botocore_data()) / "sagemaker").iterdir())[-1]

    def model(instance_type: str) -> bytes:
        return json.dumps({"operations": {}, "shapes": {"TrainingInstanceType": {
            "type": "string", "enum": [instance_type]}}}).encode()

    def read_with_home(files: dict[str, bytes]) -> list[str]:
        home = tmp_path / str(len(list(tmp_path.iterdir())))
        for name, data in files.items():
            (home / ".aws" / "models" / "sagemaker" / name).parent.mkdir(parents=True,
                                                                        exist_ok=True)
            (home / ".aws" / "models" / "sagemaker" / name).write_bytes(data)
        monkeypatch.setattr(Path, "home", lambda: home)
        api_shapes._sagemaker_model.cache_clear()
        api_shapes._shape.cache_clear()
        try:
            return api_shape("TrainingInstanceType").enum
        finally:
            monkeypatch.undo()
            api_shapes._sagemaker_model.cache_clear()
            api_shapes._shape.cache_clear()

    assert read_with_home({f"{newest}/service-2.json": model("ml.users.1xlarge")}) == [
        "ml.users.1xlarge"]
    assert read_with_home({"2099-01-01/service-2.json.gz": gzip.compress(
        model("ml.future.1xlarge"))}) == ["ml.future.1xlarge"]
    assert read_with_home({"2001-01-01/service-2.json": model("ml.old.1xlarge")}) != [
        "ml.old.1xlarge"]
    assert "ml.g5.48xlarge" in api_shape("TrainingInstanceType").enum


def botocore_data() -> str:
    import botocore

    return str(Path(botocore.__file__).parent / "data")


def test_every_pattern_said_in_words_is_one_of_the_models():
    # A pattern the model no longer has would leave its words to a pattern nobody sends.
    patterns = {shape.get("pattern") for shape in _model_shapes().values()}
    assert set(PATTERN_WORDS) <= patterns


def _model_shapes() -> dict:
    from compiled_training.catalog.api_shapes import _sagemaker_model

    return dict(_sagemaker_model()["shapes"])


@pytest.mark.parametrize(("shape", "value", "words"), [
    ("PipelineName", "nlp_bert", "must hold only letters, digits and hyphens, beginning and "
                                 "ending with a letter or digit, got 'nlp_bert'"),
    ("ChannelName", "train data", "must hold only letters, digits, '.', '-' and '_', got "
                                  "'train data'"),
    ("TrainingEnvironmentKey", "1KEY", "must hold only letters, digits and '_', not beginning "
                                       "with a digit, got '1KEY'"),
])
def test_a_pattern_violation_is_said_in_words(shape, value, words):
    (problem,) = shape_problems(value, api_shape(shape), "field")
    assert str(problem) == f"field {words}"
