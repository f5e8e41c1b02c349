"""Types at the boundary: a wrong type is a TypeError naming the construct, the field, what
was given and what is wanted, raised in Python before anything reaches jsii."""

from __future__ import annotations

from datetime import datetime, timezone

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from compiled_training import (
    Compiler,
    CompilerBenchmark,
    Distribution,
    Framework,
    InputChannel,
    Parameter,
    RetrainingSchedule,
    RuntimeImage,
    TrainingPipeline,
)
from compiled_training.typecheck import check_entry
from compiled_training.values.job import ParameterType
from tests.helpers import cdk_json_context, new_stack, synth_reference_app

BERT = Framework.pytorch("1.13.1")


def _pipeline(code, stack=None, **overrides) -> TrainingPipeline:
    props = {"framework": BERT, "compiler": Compiler.training_compiler(),
             "instance_type": "ml.g5.48xlarge", "source_dir": code,
             "entry_point": "train.py", "channels": [InputChannel("train", "s3://team-data/t/")]}
    return TrainingPipeline(stack or new_stack(), "Bert",
                            **{**props, **overrides})


def _benchmark(source_dir, **overrides) -> CompilerBenchmark:
    props = {"framework": BERT, "instance_type": "ml.g5.48xlarge", "source_dir": source_dir,
             "entry_point": "train.py",
             "channels": [InputChannel("train", "s3://team-data/t/"),
                          InputChannel("validation", "s3://team-data/v/")]}
    return CompilerBenchmark(new_stack(), "Bench",
                             **{**props, **overrides})


def _schedule(source_dir, **overrides) -> RetrainingSchedule:
    pipeline = _pipeline(source_dir)
    props = {"pipeline": pipeline, "team": "nlp", "expression": "rate(7 days)"}
    return RetrainingSchedule(pipeline.stack, "Schedule", **{**props, **overrides})


@pytest.mark.parametrize(("overrides", "message"), [
    ({"debugger": "no"}, r"debugger must be a bool or None, got str 'no'$"),
    ({"spot": 1}, r"spot must be a bool or None, got int 1$"),
    ({"instance_count": 2.0}, r"instance_count must be an int or None, got float 2.0$"),
    ({"instance_count": True}, r"instance_count must be an int or None, got bool True$"),
    ({"instance_type": None}, r"instance_type must be a str, got NoneType None$"),
    ({"framework": "pytorch"}, r"framework must be Framework, got str 'pytorch'$"),
    ({"compiler": "training-compiler"}, r"compiler must be Compiler or None, got str 'training-compiler'$"),
    ({"distribution": "pytorchxla"}, r"distribution must be Distribution or None, got str 'pytorchxla'$"),
    ({"max_runtime": 3600}, r"max_runtime must be Duration or None, got int 3600$"),
    ({"output_bucket": "team-bucket"}, r"output_bucket must be aws_s3.IBucket or None, got str 'team-bucket'$"),
    ({"kms_key": "arn:aws:kms:us-east-1:123456789012:key/1"}, r"kms_key must be aws_kms.IKey or None, got str"),
    ({"channels": "s3://team-data/t/"}, r"channels must be a sequence of InputChannel or None, got str 's3://team-data/t/'$"),
    ({"channels": ["s3://team-data/t/"]}, r"channels\[0\] must be InputChannel, got str 's3://team-data/t/'$"),
    ({"hyperparameters": {"layers": [1, 2]}}, r"hyperparameters\['layers'\] must be a str or an int or a float or a bool or Parameter, got list \[1, 2\]$"),
    ({"hyperparameters": {1: 2}}, r"hyperparameters key 1 must be a str, got int 1$"),
    ({"hyperparameters": {"lr": float("nan")}}, r"hyperparameters\['lr'\] must be a finite number, got nan$"),
    ({"hyperparameters": {"seed": 10**3000}}, r"hyperparameters\['seed'\] must have at most 2500 digits \(no SageMaker field holds more\), got an integer of about 3001 digits$"),
    ({"max_runtime": cdk.Duration.millis(1500)}, r"max_runtime must be a whole number of seconds, got 1.5 seconds$"),
    ({"source_dir": 42}, r"source_dir must be a str or Path or None, got int 42$"),
])
def test_fails_on_a_wrong_type_for_training_pipeline(source_dir, overrides, message):
    kind = ValueError if "finite" in message or "digits" in message or "whole" in message \
        else TypeError
    with pytest.raises(kind, match=r"^TrainingPipeline Team/Bert: " + message):
        _pipeline(source_dir, **overrides)


