"""Bring-your-own roles: ``role``, ``pipeline_role`` and ``handler_role`` on TrainingPipeline
and CompilerBenchmark, ``role`` on RetrainingSchedule, as aws-cdk-lib's constructs take an
``IRole``. A role made in the app gets the grants; an imported, mutable one gets a policy
attached; an imported, immutable one gets nothing, and a warning lists exactly the statements
the library would have granted (held equal here to the policies of the roles it creates for
the same constructs)."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from tests.helpers import SAMPLE_ENTRY_POINT, definitions, new_stack
from tests.iam_policy import as_iam_reads
from tests.pipelines.test_compiler_benchmark import _benchmark

EXECUTION_ARN = "arn:aws:iam::123456789012:role/ml-execution"
PIPELINE_ARN = "arn:aws:iam::123456789012:role/ml-pipelines"


def _pipeline(stack: cdk.Stack, source_dir, construct_id: str = "Bert",
              **props) -> TrainingPipeline:
    return TrainingPipeline(stack, construct_id, framework=Framework.pytorch("2.9.0"),
                            compiler=Compiler.torch_compile(), instance_type="ml.g5.12xlarge",
                            source_dir=source_dir, entry_point="train.py",
                            pipeline_name=f"nlp-{construct_id.lower()}",
                            channels=[InputChannel("train", "s3://team-data/bert/train/")],
                            **props)


def _immutable(stack: cdk.Stack) -> dict:
    return {"role": iam.Role.from_role_arn(stack, "Execution", EXECUTION_ARN, mutable=False),
            "pipeline_role": iam.Role.from_role_arn(stack, "Runner", PIPELINE_ARN,
                                                     mutable=False)}


def _warned_statements(stack: cdk.Stack) -> dict[str, list[dict]]:
    """The statements each ImmutableRole warning lists, by the prop it names."""
    found = {}
    for warning in Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(
            "is imported and immutable")):
        message = warning.entry.data
        prop = message.split(" ", 1)[0]
        document = json.loads(re.search(r"this \w+ alone\): (\{.*\}) \[ack:", message)[1])
        found[prop] = document["Statement"]
    return found


def _created_statements(source_dir) -> dict[str, list[dict]]:
    """The statements of the roles the library creates for the same pipeline."""
    stack = new_stack()
    _pipeline(stack, source_dir)
    roles = Template.from_stack(stack).find_resources("AWS::IAM::Role")
    by_prop = {}
    for logical_id, role in roles.items():
        prop = "pipeline_role" if "PipelineRole" in logical_id else "role"
        by_prop[prop] = stack.resolve(role["Properties"]["Policies"][0]["PolicyDocument"]
                                      )["Statement"]
    return by_prop


def test_imported_immutable_roles_create_no_role_and_warn_with_the_statements(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, **_immutable(stack))
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::IAM::Role", 0)
    template.resource_count_is("AWS::IAM::Policy", 0)
    (pipeline,) = template.find_resources("AWS::SageMaker::Pipeline").values()
    assert pipeline["Properties"]["RoleArn"] == PIPELINE_ARN
    (definition,) = definitions(template.to_json())
    assert definition["Steps"][0]["Arguments"]["RoleArn"] == EXECUTION_ARN
    # Exactly what the library grants the roles it creates, statement for statement.
    warned, created = _warned_statements(stack), _created_statements(source_dir)
    assert sorted(warned) == ["pipeline_role", "role"]
    for prop in ("role", "pipeline_role"):
        # The one difference: the role passed is the given one, not a created one.
        expected = json.dumps([_normalized(s) for s in created[prop]], sort_keys=True)
        expected = re.sub(r'\{"Fn::GetAtt": \["BertExecutionRole[0-9A-F]+", "Arn"\]\}',
                          f'"{EXECUTION_ARN}"', expected)
        assert json.dumps(warned[prop], sort_keys=True) == expected, prop
    (passes,) = [s for s in warned["pipeline_role"] if s["Action"] == ["iam:PassRole"]]
    assert passes["Resource"] == [EXECUTION_ARN]


def _normalized(statement: dict) -> dict:
    """A created role's statement as the warning writes it (actions and resources as lists)."""
    return {key: ([value] if key in ("Action", "Resource") and not isinstance(value, list)
                  else value) for key, value in statement.items()}


