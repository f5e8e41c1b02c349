"""`RetrainingSchedule`: recurring retraining an on-call team can trust.

An EventBridge Scheduler schedule starts the pipeline, with retries and an encrypted
dead-letter queue (alarmed); an EventBridge rule reports the pipeline's failed and stopped
executions to an SNS topic, and an alarm watches the failed-execution metric. A pipeline that
registers its model gets a second rule: each new version and approval change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import cast

import jsii
from aws_cdk import Annotations, Duration, RemovalPolicy, Stack, TimeZone
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs

from compiled_training.pipelines.base import PipelineBase
from compiled_training.pipelines.named_pipeline import pipeline_metric
from compiled_training.schedules.limits import check_schedule
from compiled_training.typecheck import check_arguments
from compiled_training.values.job import ParameterType
from compiled_training.wiring.acknowledgements import acknowledge, skip_checkov
from compiled_training.wiring.policy import ImmutableRoleWarning, InlinePolicy, attached_policy
from compiled_training.wiring.stack_reads import free_id
from constructs import Construct

# EventBridge Scheduler's SageMakerPipelineParameters: at most 200 entries, each value
# 1-1,024 characters; CreateScheduleGroup's Name: 1-64 characters.
MAX_PIPELINE_PARAMETERS = 200
MAX_PARAMETER_VALUE_LENGTH = 1024
MAX_GROUP_NAME_LENGTH = 64
# This construct's defaults, which its docs state.
DEFAULT_RETRY_ATTEMPTS = 3
DEFAULT_MAX_EVENT_AGE_HOURS = 6
EXECUTION_STATUSES = ("Failed", "Stopped")
_PYTHON_TYPES: dict[ParameterType, tuple[type, ...]] = {
    ParameterType.STRING: (str,),
    ParameterType.INTEGER: (int,),
    ParameterType.FLOAT: (int, float),
    ParameterType.BOOLEAN: (bool,),
}


class RetrainingSchedule(Construct):
    """Starts a SageMaker pipeline on a schedule and tells the team when a run fails: a
    `TrainingPipeline`, a `CompilerBenchmark`, or any other ``aws_sagemaker.IPipeline`` (one
    the SageMaker SDK made, imported with ``TrainingPipeline.from_pipeline_name``)."""

    pipeline: sagemaker.IPipeline
    team: str
    expression: str
    topic: sns.ITopic
    """Where failures (and, if asked, successes and model versions) are reported."""
    dead_letter_queue: sqs.Queue
    schedule: scheduler.Schedule
    dead_letter_alarm: cloudwatch.Alarm
    failed_executions_alarm: cloudwatch.Alarm
    status_rule: events.Rule
    model_rule: events.Rule | None
    """Registered model versions and approval changes; None for a pipeline that registers
    none."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: sagemaker.IPipeline,
        team: str,
        expression: str,
        time_zone: TimeZone | None = None,
        flexible_window: Duration | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        enabled: bool | None = None,
        parameters: Mapping[str, str | int | float | bool] | None = None,
        retry_attempts: int | None = None,
        max_event_age: Duration | None = None,
        topic: sns.ITopic | None = None,
        notify_on_success: bool | None = None,
        role: iam.IRole | None = None,
    ) -> None:
        """
        :param pipeline: the pipeline to start; its ``pipeline_arn`` is what the status rule
            matches, its name what the failed-executions alarm watches.
        :param team: names the schedule group (one per team and stack, named after both, so
            that two stacks of one team never collide; deleted with the stack: it holds no
            data) and every message.
        :param expression: exactly one schedule: ``cron(...)`` (six fields, EventBridge's
            rules), ``rate(...)`` or one-time ``at(...)``; checked at synth.
        :param time_zone: an IANA time zone (``TimeZone.EUROPE_BERLIN``, ``TimeZone.of(
            "Europe/Berlin")``); when omitted, UTC.
        :param flexible_window: when omitted, the schedule starts on time (no window).
        :param start_date: when omitted, the schedule starts now.
        :param end_date: when omitted, it never ends. It must be after ``start_date``; one that
            has already passed when the app is synthesized draws a warning (the schedule would
            never fire), not an error, so that the same code synthesizes on any day.
        :param enabled: when omitted, enabled.
        :param parameters: pipeline parameter overrides, each 1-1,024 characters once written
            as text. For a `TrainingPipeline` or `CompilerBenchmark`, each must also be a
            parameter the pipeline declares, with a finite value of its type, and one the
            pipeline's roles can follow (a channel's data URI under the prefix its execution
            role may read); another pipeline's parameters are not known here, so they are
            passed as given, with a warning. When omitted, the defaults run.
        :param retry_attempts: when omitted, 3 retries of a failed start.
        :param max_event_age: when omitted, 6 hours; older starts go to the dead-letter queue.
        :param topic: when omitted, an SNS topic encrypted with a new customer-managed key.
        :param notify_on_success: when omitted, only failed and stopped runs are reported.
        :param role: the role EventBridge Scheduler starts the pipeline as; when omitted,
            aws-cdk-lib's one role for the stack's SageMaker schedule targets. Given, as
            aws-cdk-lib's constructs take one: a role made in the app or imported mutable gets
            the grants (start this pipeline, send to this schedule's dead-letter queue); an
            imported, immutable one gets nothing, and a warning lists the statements to grant
            it. It must trust scheduler.amazonaws.com.
        """
        check_arguments(RetrainingSchedule.__init__, locals(), whole_minutes=["flexible_window"])
        free_id(scope, construct_id, "RetrainingSchedule")
        super().__init__(scope, construct_id)
        where = f"RetrainingSchedule {self.node.path}"
        attempts = DEFAULT_RETRY_ATTEMPTS if retry_attempts is None else retry_attempts
        check_schedule(where, team, expression, time_zone, start_date, end_date,
                       flexible_window, max_event_age, attempts)
        overrides = _checked_parameters(where, pipeline, parameters or {})
        self._warn(pipeline, overrides, end_date)

        self.pipeline = pipeline
        if isinstance(pipeline, PipelineBase):
            pipeline.mark_scheduled(self.node.path)
        self.team = team
        self.expression = expression
        self.topic = topic or self._topic()
        self.dead_letter_queue = self._dead_letter_queue()
        group = _team_group(self, team)
        self.schedule = scheduler.Schedule(
            self,
            "Resource",
            schedule=scheduler.ScheduleExpression.expression(expression, time_zone),
            schedule_group=group,
            description=f"Retrains {pipeline.pipeline_name} for team {team}",
            enabled=enabled is not False,
            start=start_date,
            end=end_date,
            time_window=scheduler.TimeWindow.flexible(flexible_window)
            if flexible_window
            else scheduler.TimeWindow.off(),
            target=scheduler_targets.SageMakerStartPipelineExecution(
                pipeline,
                pipeline_parameter_list=[
                    scheduler_targets.SageMakerPipelineParameter(name=k, value=v)
                    for k, v in overrides.items()
                ] or None,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=attempts,
                max_event_age=max_event_age or Duration.hours(DEFAULT_MAX_EVENT_AGE_HOURS),
                role=role,
            ),
        )
        if role is not None and attached_policy(role) is None:
            # The target's grants (aws-cdk-lib's SageMakerStartPipelineExecution) went nowhere:
            # an immutable role takes them silently, so the warning lists them.
            listed = InlinePolicy()
            listed.allow(["sagemaker:StartPipelineExecution"], [pipeline.pipeline_arn])
            listed.allow(["sqs:SendMessage"], [self.dead_letter_queue.queue_arn])
            self.node.add_validation(ImmutableRoleWarning(self, "role", role, listed.statements))
        # The group is referenced by its literal name, which makes no dependency by itself.
        self.schedule.node.add_dependency(group)
        self._report(notify_on_success)

    def _warn(self, pipeline: sagemaker.IPipeline, overrides: Mapping[str, str],
              end_date: datetime | None) -> None:
        """Warnings about what synth cannot check: another pipeline's parameters, a past end."""
        if overrides and not isinstance(pipeline, PipelineBase):
            Annotations.of(self).add_warning_v2(
                "compiled-training:RetrainingSchedule:UncheckedParameters",
                f"pipeline {pipeline.pipeline_name} is not this library's, so "
                f"{', '.join(sorted(overrides))} go unchecked: a name it lacks or a wrong type "
                "fails each scheduled start")
        if end_date is not None and end_date.tzinfo is not None and end_date <= datetime.now(
                timezone.utc):
            # The synth clock decides only this warning, never the template.
            Annotations.of(self).add_warning_v2(
                "compiled-training:RetrainingSchedule:EndDatePassed",
                f"end_date {end_date.isoformat()} has passed: the schedule would never start "
                f"{pipeline.pipeline_name}; move end_date or remove the schedule")

    def _report(self, notify_on_success: bool | None) -> None:
        """The alarms and rules that tell the team, and the topic's leave to tell it."""
        team, pipeline = self.team, self.pipeline
        self.dead_letter_alarm = _alarm(
            self, "DeadLetterAlarm",
            f"Team {team}: a scheduled start of {pipeline.pipeline_name} was dropped into the "
            "dead-letter queue",
            self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"))
        self.failed_executions_alarm = _alarm(
            self, "FailedExecutionsAlarm",
            f"Team {team}: SageMaker pipeline {pipeline.pipeline_name} has failed executions",
            pipeline_metric(pipeline, "ExecutionFailed", period=Duration.minutes(5)))
        alarms = (self.dead_letter_alarm, self.failed_executions_alarm)
        for alarm in alarms:
            alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.topic))
        statuses = [*EXECUTION_STATUSES, *(["Succeeded"] if notify_on_success else [])]
        self.status_rule = events.Rule(
            self,
            "StatusRule",
            description=f"Team {team}: {', '.join(statuses)} executions of "
                        f"{pipeline.pipeline_name}",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=["SageMaker Model Building Pipeline Execution Status Change"],
                detail={
                    "pipelineArn": [pipeline.pipeline_arn],
                    "currentPipelineExecutionStatus": statuses,
                },
            ),
            targets=[cast(events.IRuleTarget, _TopicTarget(self.topic, _message(team, pipeline)))],
        )
        rules = [self.status_rule]
        self.model_rule = self._model_rule(team, pipeline)
        if self.model_rule is not None:
            rules.append(self.model_rule)
        # A topic policy replaces SNS's default one: each sender needs its own statement.
        self._allow_publish("events.amazonaws.com", [rule.rule_arn for rule in rules])
        self._allow_publish("cloudwatch.amazonaws.com", [alarm.alarm_arn for alarm in alarms])

    def _model_rule(self, team: str, pipeline: sagemaker.IPipeline) -> events.Rule | None:
        """A registered model version, and each change of its approval, reaches the team."""
        registration = getattr(pipeline, "registration", None)  # TrainingPipeline's
        if registration is None:
            return None
        group = registration.registration.group_name
        package = events.EventField.from_path("$.detail.ModelPackageArn")
        status = events.EventField.from_path("$.detail.ModelApprovalStatus")
        value = events.EventField.from_path("$.detail.CustomerMetadataProperties.gate_value")
        metric = events.EventField.from_path("$.detail.CustomerMetadataProperties.gate_metric")
        region = events.EventField.from_path("$.region")
        console = (f"https://console.aws.amazon.com/sagemaker/home?region={region}"
                   f"#/model-registry/{group}")
        message = events.RuleTargetInput.from_text(
            f"Team {team}: model version {package} of group {group} is {status} "
            f"({metric} {value}). Console: {console}")
        return events.Rule(
            self, "ModelRule",
            description=f"Team {team}: versions and approvals in model package group {group}",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=["SageMaker Model Package State Change"],
                detail={"ModelPackageGroupName": [group]},
            ),
            targets=[cast(events.IRuleTarget, _TopicTarget(self.topic, message))],
        )

    def _allow_publish(self, service: str, sources: list[str]) -> None:
        """Lets ``service`` publish to the topic on behalf of ``sources`` (and nothing else)."""
        added = self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid=f"{service.split('.')[0].capitalize()}Publish",
            principals=[iam.ServicePrincipal(service)],
            actions=["sns:Publish"],
            resources=[self.topic.topic_arn],
            conditions={"ArnEquals": {"aws:SourceArn": sources}},
        )).statement_added
        if not added:  # an imported topic: its policy is not this stack's to change
            Annotations.of(self).add_warning_v2(
                "compiled-training:RetrainingSchedule:TopicPolicy",
                f"the given topic's policy must let {service} publish (sns:Publish, "
                f"aws:SourceArn of this schedule's {'rule' if 'events' in service else 'alarms'}"
                "), and its key let it use kms:Decrypt and kms:GenerateDataKey*, or the team "
                "is never told")

    def _topic(self) -> sns.Topic:
        # A customer-managed key: EventBridge and CloudWatch cannot publish to a topic
        # encrypted with the AWS-managed SNS key.
        key = kms.Key(self, "TopicKey", enable_key_rotation=True,
                      description=f"Encrypts retraining notifications of team {self.team}")
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
            key.grant(iam.ServicePrincipal(service), "kms:Decrypt", "kms:GenerateDataKey*")
        return sns.Topic(self, "Topic", master_key=key, enforce_ssl=True,
                         display_name=f"{self.team} retraining")

    def _dead_letter_queue(self) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(queue, "AwsSolutions-SQS3",
                    "This queue is itself the dead-letter queue of the schedule's target.")
        skip_checkov(queue, {"CKV_AWS_27": "Encrypted at rest with SQS-managed keys (SSE-SQS); "
                                           "the check reads only KmsMasterKeyId."})
        return queue


