"""Every notification path delivers: each alarm action and rule target reaches its topic, and
the topic's and its key's policies, read as AWS evaluates them (tests/delivery.py), let the
sender publish."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template

from compiled_training import Compiler, Framework, RetrainingSchedule, TrainingPipeline
from tests.delivery import refusals, senders
from tests.helpers import REGION, new_stack, templates


def test_every_notification_path_of_the_reference_platform_delivers(reference_assembly):
    paths = {name: list(senders(template))
             for name, template in templates(reference_assembly).items()}
    # Per team: the dead-letter alarm, the failed-executions alarm, the status rule, and
    # where the team registers its model, the model-version rule.
    assert {name: len(found) for name, found in paths.items()} == {
        "Creative": 3, "DocumentClassification": 4, "Tabular": 4}
    for name, template in templates(reference_assembly).items():
        assert refusals(template) == [], name


def test_the_reader_refuses_what_aws_refuses():
    # What the first release synthesized: a topic whose only policy statement is the one CDK's
    # SnsTopic target adds for EventBridge; the alarm publishes as CloudWatch.
    stack = new_stack("Old", env=None)
    key = kms.Key(stack, "Key")
    topic = sns.Topic(stack, "Topic", master_key=key)
    alarm = cloudwatch.Alarm(stack, "Alarm", metric=cloudwatch.Metric(
        namespace="N", metric_name="M"), threshold=1, evaluation_periods=1)
    alarm.add_alarm_action(cloudwatch_actions.SnsAction(topic))
    events.Rule(stack, "Rule", event_pattern=events.EventPattern(source=["aws.sagemaker"]),
                targets=[events_targets.SnsTopic(topic)])
    (problem,) = refusals(Template.from_stack(stack).to_json())
    # CDK's target grants EventBridge the topic and the key; nothing grants CloudWatch.
    assert problem.startswith("alarm Alarm")
    assert "not authorized to perform: SNS:Publish" in problem


def _schedule(stack: cdk.Stack, source_dir, topic: sns.ITopic | None = None) -> None:
    pipeline = TrainingPipeline(stack, "Pipeline", framework=Framework.pytorch("2.3.0"),
                                compiler=Compiler.torch_compile(),
                                instance_type="ml.g5.xlarge", source_dir=source_dir,
                                entry_point="train.py")
    RetrainingSchedule(stack, "Retrain", pipeline=pipeline, team="nlp",
                       expression="rate(1 day)", topic=topic)


def test_publishing_is_allowed_only_to_this_schedules_rule_and_alarms(source_dir):
    stack = new_stack("Nlp", env=None)
    _schedule(stack, source_dir)
    template = Template.from_stack(stack)
    for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
        template.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {
            "Statement": Match.array_with([Match.object_like({
                "Effect": "Allow", "Principal": {"Service": service},
                "Action": "sns:Publish",
                "Condition": {"ArnEquals": {"aws:SourceArn": Match.any_value()}},
            })])}})
    statements = [s for r in template.find_resources("AWS::SNS::TopicPolicy").values()
                  for s in r["Properties"]["PolicyDocument"]["Statement"]
                  if s["Effect"] == "Allow"]
    assert all("Condition" in s for s in statements)  # no unconditioned publisher
    assert refusals(template.to_json()) == []


def test_an_imported_topic_draws_a_warning_naming_what_its_policy_needs(source_dir):
    stack = new_stack("Nlp", env=cdk.Environment(region=REGION))
    topic = sns.Topic.from_topic_arn(stack, "OnCall",
                                     "arn:aws:sns:us-east-1:123456789012:on-call")
    _schedule(stack, source_dir, topic)
    Annotations.from_stack(stack).has_warning(
        "/Nlp/Retrain", Match.string_like_regexp(
            "the given topic's policy must let events.amazonaws.com publish"))