def test_a_role_made_in_the_app_serves_two_pipelines_each_scoped_to_its_own(source_dir):
    app = cdk.App()
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack = new_stack(app=app)
    shared = iam.Role(stack, "SharedExecution",
                      assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    for construct_id in ("Bert", "Roberta"):
        _pipeline(stack, source_dir, construct_id, role=shared)
    template = Template.from_stack(stack)  # synthesizes: cdk-nag finds nothing unexplained
    roles = template.find_resources("AWS::IAM::Role")
    assert sum("ExecutionRole" in logical_id for logical_id in roles) == 0
    assert sum("PipelineRole" in logical_id for logical_id in roles) == 2
    (policy,) = [p for k, p in template.find_resources("AWS::IAM::Policy").items()
                 if k.startswith("SharedExecutionDefaultPolicy")]
    writes = [s for s in policy["Properties"]["PolicyDocument"]["Statement"]
              if "s3:PutObject" in s["Action"]]
    # Each pipeline's own prefix, and nothing wider.
    resources = [json.dumps(s["Resource"]) for s in writes]
    assert len(resources) == 2
    assert sorted(name for name in ("nlp-bert", "nlp-roberta") for r in resources
                  if f'"/{name}/*"' in r) == ["nlp-bert", "nlp-roberta"]
    assert Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("immutable")) == []


def test_an_imported_mutable_role_gets_a_policy_attached(source_dir):
    stack = new_stack()
    role = iam.Role.from_role_arn(stack, "Execution", EXECUTION_ARN)
    _pipeline(stack, source_dir, role=role)
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    (policy,) = policies.values()
    assert policy["Properties"]["Roles"] == ["ml-execution"]
    assert "s3:PutObject" in json.dumps(policy["Properties"]["PolicyDocument"])


def test_a_benchmark_runs_its_arms_and_comparison_as_the_given_roles(source_dir):
    stack = new_stack()
    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "train.py").write_text(SAMPLE_ENTRY_POINT)
    _benchmark(stack, source_dir, **_immutable(stack))
    template = Template.from_stack(stack)
    (definition,) = definitions(template.to_json())
    jobs = [s for s in definition["Steps"] if s["Type"] in ("Training", "Processing")]
    assert {s["Arguments"]["RoleArn"] for s in jobs} == {EXECUTION_ARN}
    (pipeline,) = template.find_resources("AWS::SageMaker::Pipeline").values()
    assert pipeline["Properties"]["RoleArn"] == PIPELINE_ARN
    assert sorted(_warned_statements(stack)) == ["pipeline_role", "role"]


def test_the_listed_statements_name_the_tags_set_on_the_stack(source_dir):
    # Written once the tag aspects have run: granting what the warning lists lets the
    # pipeline add every tag its jobs carry.
    stack = new_stack()
    cdk.Tags.of(stack).add("cost-center", "ml-42")
    _pipeline(stack, source_dir, **_immutable(stack))
    (add_tags,) = [s for s in _warned_statements(stack)["pipeline_role"]
                   if s["Action"] == ["sagemaker:AddTags"]]
    assert add_tags["Condition"]["ForAllValues:StringLike"]["aws:TagKeys"] == [
        "compiled-training:pipeline", "cost-center", "sagemaker:*"]


HANDLER_ARN = "arn:aws:iam::123456789012:role/ml-handlers"
SCHEDULER_ARN = "arn:aws:iam::123456789012:role/ml-scheduler"


def _registered_with_benchmark(stack: cdk.Stack, source_dir, **roles) -> TrainingPipeline:
    """A pipeline whose Lambda steps need every grant a handler takes: the benchmark's
    RecordDecision (its verdict parameter), and ModelMetrics (reports in a KMS-encrypted
    bucket, the benchmark's verdict read)."""
    from aws_cdk import aws_kms as kms

    from compiled_training import CompilerBenchmark, ModelRegistration

    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "train.py").write_text(SAMPLE_ENTRY_POINT)
    channels = [InputChannel("train", "s3://team-data/bert/train/"),
                InputChannel("validation", "s3://team-data/bert/validation/")]
    benchmark = CompilerBenchmark(
        stack, "Benchmark", framework=Framework.pytorch("1.13.1"),
        instance_type="ml.g5.2xlarge", source_dir=source_dir, entry_point="train.py",
        pipeline_name="bert-benchmark", channels=channels, **roles)
    return TrainingPipeline(
        stack, "Bert", framework=Framework.pytorch("1.13.1"),
        compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
        source_dir=source_dir, entry_point="train.py", pipeline_name="bert-training",
        channels=channels, kms_key=kms.Key(stack, "Key", enable_key_rotation=True),
        registration=ModelRegistration(model_package_group_name="bert-classifier",
                                       gate_threshold=0.9, benchmark=benchmark), **roles)


