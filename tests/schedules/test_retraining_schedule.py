"""RetrainingSchedule: schedule, retries, dead letters, alarms and notifications."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

from compiled_training import (
    CompiledTrainingChecks,
    Compiler,
    Framework,
    InputChannel,
    Parameter,
    TrainingPipeline,
)
from compiled_training.schedules.retraining_schedule import RetrainingSchedule, group_name
from tests.delivery import refusals, senders
from tests.helpers import new_stack


def _pipeline(stack: cdk.Stack, source_dir) -> TrainingPipeline:
    return TrainingPipeline(
        stack, "Bert", framework=Framework.pytorch("1.13.1"),
        compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
        source_dir=source_dir, entry_point="train.py",
        hyperparameters={"epochs": Parameter.integer("Epochs", 3),
                         "warmup": Parameter.float("WarmupRatio", 0.1),
                         "tag": Parameter.string("RunTag", "nightly")},
        channels=[InputChannel("train", Parameter.string("TrainDataUri",
                                                         "s3://nlp-data/bert/train/"))],
    )


def _schedule(source_dir, stack_name="Team", **overrides):
    stack = new_stack(stack_name)
    pipeline = _pipeline(stack, source_dir)
    props = {"pipeline": pipeline, "team": "nlp", "expression": "cron(0 1 ? * MON,WED,FRI *)",
             "time_zone": cdk.TimeZone.EUROPE_BERLIN}
    props.update(overrides)
    schedule = RetrainingSchedule(stack, "Retrain", **props)
    return stack, pipeline, schedule


def test_schedule_starts_the_pipeline_with_retries_dead_letters_and_overrides(source_dir):
    stack, pipeline, _ = _schedule(source_dir, parameters={"Epochs": 4, "WarmupRatio": 0.2},
                                   flexible_window=cdk.Duration.minutes(30))
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Scheduler::Schedule", {
        "ScheduleExpression": "cron(0 1 ? * MON,WED,FRI *)",
        "ScheduleExpressionTimezone": "Europe/Berlin",
        "FlexibleTimeWindow": {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 30},
        "GroupName": "Team-nlp-retraining",
        "State": "ENABLED",
        "Target": Match.object_like({
            "RetryPolicy": {"MaximumEventAgeInSeconds": 21600, "MaximumRetryAttempts": 3},
            "DeadLetterConfig": {"Arn": Match.any_value()},
            "SageMakerPipelineParameters": {"PipelineParameterList": [
                {"Name": "Epochs", "Value": "4"}, {"Name": "WarmupRatio", "Value": "0.2"}]},
        }),
    })
    template.has_resource("AWS::Scheduler::Schedule", {"DependsOn": Match.any_value()})
    template.has_resource_properties("AWS::SQS::Queue", {
        "SqsManagedSseEnabled": True, "MessageRetentionPeriod": 1209600})


def test_dead_letters_and_failed_executions_raise_alarms_to_the_topic(source_dir):
    stack, pipeline, _ = _schedule(source_dir)
    template = Template.from_stack(stack)
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    metrics = {a["Properties"]["MetricName"]: a["Properties"] for a in alarms.values()}
    assert set(metrics) == {"ApproximateNumberOfMessagesVisible", "ExecutionFailed"}
    assert metrics["ExecutionFailed"]["Dimensions"] == [
        {"Name": "PipelineName", "Value": pipeline.pipeline_name}]
    for alarm in metrics.values():
        assert alarm["Threshold"] == 1
        (action,) = alarm["AlarmActions"]
        assert action["Ref"].startswith("RetrainTopic")
    template.has_resource_properties("AWS::SNS::Topic", {
        "KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_status_rule_reports_failed_and_stopped_runs_with_team_pipeline_execution_and_link(source_dir):
    stack, pipeline, _ = _schedule(source_dir)
    (rule,) = Template.from_stack(stack).find_resources("AWS::Events::Rule").values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.sagemaker"]
    assert pattern["detail"]["currentPipelineExecutionStatus"] == ["Failed", "Stopped"]
    template_text = rule["Properties"]["Targets"][0]["InputTransformer"]["InputTemplate"]
    assert "Team nlp" in template_text
    assert pipeline.pipeline_name in template_text
    assert "<detail-pipelineExecutionArn>" in template_text
    assert "https://console.aws.amazon.com/sagemaker/home?region=<region>" in template_text


def test_success_can_be_reported_too(source_dir):
    stack, _, _ = _schedule(source_dir, notify_on_success=True)
    (rule,) = Template.from_stack(stack).find_resources("AWS::Events::Rule").values()
    assert "Succeeded" in rule["Properties"]["EventPattern"]["detail"]["currentPipelineExecutionStatus"]


def test_a_given_topic_is_used_and_no_key_is_created(source_dir):
    stack = new_stack(env=None)
    topic = sns.Topic(stack, "OnCall")
    RetrainingSchedule(stack, "Retrain", pipeline=_pipeline(stack, source_dir), team="nlp",
                       expression="rate(1 day)", topic=topic)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Topic", 1)
    template.resource_count_is("AWS::KMS::Key", 0)


def test_schedules_of_a_team_share_one_group(source_dir):
    stack, pipeline, _ = _schedule(source_dir)
    RetrainingSchedule(stack, "Weekly", pipeline=pipeline, team="nlp",
                       expression="cron(0 3 ? * SUN *)")
    Template.from_stack(stack).resource_count_is("AWS::Scheduler::ScheduleGroup", 1)


def test_two_stacks_of_one_team_get_two_groups_deleted_with_their_stacks(source_dir):
    # WHEN the same team deploys two stacks (an account and region hold one group per name)
    names = []
    for stack_name in ("NlpTraining", "NlpExperiments"):
        stack, _, _ = _schedule(source_dir, stack_name=stack_name)
        (group,) = Template.from_stack(stack).find_resources(
            "AWS::Scheduler::ScheduleGroup").values()
        names.append(group["Properties"]["Name"])
        # THEN a group holds no data: it goes with its stack, no retained one blocks a redeploy
        assert group["DeletionPolicy"] == "Delete"
    assert names == ["NlpTraining-nlp-retraining", "NlpExperiments-nlp-retraining"]


def test_a_long_group_name_stays_within_the_api_limit_and_unique():
    long_stack = "S" * 128
    first, second = group_name(long_stack, "a" * 40), group_name(long_stack, "b" * 40)
    assert len(first) == len(second) == 64 and first != second
    assert group_name("Team", "nlp") == "Team-nlp-retraining"


def test_a_passed_end_date_draws_a_warning_and_leaves_the_template_alone(source_dir):
    passed, _, _ = _schedule(source_dir, end_date=datetime(2020, 1, 1, tzinfo=timezone.utc))
    future, _, _ = _schedule(source_dir, end_date=datetime(2199, 1, 1, tzinfo=timezone.utc))
    Annotations.from_stack(passed).has_warning("/Team/Retrain", Match.string_like_regexp(
        r"end_date 2020-01-01T00:00:00\+00:00 has passed: the schedule would never start"))
    Annotations.from_stack(future).has_no_warning("/Team/Retrain", Match.any_value())


def test_a_data_uri_override_under_the_readable_prefix_passes(source_dir):
    stack, _, _ = _schedule(source_dir, parameters={"TrainDataUri": "s3://nlp-data/bert/train/2026/"})
    Template.from_stack(stack).has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"SageMakerPipelineParameters": {"PipelineParameterList": [
            {"Name": "TrainDataUri", "Value": "s3://nlp-data/bert/train/2026/"}]}})})


@pytest.mark.parametrize(("overrides", "message"), [
    ({"expression": "cron(0 1 * * MON *)"}, r"exactly one of day-of-month and day-of-week to '\?'"),
    ({"expression": "cron(0 25 ? * MON *)"}, r"hours value must be within 0-23, got '25'"),
    ({"expression": "cron(0 1 ? * MON)"}, r"must have six fields"),
    ({"expression": "0 1 * * *"}, r"must start with cron\(, rate\( or at\("),
    ({"expression": "rate(2 hour)"}, r"singular unit for 1 and the plural otherwise"),
    ({"parameters": {"Epoch": 4}}, r"parameter 'Epoch' is not declared by pipeline .* \(declared: Epochs, RunTag, TrainDataUri, WarmupRatio\)"),
    ({"parameters": {"Epochs": "four"}}, r"parameter 'Epochs' is Integer, got str 'four'"),
    ({"parameters": {"Epochs": True}}, r"parameter 'Epochs' is Integer, got bool True"),
    ({"parameters": {f"P{i}": 1 for i in range(201)}}, r"at most 200 pipeline parameters, got 201"),
    ({"team": "nlp team"}, r"team must be 1-40 letters"),
    ({"retry_attempts": 200}, r"retry_attempts must be 0-185, got 200"),
    ({"flexible_window": cdk.Duration.hours(25)}, r"flexible_window must be 1 to 1440 minutes"),
    ({"start_date": datetime(2027, 1, 1, tzinfo=timezone.utc),
      "end_date": datetime(2026, 1, 1, tzinfo=timezone.utc)}, r"end_date .* must be after start_date"),
    ({"expression": "cron(0 \uff12 * * ? *)"},
     r"schedule expression must be ASCII \(digits 0-9\), got '\uff12' in 'cron\(0 \uff12 \* \* \? \*\)'"),
    ({"expression": "cron(" + ",".join(["1"] * 130) + " 2 * * ? *)"},
     r"schedule expression must be at most 256 characters, got 275"),
    ({"time_zone": cdk.TimeZone.of("Mars/Olympus")},
     r"time_zone must be an IANA time zone such as 'Europe/Berlin', got 'Mars/Olympus'"),
    ({"parameters": {"RunTag": ""}}, r"parameter 'RunTag' must be 1-1,024 characters as text, got 0"),
    ({"parameters": {"RunTag": "x" * 1025}},
     r"parameter 'RunTag' must be 1-1,024 characters as text, got 1,025"),
    # Refused at the boundary (typecheck), before it could reach jsii.
    ({"parameters": {"WarmupRatio": float("nan")}}, r"RetrainingSchedule Team/Retrain: parameters\['WarmupRatio'\] must be a finite number, got nan"),
    ({"parameters": {"TrainDataUri": "s3://other-team/bert/train/"}},
     r"parameter 'TrainDataUri' is channel 'train'\'s data URI: the execution role may read under "
     r"s3://nlp-data/bert/train/ only, got 's3://other-team/bert/train/'"),
])
def test_fails_before_cloudformation_with_a_clear_message(source_dir, overrides, message):
    with pytest.raises(ValueError, match=message):
        _schedule(source_dir, **overrides)


# --- any aws_sagemaker.IPipeline: one the SageMaker SDK made, imported by name ---------------

def _imported_schedule(app: cdk.App, **overrides):
    stack = new_stack(app=app)
    # A pipeline the SageMaker SDK's Pipeline.upsert() created: only its name is known here.
    pipeline = TrainingPipeline.from_pipeline_name(stack, "SdkPipeline", "Churn-Nightly")
    schedule = RetrainingSchedule(stack, "Retrain", pipeline=pipeline, team="nlp",
                                  expression="rate(1 day)", **overrides)
    return stack, pipeline, schedule


def test_an_imported_pipeline_is_scheduled_alarmed_and_reported_on_its_arn(tmp_path):
    # GIVEN cdk-nag and the library's rule pack on the app
    app = cdk.App(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
    stack, pipeline, _ = _imported_schedule(app)
    assembly = app.synth()  # raises on any unacknowledged finding
    template = Template.from_stack(stack)
    arn = ("arn:", {"Ref": "AWS::Partition"},
           ":sagemaker:us-east-1:123456789012:pipeline/churn-nightly")
    # THEN the schedule starts it, and its role may start this pipeline only
    template.has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"Arn": {"Fn::Join": ["", list(arn)]}})})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": [
        Match.object_like({"Action": "sagemaker:StartPipelineExecution",
                           "Resource": {"Fn::Join": ["", list(arn)]}}),
        Match.any_value()]}})
    # the status rule matches its ARN, the alarm its name
    (rule,) = template.find_resources("AWS::Events::Rule").values()
    assert rule["Properties"]["EventPattern"]["detail"]["pipelineArn"] == [
        {"Fn::Join": ["", list(arn)]}]
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ExecutionFailed",
        "Dimensions": [{"Name": "PipelineName", "Value": "Churn-Nightly"}]})
    # and every alarm and rule reaches the team's topic, as AWS evaluates the policies
    assert len(list(senders(template.to_json()))) == 3
    assert refusals(template.to_json()) == []
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    conclusions = {p["pluginName"]: p["conclusion"] for p in report["pluginReports"]}
    # (the library's rule pack reports only where it finds a pipeline of its own)
    assert conclusions.get("AwsSolutions") == "success"
    assert set(conclusions.values()) == {"success"}


def test_overrides_for_an_imported_pipeline_pass_through_with_a_warning(tmp_path):
    stack, _, _ = _imported_schedule(cdk.App(), parameters={"Epochs": 4, "Tag": "nightly"})
    Template.from_stack(stack).has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"SageMakerPipelineParameters": {"PipelineParameterList": [
            {"Name": "Epochs", "Value": "4"}, {"Name": "Tag", "Value": "nightly"}]}})})
    Annotations.from_stack(stack).has_warning("/Team/Retrain", Match.string_like_regexp(
        r"pipeline Churn-Nightly is not this library's, so Epochs, Tag go unchecked"))


def test_fails_on_an_override_scheduler_cannot_pass_even_for_an_imported_pipeline():
    with pytest.raises(ValueError, match=r"RetrainingSchedule Team/Retrain: parameter 'Tag' "
                                         r"must be 1-1,024 characters as text, got 0$"):
        _imported_schedule(cdk.App(), parameters={"Tag": ""})


def test_fails_on_a_pipeline_that_is_no_ipipeline():
    with pytest.raises(TypeError, match=r"RetrainingSchedule Team/Retrain: pipeline must be "
                                        r"aws_sagemaker.IPipeline, got str 'Churn-Nightly'"):
        stack = new_stack(env=None)
        RetrainingSchedule(stack, "Retrain", pipeline="Churn-Nightly",  # type: ignore[arg-type]
                           team="nlp", expression="rate(1 day)")


def test_the_named_defaults_are_what_the_constructor_says():
    from compiled_training.schedules import retraining_schedule

    said = " ".join((RetrainingSchedule.__init__.__doc__ or "").split())
    assert f"when omitted, {retraining_schedule.DEFAULT_RETRY_ATTEMPTS} retries" in said
    assert f"when omitted, {retraining_schedule.DEFAULT_MAX_EVENT_AGE_HOURS} hours" in said