def test_fails_with_every_wrong_type_in_one_message(source_dir):
    with pytest.raises(TypeError, match=r"^TrainingPipeline Team/Bert has 2 problems:\n"
                                        r"  - instance_count must be an int or None, got str '2'\n"
                                        r"  - debugger must be a bool or None, got str 'no'$"):
        _pipeline(source_dir, instance_count="2", debugger="no")


def test_fails_on_a_scope_or_id_of_the_wrong_type(source_dir):
    with pytest.raises(TypeError, match=r"^TrainingPipeline Bert: scope must be a Construct, got str 'Team'$"):
        TrainingPipeline("Team", "Bert", framework=BERT, instance_type="ml.g5.xlarge")
    with pytest.raises(TypeError, match=r"^TrainingPipeline: construct_id must be a str, got int 7$"):
        TrainingPipeline(new_stack(env=None), 7, framework=BERT,
                         instance_type="ml.g5.xlarge")


@pytest.mark.parametrize(("overrides", "kind", "message"), [
    ({"speedup_threshold": float("nan")}, ValueError, r"speedup_threshold must be a finite number, got nan$"),
    ({"quality_tolerance": "0.1"}, TypeError, r"quality_tolerance must be a float or None, got str '0.1'$"),
    ({"large_batch_size": 48.0}, TypeError, r"large_batch_size must be an int or None, got float 48.0$"),
    ({"channels": None}, TypeError, r"channels must be a sequence of InputChannel, got NoneType None$"),
    ({"baseline_distribution": "none"}, TypeError, r"baseline_distribution must be Distribution or None, got str 'none'$"),
])
def test_fails_on_a_wrong_type_for_compiler_benchmark(source_dir, overrides, kind, message):
    with pytest.raises(kind, match=r"^CompilerBenchmark Team/Bench: " + message):
        _benchmark(source_dir, **overrides)


@pytest.mark.parametrize(("overrides", "kind", "message"), [
    ({"enabled": "false"}, TypeError, r"enabled must be a bool or None, got str 'false'$"),
    ({"notify_on_success": "yes"}, TypeError, r"notify_on_success must be a bool or None, got str 'yes'$"),
    ({"retry_attempts": 2.5}, TypeError, r"retry_attempts must be an int or None, got float 2.5$"),
    ({"pipeline": "Team-Bert"}, TypeError, r"pipeline must be aws_sagemaker.IPipeline, got str 'Team-Bert'$"),
    ({"time_zone": "Europe/Berlin"}, TypeError, r"time_zone must be TimeZone or None, got str 'Europe/Berlin'$"),
    ({"start_date": datetime(2030, 1, 1)}, ValueError,
     r"start_date must be a timezone-aware datetime \(a naive one means the synth machine's local time\), got datetime.datetime\(2030, 1, 1, 0, 0\); add tzinfo=timezone.utc$"),
    ({"end_date": "2030-01-01"}, TypeError, r"end_date must be a datetime or None, got str '2030-01-01'$"),
    ({"flexible_window": cdk.Duration.seconds(90)}, ValueError,
     r"flexible_window must be a whole number of minutes, got 90 seconds$"),
    ({"max_event_age": cdk.Duration.millis(61500)}, ValueError,
     r"max_event_age must be a whole number of seconds, got 61.5 seconds$"),
    ({"parameters": {"Lr": float("inf")}}, ValueError, r"parameters\['Lr'\] must be a finite number, got inf$"),
])
def test_fails_on_a_wrong_type_for_retraining_schedule(source_dir, overrides, kind, message):
    with pytest.raises(kind, match=r"^RetrainingSchedule Team/Schedule: " + message):
        _schedule(source_dir, **overrides)