def test_lambda_steps_run_as_the_given_handler_role_with_every_grant_listed(source_dir):
    stack = new_stack()
    handler = iam.Role.from_role_arn(stack, "Handlers", HANDLER_ARN, mutable=False)
    _registered_with_benchmark(stack, source_dir, handler_role=handler)
    template = Template.from_stack(stack)
    functions = template.find_resources("AWS::Lambda::Function")
    assert len(functions) == 2
    assert {json.dumps(f["Properties"]["Role"]) for f in functions.values()} == {
        json.dumps(HANDLER_ARN)}
    assert not [k for k in template.find_resources("AWS::IAM::Role") if "Decision" in k
                or "ModelMetrics" in k]
    warned = {}
    for warning in Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(
            "^handler_role .* is imported and immutable")):
        document = re.search(r"alone\): (\{.*\}) \[ack:", warning.entry.data)[1]
        warned[warning.id.split("/")[2]] = json.loads(document)["Statement"]
    # Exactly what the roles the library creates for the same functions are granted, in
    # their inline policies and (the key and the verdict read) their default policies.
    created_stack = new_stack()
    _registered_with_benchmark(created_stack, source_dir)
    created = Template.from_stack(created_stack)
    roles = created.find_resources("AWS::IAM::Role")
    policies = created.find_resources("AWS::IAM::Policy")
    for owner, function in (("Benchmark", "Decision"), ("Bert", "ModelMetrics")):
        (role_id,) = [k for k in roles if k.startswith(f"{owner}{function}Role")]
        statements = list(roles[role_id]["Properties"]["Policies"][0]["PolicyDocument"][
            "Statement"])
        for policy in policies.values():
            if policy["Properties"]["Roles"] == [{"Ref": role_id}]:
                statements += policy["Properties"]["PolicyDocument"]["Statement"]
        assert as_iam_reads(warned[owner]) == as_iam_reads(statements), owner
    kms_reads = [s for s in warned["Bert"] if "kms:Decrypt" in s["Action"]]
    ssm_reads = [s for s in warned["Bert"] if "ssm:GetParameter" in s["Action"]]
    assert len(kms_reads) == len(ssm_reads) == 1


def test_a_mutable_handler_role_gets_the_grants_in_its_own_policy(source_dir):
    stack = new_stack()
    handler = iam.Role(stack, "Handlers",
                       assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    _registered_with_benchmark(stack, source_dir, handler_role=handler)
    template = Template.from_stack(stack)
    (policy,) = [p for k, p in template.find_resources("AWS::IAM::Policy").items()
                 if k.startswith("HandlersDefaultPolicy")]
    actions = json.dumps(policy["Properties"]["PolicyDocument"]["Statement"])
    for action in ("ssm:PutParameter", "ssm:GetParameter", "kms:GenerateDataKey",
                   "s3:PutObject", "logs:PutLogEvents"):
        assert action in actions, action
    assert Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("immutable")) == []


def _scheduled(stack: cdk.Stack, source_dir, role: iam.IRole):
    from compiled_training import RetrainingSchedule

    pipeline = _pipeline(stack, source_dir)
    return RetrainingSchedule(stack, "Nightly", pipeline=pipeline, team="nlp",
                              expression="cron(0 3 * * ? *)", role=role)


def test_a_schedule_starts_its_pipeline_as_the_given_role(source_dir):
    stack = new_stack()
    _scheduled(stack, source_dir, iam.Role.from_role_arn(stack, "Scheduler", SCHEDULER_ARN,
                                                         mutable=False))
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"RoleArn": SCHEDULER_ARN})})
    # No role of aws-cdk-lib's for the stack's schedule targets.
    assert sorted(template.find_resources("AWS::IAM::Role")) == [
        k for k in sorted(template.find_resources("AWS::IAM::Role")) if k.startswith("Bert")]
    (warning,) = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("^role .* is imported and immutable"))
    assert warning.id == "/Team/Nightly"
    listed = json.loads(re.search(r"alone\): (\{.*\}) \[ack:", warning.entry.data)[1])
    assert [s["Action"] for s in listed["Statement"]] == [
        ["sagemaker:StartPipelineExecution"], ["sqs:SendMessage"]]
    assert listed["Statement"][1]["Resource"] == [
        {"Fn::GetAtt": [template.find_resources("AWS::SQS::Queue").popitem()[0], "Arn"]}]


def test_a_schedule_role_made_in_the_app_gets_what_the_target_grants_once(source_dir):
    # The target (aws-cdk-lib's SageMakerStartPipelineExecution) grants the same two
    # statements the library attaches for the warning: the policy holds each once.
    stack = new_stack()
    role = iam.Role(stack, "Scheduler",
                    assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"))
    _scheduled(stack, source_dir, role)
    template = Template.from_stack(stack)
    (policy,) = template.find_resources("AWS::IAM::Policy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert [s["Action"] for s in statements] == ["sagemaker:StartPipelineExecution",
                                                "sqs:SendMessage"]
    template.has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"RoleArn": {"Fn::GetAtt": [
            [k for k in template.find_resources("AWS::IAM::Role") if k.startswith(
                "Scheduler")][0], "Arn"]}})})