def _alarm(scope: Construct, construct_id: str, description: str,
           metric: cloudwatch.IMetric) -> cloudwatch.Alarm:
    """An alarm on the first datapoint at or over one; no data is no trouble."""
    return cloudwatch.Alarm(
        scope, construct_id, alarm_description=description, metric=metric, threshold=1,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)


def _checked_parameters(
    where: str, pipeline: sagemaker.IPipeline, overrides: Mapping[str, str | int | float | bool]
) -> dict[str, str]:
    """The overrides as text, checked as far as the pipeline's parameters are known: all of
    them for this library's pipelines, only EventBridge Scheduler's limits for another."""
    if len(overrides) > MAX_PIPELINE_PARAMETERS:
        raise ValueError(f"{where}: EventBridge Scheduler passes at most "
                         f"{MAX_PIPELINE_PARAMETERS} pipeline parameters, got {len(overrides)}")
    known = pipeline if isinstance(pipeline, PipelineBase) else None
    problems = []
    for name, value in overrides.items():
        text = _text(value)
        if known is None:
            if not 1 <= len(text) <= MAX_PARAMETER_VALUE_LENGTH:
                problems.append(_length_problem(name, text))
            continue
        declared = known.parameters
        if name not in declared:
            allowed = ", ".join(sorted(declared)) or "none"
            problems.append(f"parameter {name!r} is not declared by pipeline "
                            f"{pipeline.pipeline_name} (declared: {allowed})")
            continue
        kind = declared[name].type
        is_bool = isinstance(value, bool)
        if not isinstance(value, _PYTHON_TYPES[kind]) or (is_bool and kind is not
                                                          ParameterType.BOOLEAN):
            problems.append(f"parameter {name!r} is {kind.value}, got "
                            f"{type(value).__name__} {value!r}")
        elif not 1 <= len(text) <= MAX_PARAMETER_VALUE_LENGTH:
            problems.append(_length_problem(name, text))
        elif problem := known.override_problem(name, value):
            problems.append(problem)
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    return {k: _text(v) for k, v in overrides.items()}