def test_accepts_an_aware_datetime_and_whole_durations(source_dir):
    _schedule(source_dir, start_date=datetime(2030, 1, 1, tzinfo=timezone.utc),
              flexible_window=cdk.Duration.minutes(15), max_event_age=cdk.Duration.hours(2))


@pytest.mark.parametrize(("overrides", "message"), [
    ({"compiler": "training-compiler"}, r"compiler must be Compiler, got str 'training-compiler'$"),
    ({"build_mode": "cloud"}, r"build_mode must be BuildMode or None, got str 'cloud'$"),
    ({"removal_policy": "destroy"}, r"removal_policy must be RemovalPolicy or None, got str 'destroy'$"),
    ({"repository": "team/runtime"}, r"repository must be aws_ecr.IRepository or None, got str 'team/runtime'$"),
])
def test_fails_on_a_wrong_type_for_runtime_image(overrides, message):
    props = {"framework": BERT, "compiler": Compiler.training_compiler(), **overrides}
    with pytest.raises(TypeError, match=r"^RuntimeImage Team/Image: " + message):
        RuntimeImage(new_stack(), "Image", **props)


@pytest.mark.parametrize(("factory", "kind", "message"), [
    (lambda: Parameter.integer("Bad Name!", "three"), TypeError,
     r"^Parameter 'Bad Name!' has 2 problems:\n  - name must hold only letters, digits, '-' and '_', got 'Bad Name!'\n  - default \(Integer\) must be an int, got str 'three'$"),
    (lambda: Parameter.integer("Epochs", 3.0), TypeError, r"^Parameter 'Epochs': default \(Integer\) must be an int, got float 3.0$"),
    (lambda: Parameter.integer("Epochs", 2**60), ValueError, r"^Parameter 'Epochs': default \(Integer\) must be within ±9007199254740991"),
    (lambda: Parameter.float("Lr", float("nan")), ValueError, r"^Parameter 'Lr': default \(Float\) must be a finite number, got nan$"),
    (lambda: Parameter.float("Lr", "0.1"), TypeError, r"^Parameter 'Lr': default \(Float\) must be a float, got str '0.1'$"),
    (lambda: Parameter.boolean("Debug", "false"), TypeError, r"^Parameter 'Debug': default \(Boolean\) must be a bool, got str 'false'$"),
    (lambda: Parameter.string("", "x"), ValueError, r"^Parameter '': name must be at least 1 character, got ''$"),
    (lambda: Parameter("Lr", "Float", 0.1), TypeError, r"^Parameter 'Lr': type must be a ParameterType, got str 'Float'$"),
    (lambda: InputChannel("train", 3), TypeError, r"^InputChannel: s3_uri must be a str or Parameter, got int 3$"),
    (lambda: InputChannel("train", "s3://d/t/", sharded="yes"), TypeError, r"^InputChannel: sharded must be a bool, got str 'yes'$"),
    (lambda: Framework.pytorch(1.13), TypeError, r"^Framework.pytorch: version must be a str, got float 1.13$"),
    (lambda: Framework.huggingface("4.21.1", pytorch_version=None), TypeError, r"^Framework.huggingface: pytorch_version must be a str, got NoneType None$"),
    (lambda: Framework.xgboost(1), TypeError, r"^Framework.xgboost: version must be a str, got int 1$"),
    (lambda: Compiler.training_compiler(debug="no"), TypeError, r"^Compiler.training_compiler: debug must be a bool, got str 'no'$"),
    (lambda: Compiler.torch_compile(mode=None), TypeError, r"^Compiler.torch_compile: mode must be a str, got NoneType None$"),
    (lambda: Compiler.auto({"name": "bert"}), TypeError, r"^Compiler.auto: profile must be WorkloadProfile, got dict"),
])
def test_fails_on_a_wrong_type_for_a_factory(factory, kind, message):
    with pytest.raises(kind, match=message):
        factory()