def _length_problem(name: str, text: str) -> str:
    return (f"parameter {name!r} must be 1-{MAX_PARAMETER_VALUE_LENGTH:,} characters as text, "
            f"got {len(text):,}")


def _text(value: str | int | float | bool) -> str:
    """A parameter value as EventBridge Scheduler passes it: text."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _team_group(scope: Construct, team: str) -> scheduler.ScheduleGroup:
    """One schedule group per team and stack, shared by the team's schedules; deleted with the
    stack (it holds no data), so that a later deploy never meets a retained one."""
    stack = Stack.of(scope)
    construct_id = f"ScheduleGroup{team}"
    existing = stack.node.try_find_child(construct_id)
    if isinstance(existing, scheduler.ScheduleGroup):
        return existing
    return scheduler.ScheduleGroup(stack, construct_id,
                                   schedule_group_name=group_name(stack.stack_name, team),
                                   removal_policy=RemovalPolicy.DESTROY)


def group_name(stack_name: str, team: str) -> str:
    """``<stack>-<team>-retraining``: stack names are unique in an account and region, so two
    stacks of one team get two groups. A longer name keeps its start and a hash of the whole."""
    name = f"{stack_name}-{team}-retraining"
    if len(name) <= MAX_GROUP_NAME_LENGTH:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:MAX_GROUP_NAME_LENGTH - len(digest) - 1]}-{digest}"


@jsii.implements(events.IRuleTarget)
class _TopicTarget:
    """The topic as the rule's target, without the unconditioned publish grant that
    ``aws_events_targets.SnsTopic`` adds: the schedule grants it conditioned on the rule."""

    def __init__(self, topic: sns.ITopic, message: events.RuleTargetInput) -> None:
        self.topic = topic
        self.message = message

    def bind(self, _rule: events.IRule, _id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self.topic.topic_arn, input=self.message)


def _message(team: str, pipeline: sagemaker.IPipeline) -> events.RuleTargetInput:
    execution = events.EventField.from_path("$.detail.pipelineExecutionArn")
    status = events.EventField.from_path("$.detail.currentPipelineExecutionStatus")
    region = events.EventField.from_path("$.region")
    console = (f"https://console.aws.amazon.com/sagemaker/home?region={region}"
               f"#/pipelines/{pipeline.pipeline_name}")
    return events.RuleTargetInput.from_text(
        f"Team {team}: SageMaker pipeline {pipeline.pipeline_name} execution {execution} is "
        f"{status}. Console: {console}"
    )