def test_fails_on_nan_in_python_and_the_jsii_kernel_lives_on(source_dir):
    # Parameter.float("Lr", nan) used to reach jsii as JSON NaN and stop its Node process.
    with pytest.raises(ValueError, match=r"must be a finite number, got nan"):
        _pipeline(source_dir, hyperparameters={"lr": Parameter.float("Lr", float("nan"))})
    stack = new_stack()
    _pipeline(source_dir, stack, hyperparameters={"lr": Parameter.float("Lr", 0.001)})
    assert cdk.assertions.Template.from_stack(stack).find_resources("AWS::SageMaker::Pipeline")


def test_accepts_imported_resources_for_interface_props(source_dir):
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Key", "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab")
    bucket = s3.Bucket.from_bucket_name(stack, "Bucket", "team-outputs")
    pipeline = _pipeline(source_dir, stack, kms_key=key, output_bucket=bucket,
                         distribution=Distribution.PYTORCHXLA, instance_count=2)
    assert pipeline.bucket is bucket
    assert Parameter("Lr", ParameterType.FLOAT, 1).default == 1  # an int is a float here


def test_fails_on_a_wrong_type_in_cdk_json_naming_team_and_key(tmp_path):
    context = cdk_json_context()
    context["compiled-training:teams"]["Creative"]["hyperparameters"] = {"layers": [1, 2]}
    with pytest.raises(TypeError, match=r"^cdk.json compiled-training:teams.Creative: TrainingPipeline Creative/Pipeline: hyperparameters\['layers'\] must be a str or an int or a float or a bool or Parameter, got list \[1, 2\]$"):
        synth_reference_app(tmp_path, context)


# Plain data from JSON or YAML (cdk.json's teams, the CLI's workload files): one validator.
_ENTRY_HINTS = {"name": str, "count": int, "hours": float, "spot": bool, "tags": dict,
                "version": str | None}


def test_a_plain_entry_of_the_right_types_passes():
    check_entry({"name": "bert", "count": 2, "hours": 3, "spot": False, "tags": {},
                 "version": None}, _ENTRY_HINTS, "team", required=("name",))


@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "bert", "count": True}, r"^team: count must be an int, got bool True$"),
    ({"name": "bert", "spot": 1}, r"^team: spot must be a bool, got int 1$"),
    ({"name": "bert", "hours": float("nan")}, r"^team: hours must be a finite number, got nan$"),
    ({"name": "bert", "version": 2.1}, r"^team: version must be a str or None, got float 2.1$"),
    ({"name": "bert", "gpus": 8}, r"^team: gpus is not a known key; allowed: name, count, "),
    ({"count": 1}, r"^team: name is required$"),
    ({"tags": {}}, r"^team: name, count are required$"),
    ("bert", r"^team: the entry must be a mapping of keys to values, got str 'bert'$"),
    ({"name": 1, "gpus": 8}, r"^team has 2 problems:\n  - name must be a str, got int 1\n  - gpus "),
])
def test_a_plain_entry_fails_naming_each_key_and_what_it_must_be(entry, message):
    with pytest.raises(ValueError, match=message):
        check_entry(entry, _ENTRY_HINTS, "team",
                    required=("name", "count") if "tags" in entry else ("name",))


def test_a_nested_entry_names_its_path_and_a_command_line_gets_one_line():
    with pytest.raises(KeyError, match=r"team: schedule.cron is not a known key; allowed: name"):
        check_entry({"cron": 1}, {"name": str}, "team", where="schedule.", error=KeyError)
    with pytest.raises(ValueError) as raised:
        check_entry({"name": 1, "gpus": 8}, _ENTRY_HINTS, "w.yaml", one_line=True)
    assert "\n" not in str(raised.value) and "; gpus is not a known key" in str(raised.value)
