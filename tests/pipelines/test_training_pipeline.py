"""TrainingPipeline: template behaviour, failures with clear messages, advice as warnings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk.assertions import Annotations, Match, Template

from compiled_training import (
    Compiler,
    Distribution,
    Framework,
    InputChannel,
    Parameter,
    TrainingPipeline,
)
from compiled_training.catalog.dlc import resolve_dlc
from tests.helpers import (
    ACCOUNT,
    ENV,
    ROOT,
    SAMPLE_ENTRY_POINT,
    definitions,
    new_stack,
    validate_envelope,
    validate_job_arguments,
)

BERT = Framework.pytorch("1.13.1")


def _pipeline(stack: cdk.Stack, source_dir: Path, **overrides) -> TrainingPipeline:
    props = {
        "framework": BERT,
        "compiler": Compiler.training_compiler(),
        "instance_type": "ml.g5.48xlarge",
        "source_dir": source_dir,
        "entry_point": "train.py",
        "channels": [InputChannel("train", "s3://team-data/bert/train/")],
    }
    props.update(overrides)
    return TrainingPipeline(stack, "Bert", **props)


def _definition(stack: cdk.Stack) -> dict:
    (definition,) = definitions(Template.from_stack(stack).to_json())
    return definition


def _arguments(stack: cdk.Stack) -> dict:
    return _definition(stack)["Steps"][0]["Arguments"]


def _statements(template: Template, role_prefix: str) -> list[dict]:
    """The role's inline statements plus any attached policy's (grants add those)."""
    found = []
    for logical_id, role in template.find_resources("AWS::IAM::Role").items():
        if logical_id.startswith(role_prefix):
            for policy in role["Properties"].get("Policies", []):
                found.extend(policy["PolicyDocument"]["Statement"])
    for resource in template.find_resources("AWS::IAM::Policy").values():
        roles = json.dumps(resource["Properties"]["Roles"])
        if role_prefix in roles:
            found.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return found


# --- behaviour ------------------------------------------------------------------------------

def test_creates_a_retained_encrypted_versioned_private_output_bucket(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir)
    template = Template.from_stack(stack)
    template.has_resource("AWS::S3::Bucket", {
        "DeletionPolicy": "Retain",
        "Properties": Match.object_like({
            "VersioningConfiguration": {"Status": "Enabled"},
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True, "BlockPublicPolicy": True,
                "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
            "LoggingConfiguration": Match.object_like({"LogFilePrefix": "output-bucket/"}),
        }),
    })
    template.has_resource_properties("AWS::S3::BucketPolicy", {
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])},
    })


def test_kms_key_encrypts_bucket_volumes_and_outputs(source_dir):
    stack = new_stack()
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    _pipeline(stack, source_dir, kms_key=key)
    args = _arguments(stack)
    assert args["OutputDataConfig"]["KmsKeyId"].startswith("arn:aws:kms:")
    assert args["ResourceConfig"]["VolumeKmsKeyId"] == args["OutputDataConfig"]["KmsKeyId"]
    Template.from_stack(stack).has_resource_properties("AWS::S3::Bucket", {
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [Match.object_like({
            "ServerSideEncryptionByDefault": Match.object_like({"SSEAlgorithm": "aws:kms"})})]},
    })


def test_training_step_has_compiler_settings_and_retries(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, instance_count=2,
              hyperparameters={"epochs": Parameter.integer("Epochs", 3), "batch_size": 32})
    definition = _definition(stack)
    step = definition["Steps"][0]
    hps = step["Arguments"]["HyperParameters"]
    assert hps["sagemaker_training_compiler_enabled"] == "true"
    assert hps["sagemaker_pytorch_xla_multi_worker_enabled"] == "true"
    assert hps["batch_size"] == "32"
    assert hps["epochs"] == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.Epochs"}]}}
    assert definition["Parameters"] == [{"Name": "Epochs", "Type": "Integer", "DefaultValue": 3}]
    exceptions = {e for policy in step["RetryPolicies"] for e in policy["ExceptionType"]}
    assert {"SageMaker.CAPACITY_ERROR", "SageMaker.JOB_INTERNAL_ERROR"} <= exceptions
    assert step["Arguments"]["EnableInterContainerTrafficEncryption"] is True


@pytest.mark.parametrize(("instance_type", "count", "expected"), [
    ("ml.g5.48xlarge", 1, "pytorchxla"),   # 8 GPUs on one node
    ("ml.g5.xlarge", 2, "pytorchxla"),     # two nodes
    ("ml.g5.xlarge", 1, "none"),           # one GPU
])
def test_defaults_to_pytorchxla_when_a_compiler_job_spans_more_than_one_gpu(
        source_dir, instance_type, count, expected):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir, instance_type=instance_type, instance_count=count)
    assert pipeline.distribution.value == expected
    hps = _arguments(stack)["HyperParameters"]
    assert ("sagemaker_pytorch_xla_multi_worker_enabled" in hps) == (expected == "pytorchxla")


@pytest.mark.parametrize("framework", [
    Framework.huggingface("4.11", pytorch_version="1.9"),
    Framework.huggingface("4.17.0", pytorch_version="1.10.2"),
])
def test_defaults_to_no_distribution_where_the_compiler_has_no_pytorchxla(source_dir, framework):
    # As the SDK runs it: Hugging Face PyTorch 1.9 and 1.10 have no pytorchxla launcher.
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir, framework=framework, instance_type="ml.p3.16xlarge",
                         instance_count=2)
    assert pipeline.distribution is Distribution.NONE
    assert "sagemaker_pytorch_xla_multi_worker_enabled" not in _arguments(stack)["HyperParameters"]


def test_torch_distributed_runs_on_every_nvidia_gpu_family(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, framework=Framework.pytorch("2.3.0"),
              compiler=Compiler.torch_compile(), instance_type="ml.p6-b200.48xlarge",
              distribution=Distribution.TORCH_DISTRIBUTED)
    assert _arguments(stack)["AlgorithmSpecification"]["TrainingImage"].endswith(
        "/pytorch-training:2.3.0-gpu-py311")


def test_spot_training_waits_and_checkpoints_per_execution(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, spot=True, max_runtime=cdk.Duration.hours(6))
    args = _arguments(stack)
    assert args["EnableManagedSpotTraining"] is True
    assert args["StoppingCondition"] == {"MaxRuntimeInSeconds": 21600,
                                         "MaxWaitTimeInSeconds": 43200}
    checkpoint = args["CheckpointConfig"]
    assert checkpoint["LocalPath"] == "/opt/ml/checkpoints"
    assert checkpoint["S3Uri"]["Std:Join"]["Values"][1] == {"Get": "Execution.PipelineExecutionId"}


def test_torch_compile_runs_on_a_pytorch_2_dlc(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, framework=Framework.pytorch("2.3.0"),
              compiler=Compiler.torch_compile(mode="max-autotune"), instance_type="ml.g5.2xlarge")
    args = _arguments(stack)
    assert args["AlgorithmSpecification"]["TrainingImage"].endswith(
        "/pytorch-training:2.3.0-gpu-py311")
    hps = args["HyperParameters"]
    assert args["Environment"]["COMPILED_TRAINING_TORCH_COMPILE"] == "true"
    assert args["Environment"]["COMPILED_TRAINING_TORCH_COMPILE_MODE"] == "max-autotune"
    assert not [name for name in hps if name.startswith("compiled_training")]
    assert "sagemaker_training_compiler_enabled" not in hps


def test_execution_role_reads_code_and_inputs_writes_own_prefix_pulls_own_image(source_dir):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    statements = json.dumps(_statements(Template.from_stack(stack), "BertExecutionRole"))
    assert "arn:\", {\"Ref\": \"AWS::Partition\"}, \":s3:::team-data/bert/train/*" in statements
    assert f"/{pipeline.pipeline_name}/*" in statements
    assert ":ecr:us-east-1:763104351884:repository/pytorch-trcomp-training" in statements
    assert "s3:DeleteObject" not in statements
    assert "\"Action\": \"s3:*\"" not in statements


def test_pipeline_role_creates_only_tagged_jobs_and_passes_only_the_execution_role(source_dir):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    statements = _statements(Template.from_stack(stack), "BertPipelineRole")
    create = next(s for s in statements if "sagemaker:CreateTrainingJob" in s["Action"])
    assert create["Condition"] == {"StringEquals": {
        "aws:RequestTag/compiled-training:pipeline": pipeline.pipeline_name}}
    describe = next(s for s in statements if "sagemaker:DescribeTrainingJob" in s["Action"])
    assert "aws:ResourceTag/compiled-training:pipeline" in describe["Condition"]["StringEquals"]
    pass_role = next(s for s in statements if s["Action"] == "iam:PassRole")
    execution_role = stack.get_logical_id(pipeline.role.node.default_child)
    assert pass_role["Resource"] == {"Fn::GetAtt": [stack.resolve(execution_role), "Arn"]}


def test_pipeline_role_tags_only_its_own_jobs_with_its_own_tag_as_it_creates_them(source_dir):
    # Retagging another pipeline's job would let this role describe and stop it.
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    statements = _statements(Template.from_stack(stack), "BertPipelineRole")
    (add_tags,) = [s for s in statements if "sagemaker:AddTags" in s["Action"]]
    assert add_tags["Action"] == "sagemaker:AddTags"
    assert add_tags["Condition"] == {
        "StringEquals": {"aws:RequestTag/compiled-training:pipeline": pipeline.pipeline_name,
                         "sagemaker:TaggingAction": "CreateTrainingJob"},
        "ForAllValues:StringLike": {"aws:TagKeys": ["compiled-training:pipeline",
                                                    "sagemaker:*"]},
    }


@pytest.mark.parametrize(("env", "account"), [(ENV, "123456789012"),
                                              (None, {"Ref": "AWS::AccountId"})],
                         ids=["us-east-1", "agnostic"])
def test_sagemaker_may_assume_the_roles_for_this_account_only(source_dir, env, account):
    stack = new_stack(env=env)
    _pipeline(stack, source_dir)
    roles = Template.from_stack(stack).find_resources("AWS::IAM::Role")
    for prefix in ("BertExecutionRole", "BertPipelineRole"):
        (role,) = [r for lid, r in roles.items() if lid.startswith(prefix)]
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [{
            "Action": "sts:AssumeRole", "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Condition": {"StringEquals": {"aws:SourceAccount": account}},
        }]


@pytest.mark.parametrize("uri", ["s3://team-data/*", "s3://team-data/bert/train-?/"])
def test_fails_on_wildcards_in_a_channel_uri_that_iam_would_widen(source_dir, uri):
    with pytest.raises(ValueError, match=(
            r"TrainingPipeline Team/Bert: channel 'train' URI must not contain '\*' or '\?' "
            r"\(the execution role's S3 grant is built from it and IAM reads them as wildcards: "
            r"'s3://bucket/\*' would grant the whole bucket\), got " + re.escape(repr(uri)))):
        _pipeline(new_stack(), source_dir, channels=[
            InputChannel("train", Parameter.string("TrainDataUri", uri))])


def test_grants_start_execution_and_plugs_into_scheduler(source_dir):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    runner = iam.Role(stack, "Runner", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    pipeline.grant_start_execution(runner)
    scheduler.Schedule(stack, "Nightly", schedule=scheduler.ScheduleExpression.cron(hour="2", minute="0"),
                       target=targets.SageMakerStartPipelineExecution(pipeline))
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::IAM::Policy", {
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Action": "sagemaker:StartPipelineExecution"})])},
        "Roles": [{"Ref": Match.string_like_regexp("Runner")}],
    })
    template.resource_count_is("AWS::Scheduler::Schedule", 1)


def test_failed_execution_metric_names_the_pipeline(source_dir):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    metric = pipeline.metric_failed_executions()
    assert metric.metric_name == "ExecutionFailed"
    assert metric.namespace == "AWS/Sagemaker/ModelBuildingPipeline"
    assert metric.dimensions == {"PipelineName": pipeline.pipeline_name}


def test_vpc_job_gets_subnets_security_group_and_network_interface_permissions(source_dir):
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    _pipeline(stack, source_dir, vpc=vpc, network_isolation=True)
    args = _arguments(stack)
    assert len(args["VpcConfig"]["Subnets"]) == 2
    assert len(args["VpcConfig"]["SecurityGroupIds"]) == 1
    assert args["EnableNetworkIsolation"] is True
    assert "ec2:CreateNetworkInterface" in json.dumps(
        _statements(Template.from_stack(stack), "BertExecutionRole"))


def test_environment_agnostic_stack_maps_registries_per_region(source_dir):
    stack = new_stack(env=None)
    _pipeline(stack, source_dir)
    template = Template.from_stack(stack).to_json()
    (mapping,) = template["Mappings"].values()
    dlc = resolve_dlc(BERT, True, "ml.g5.48xlarge")
    assert mapping == {region: {"account": account} for region, account in dlc.registries}
    assert mapping["af-south-1"]["account"] != mapping["us-east-1"]["account"]
    assert "Fn::FindInMap" in json.dumps(template["Resources"])


def test_every_definition_variant_passes_the_validators(source_dir):
    for overrides in ({}, {"spot": True}, {"debugger": True, "profiler": True},
                      {"instance_count": 4, "distribution": Distribution.PYTORCHXLA}):
        stack = new_stack()
        _pipeline(stack, source_dir, **overrides)
        definition = _definition(stack)
        validate_envelope(definition)
        validate_job_arguments(definition)


# --- failures ------------------------------------------------------------------------------

@pytest.mark.parametrize(("overrides", "message"), [
    ({"instance_type": "ml.g5.huge"},
     r"instance_type must be a SageMaker training instance type such as 'ml.g5.48xlarge', got 'ml.g5.huge'"),
    ({"instance_type": "local_gpu"}, r"got 'local_gpu' \(local mode does not exist"),
    ({"instance_count": 0}, r"instance_count must be an integer of at least 1, got 0"),
    ({"instance_type": "ml.m6i.12xlarge"},
     r"instance_type must be a GPU instance of p3, p3dn, g4dn, p4d, g5 for Training Compiler, got 'ml.m6i.12xlarge' \(a CPU instance\)"),
    ({"instance_type": "ml.p4de.24xlarge"},
     r"got 'ml.p4de.24xlarge' \(p4de is a GPU family Training Compiler never supported\)"),
    ({"instance_type": "ml.g4ad.4xlarge"},
     r"got 'ml.g4ad.4xlarge' \(g4ad is an AMD GPU family, which Training Compiler does not "
     r"support\)"),
    ({"instance_type": "ml.trn1.32xlarge", "compiler": Compiler.none(),
      "framework": Framework.pytorch("1.11.0")},
     r"ml.trn1.32xlarge runs compiled graphs only: use Compiler.neuron_xla\(\) \(trn1, trn1n, "
     r"trn2\) or Compiler.torch_compile\(\) \(native TorchNeuron, trn2\)"),
    ({"instance_type": "ml.trn2.48xlarge", "compiler": Compiler.torch_compile(),
      "framework": Framework.pytorch("2.3.0")},
     r"the native TorchNeuron backend has no SageMaker training image to resolve"),
    ({"distribution": Distribution.SMDISTRIBUTED_DATA_PARALLEL},
     r"'smdistributed' .* is not compatible with Training Compiler"),
    ({"framework": Framework.pytorch("2.1.0")},
     r"Training Compiler does not support PyTorch 2.1.0: AWS froze it .*PyTorch 1.12.0; PyTorch 1.13.1.*Compiler.torch_compile\(\)"),
    ({"hyperparameters": {"sagemaker_program": "x.py"}}, r"'sagemaker_program' is reserved"),
    ({"hyperparameters": {"notes": "x" * 2499}}, r"hyperparameters: HyperParameters\['notes'\] must be at most 2500 characters, got '\"x+'\.\.\. \(2501 characters\) \(as sent: with the sagemaker_\* entries compiled-training adds, values JSON-encoded\)$"),
    ({"hyperparameters": {"k" * 257: 1}}, r"hyperparameters: HyperParameters key must be at most 256 characters, got 'k+'\.\.\. \(257 characters\)"),
    ({"pipeline_name": "bert_training"}, r"pipeline_name must hold only letters, digits and hyphens, beginning and ending with a letter or digit, got 'bert_training'$"),
    ({"instance_type": "ml.g5.12xlage"}, r"instance_type must be a SageMaker training instance type such as 'ml.g5.48xlarge', got 'ml.g5.12xlage' \(did you mean 'ml.g5.12xlarge'\?\)$"),
    ({"compiler": Compiler.none(), "framework": Framework.pytorch("1.12.1"),
      "distribution": Distribution.TORCH_DISTRIBUTED},
     r"distribution 'torch_distributed' needs PyTorch 1.13.1 or newer \(the first SageMaker training image whose toolkit launches torchrun\), got PyTorch 1.12.1$"),
    ({"pipeline_name": "a" * 257}, r"pipeline_name must be at most 256 characters, got 'aaaa.*\.\.\. \(257 characters\)"),
    ({"channels": [InputChannel("train", "s3://a-bucket/x/"), InputChannel("train", "s3://a-bucket/y/")]},
     r"channel names must be unique, got 'train' twice"),
    ({"channels": [InputChannel("train", "/data/train")]}, r"channel 'train' URI '/data/train' is not an S3 URI \(s3://bucket/key\): must begin with s3://"),
    ({"compiler": Compiler.none(), "distribution": Distribution.PYTORCHXLA},
     r"'pytorchxla' runs only with Training Compiler"),
    ({"framework": Framework.xgboost("1.7-1"), "instance_type": "ml.g5.xlarge"},
     r"cannot apply to XGBoost 1.7-1: it is not a deep-learning graph"),
    ({"compiler": Compiler.torch_compile()}, r"torch.compile needs PyTorch 2.0 or newer"),
    ({"spot": True, "max_runtime": cdk.Duration.hours(4), "max_wait": cdk.Duration.hours(1)},
     r"max_wait \(3600 s\) must be at least max_runtime \(14400 s\)"),
])
def test_fails_with_a_message_naming_field_value_and_what_is_allowed(source_dir, overrides, message):
    with pytest.raises(ValueError, match=message):
        _pipeline(new_stack(), source_dir, **overrides)


def test_fails_with_all_problems_in_one_message(source_dir):
    with pytest.raises(ValueError, match=r"has 2 problems:\n  - instance_count .*\n  - .*reserved"):
        _pipeline(new_stack(), source_dir, instance_count=0,
                  hyperparameters={"sagemaker_region": "eu-west-1"})


# The request as SageMaker receives it: botocore's shapes, checked in the library at synth.
@pytest.mark.parametrize(("overrides", "message"), [
    ({"instance_count": 2**31},
     r"instance_count: ResourceConfig.InstanceCount must be at most 2147483647, got 2147483648$"),
    ({"volume_size_gib": 10**10},
     r"volume_size_gib: ResourceConfig.VolumeSizeInGB must be at most 2147483647, got 10000000000$"),
    ({"max_runtime": cdk.Duration.days(29)},
     r"max_runtime: StoppingCondition.MaxRuntimeInSeconds must be at most 2419200 seconds \(28 days\), got 2505600 seconds \(29 days\)$"),
    ({"channels": [InputChannel(f"c{i}", f"s3://team-data/{i}/") for i in range(21)]},
     r"channels: InputDataConfig must be at most 20 items, got 21 items$"),
    ({"channels": [InputChannel("train", "s3://team-data/" + "a" * 1010)]},
     r"channels: InputDataConfig\[0\].DataSource.S3DataSource.S3Uri must be at most 1024 characters, got 's3://team-data/a+'\.\.\. \(1025 characters\)$"),
    ({"channels": [InputChannel("train", Parameter.string("TrainUri", "s3://team-data/" + "a" * 1010))]},
     r"channels: InputDataConfig\[0\].DataSource.S3DataSource.S3Uri must be at most 1024 characters"),
    ({"channels": [InputChannel("train!", "s3://team-data/x/")]},
     r"channels: InputDataConfig\[0\].ChannelName must hold only letters, digits, '.', '-' and '_', got 'train!'$"),
    ({"hyperparameters": {"text": "é" * 500}},
     r"hyperparameters: HyperParameters\['text'\] must be at most 2500 characters, got '\"\\\\u00e9.*'\.\.\. \(3002 characters\)"),
    ({"hyperparameters": {f"h{i}": i for i in range(97)}},
     r"hyperparameters: HyperParameters must be at most 100 items, got 104 items \(as sent: with the sagemaker_\* entries compiled-training adds"),
    ({"hyperparameters": {"lr": Parameter.string("Lr", "x" * 2600)}},
     r"hyperparameters: HyperParameters\['lr'\] must be at most 2500 characters, got 'x+'\.\.\. \(2600 characters\)"),
    ({"description": "x" * 3073},
     r"description must be at most 3072 characters, got 'x+'\.\.\. \(3073 characters\)$"),
    ({"description": "Trains BERT.\nOwner: nlp"},
     r"description must be one line, got 'Trains BERT.\\nOwner: nlp' \(a line break is not allowed\)$"),
    # What a template cannot carry: YAML readers (cfn-lint's) refuse these unescaped.
    ({"description": "Trains\x7fBERT"},
     r"description must not contain the control character U\+007F, which a template cannot carry; got 'Trains\\x7fBERT'$"),
    ({"hyperparameters": {"note": Parameter.string("Note", "a\x9fb")}},
     r"definition.Parameters\[0\].DefaultValue must not contain the control character U\+009F"),
])
def test_fails_on_a_request_sagemaker_would_refuse(source_dir, overrides, message):
    with pytest.raises(ValueError, match=r"^TrainingPipeline Team/Bert: " + message):
        _pipeline(new_stack(), source_dir, **overrides)


def test_fails_on_a_long_pipeline_name_once_not_again_for_its_tag(source_dir):
    with pytest.raises(ValueError, match=r"^TrainingPipeline Team/Bert: pipeline_name must be at most 256 characters, got 'a+'\.\.\. \(257 characters\)$"):
        _pipeline(new_stack(), source_dir, pipeline_name="a" * 257)


def test_fails_on_every_request_problem_in_one_message(source_dir):
    with pytest.raises(ValueError, match=r"has 3 problems:\n"
                                         r"  - max_runtime: .* got 2505600 seconds \(29 days\)\n"
                                         r"  - volume_size_gib: .* got 10000000000\n"
                                         r"  - instance_count: .* got 2147483648$"):
        _pipeline(new_stack(), source_dir, instance_count=2**31, volume_size_gib=10**10,
                  max_runtime=cdk.Duration.days(29))


def test_accepts_the_limits_themselves(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, max_runtime=cdk.Duration.days(28), description="x" * 3072,
              channels=[InputChannel(f"c{i}", f"s3://team-data/{i}/") for i in range(20)],
              hyperparameters={"text": "é" * 415})  # 2,492 characters encoded
    validate_job_arguments(_definition(stack))


def test_fails_on_a_pipeline_name_used_twice_in_one_stack(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, pipeline_name="bert")
    with pytest.raises(ValueError, match=r"^TrainingPipeline Team/Roberta: pipeline_name 'Bert' is already used by Team/Bert in this app \(same account and region\); pipeline names must be unique$"):
        TrainingPipeline(stack, "Roberta", framework=BERT, instance_type="ml.g5.xlarge",
                         source_dir=source_dir, entry_point="train.py", pipeline_name="Bert")


def test_fails_on_a_pipeline_name_used_twice_in_one_app(source_dir):
    one = new_stack("One")
    _pipeline(one, source_dir, pipeline_name="bert")
    with pytest.raises(ValueError, match=r"pipeline_name 'bert' is already used by One/Bert"):
        _pipeline(new_stack("Two", app=one.node.root), source_dir, pipeline_name="bert")
    # Another region is another namespace.
    _pipeline(new_stack("Three", app=one.node.root,
                        env=cdk.Environment(account=ACCOUNT, region="eu-west-1")),
              source_dir, pipeline_name="bert")


def test_fails_in_a_region_without_the_dlc_naming_the_supported_ones(source_dir):
    with pytest.raises(ValueError, match=r"PyTorch 1.13.1's Training Compiler image \(pytorch-trcomp-training:1.13.1-gpu-py39\) is not published in eu-south-2; the regions that have it: af-south-1, .*us-east-1"):
        _pipeline(new_stack(env=cdk.Environment(account=ACCOUNT, region="eu-south-2")), source_dir)


@pytest.mark.parametrize("region", ["cn-north-1", "us-gov-west-1"])
def test_pytorch_2_14_in_a_region_its_image_is_not_in_is_refused_naming_both(source_dir, region):
    # sagemaker-core 2.27.0 lists 2.14 in 35 regions, none outside the aws partition; 2.13 in 45.
    stack = new_stack(env=cdk.Environment(account=ACCOUNT, region=region))
    with pytest.raises(ValueError, match=rf"^TrainingPipeline Team/Bert: PyTorch 2.14's training image \(pytorch:2.14-cu133-amzn2023-sagemaker\) is not published in {region}; the regions that have it: af-south-1, .*us-west-2$"):
        TrainingPipeline(stack, "Bert", framework=Framework.pytorch("2.14"),
                         compiler=Compiler.torch_compile(), instance_type="ml.g5.xlarge",
                         source_dir=str(source_dir), entry_point="train.py")
    TrainingPipeline(stack, "Older", framework=Framework.pytorch("2.13"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.xlarge",
                     source_dir=str(source_dir), entry_point="train.py")


def test_fails_without_source_dir_for_a_framework_image():
    with pytest.raises(ValueError, match=r"source_dir is required for PyTorch 1.13.1"):
        TrainingPipeline(new_stack(), "Bert", framework=BERT, instance_type="ml.g5.xlarge",
                         entry_point="train.py")


def test_fails_on_a_missing_source_dir(tmp_path):
    with pytest.raises(ValueError, match=r"source_dir must be an existing folder, got '.*nope'"):
        _pipeline(new_stack(), tmp_path / "nope")


# The entry point, as the training toolkit's launchers will demand it (read, never imported).
PYTORCHXLA_LAUNCH = r"the pytorchxla launcher \(AWS's xla_spawn\)"


def _source(folder: Path, files: dict[str, str]) -> Path:
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content)
    return folder


@pytest.mark.parametrize(("files", "overrides", "message"), [
    ({"train.py": "def main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n"}, {},
     rf"entry_point 'train.py' in '[^']*' defines no top-level _mp_fn\(index\); "
     rf"{PYTORCHXLA_LAUNCH} imports the script and calls _mp_fn\(index\) in each process\. "
     r"Add: def _mp_fn\(index\): main\(\)$"),
    ({"train.py": "def _mp_fn():\n    pass\n"}, {},
     r"entry_point 'train.py' in '[^']*' defines _mp_fn without the index parameter; "),
    ({"train.py": SAMPLE_ENTRY_POINT, "setup.py": "from setuptools import setup\n"}, {},
     rf"source_dir '[^']*' holds a setup.py, which makes it a Python package; "
     rf"{PYTORCHXLA_LAUNCH} refuses packages"),
    ({"train.sh": "python train.py\n"}, {"entry_point": "train.sh"},
     rf"entry_point must be a Python script \(.py\) for distribution 'pytorchxla', got "
     rf"'train.sh': {PYTORCHXLA_LAUNCH} runs only Python scripts$"),
    ({"run.sh": "torchrun train.py\n"},
     {"entry_point": "run.sh", "framework": Framework.pytorch("2.3.0"),
      "compiler": Compiler.torch_compile(), "distribution": Distribution.TORCH_DISTRIBUTED},
     r"entry_point must be a Python script \(.py\) for distribution 'torch_distributed', "
     r"got 'run.sh': the torch_distributed launcher \(torchrun\) runs only Python scripts$"),
    ({"train.py": SAMPLE_ENTRY_POINT, "setup.py": ""},
     {"framework": Framework.pytorch("2.3.0"), "compiler": Compiler.torch_compile(),
      "distribution": Distribution.TORCH_DISTRIBUTED},
     r"holds a setup.py, which makes it a Python package; the torch_distributed launcher "
     r"\(torchrun\) refuses packages"),
    ({"train.py": SAMPLE_ENTRY_POINT}, {"entry_point": "trian.py", "compiler": Compiler.none(),
                                        "instance_type": "ml.g5.xlarge"},
     r"entry_point 'trian.py' in '[^']*' does not exist; SageMaker runs the entry point from "
     r"source_dir"),
    ({"tests/train.py": SAMPLE_ENTRY_POINT}, {"entry_point": "tests/train.py"},
     r"entry_point 'tests/train.py' in '[^']*' is left out of the uploaded sourcedir.tar.gz, "
     r"which skips .*tests; move the script"),
])
def test_fails_on_an_entry_point_the_launcher_would_refuse(tmp_path, files, overrides, message):
    with pytest.raises(ValueError, match=message):
        _pipeline(new_stack(), _source(tmp_path, files), **overrides)


def test_fails_with_every_entry_point_problem_in_one_message(tmp_path):
    source = _source(tmp_path, {"train.py": "print('train')\n", "setup.py": ""})
    with pytest.raises(ValueError, match=r"has 3 problems:\n  - instance_count .*\n"
                                         r"  - source_dir .* holds a setup.py.*\n"
                                         r"  - entry_point 'train.py' .* defines no top-level"):
        _pipeline(new_stack(), source, instance_count=0)


def test_an_entry_point_without_mp_fn_is_fine_where_no_launcher_imports_it(tmp_path):
    source = _source(tmp_path, {"train.py": "print('train')\n", "setup.py": ""})
    pipeline = _pipeline(new_stack(), source, instance_type="ml.g5.xlarge")
    assert pipeline.distribution is Distribution.NONE


def test_fails_on_torch_compile_mode():
    with pytest.raises(ValueError, match=r"mode must be one of default, reduce-overhead, .*got 'fast'"):
        Compiler.torch_compile(mode="fast")


# --- advice ------------------------------------------------------------------------------

def test_warns_when_debugger_or_profiler_run_under_the_compiler(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, debugger=True)
    Annotations.from_stack(stack).has_warning(
        "/Team/Bert", Match.string_like_regexp("Debugger and Profiler add recompilation overhead"))


def test_warns_on_a_multi_node_compiler_job_without_efa(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, instance_type="ml.g5.12xlarge", instance_count=2)
    Annotations.from_stack(stack).has_warning("/Team/Bert", Match.string_like_regexp("has no EFA"))


def test_a_name_derived_from_the_construct_path_warns_that_a_rename_strands_the_data(source_dir):
    stack = new_stack()
    name = _pipeline(stack, source_dir).pipeline_name
    Annotations.from_stack(stack).has_warning("/Team/Bert", Match.string_like_regexp(
        f"^pipeline_name is omitted, so the pipeline is named '{name}' after this construct's id "
        f"and path: renaming or moving the construct renames the pipeline, moves its S3 prefix "
        f"{name}/ in the output bucket and leaves its models, outputs and checkpoints under the "
        f"old one; pass pipeline_name='{name}' to keep them "
        r"\[ack: compiled-training:TrainingPipeline:NamedByPath\]$"))


@pytest.mark.parametrize("version", ["2.9.0", "2.10.0"])
def test_current_pytorch_trains_on_every_gpu_under_torchrun(source_dir, version):
    # The SageMaker SDKs' torch_distributed list stops at 2.8.0; the images' toolkit does not.
    stack = new_stack()
    # The runtime's train.py: a script of its own that skips the warm start draws a warning.
    _pipeline(stack, ROOT / "runtime", framework=Framework.pytorch(version),
              compiler=Compiler.torch_compile(), instance_type="ml.g5.12xlarge",
              instance_count=2, distribution=Distribution.TORCH_DISTRIBUTED,
              pipeline_name="ltr-ranker")
    hyperparameters = _arguments(stack)["HyperParameters"]
    assert hyperparameters["sagemaker_torch_distributed_enabled"] == "true"
    assert hyperparameters["sagemaker_instance_type"] == '"ml.g5.12xlarge"'  # as the SDK sends it
    assert _arguments(stack)["AlgorithmSpecification"]["TrainingImage"].endswith(
        f"/pytorch-training:{version}-gpu-{'py312' if version == '2.9.0' else 'py313'}")
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


@pytest.mark.parametrize(("overrides", "idle"), [
    ({"instance_type": "ml.g5.12xlarge", "instance_count": 2},
     r"6 of the 8 GPUs paid for \(2 x ml.g5.12xlarge\) stay idle and the 2 instances train 2 "
     r"separate models that never exchange gradients"),
    ({"instance_type": "ml.p4d.24xlarge"},
     r"7 of the 8 GPUs paid for \(1 x ml.p4d.24xlarge\) stay idle;"),
    ({"instance_type": "ml.g5.xlarge", "instance_count": 3},
     r"the 3 instances train 3 separate models that never exchange gradients;"),
])
def test_warns_naming_the_gpus_a_job_without_a_launcher_leaves_idle(source_dir, overrides, idle):
    stack = new_stack()
    _pipeline(stack, source_dir, framework=Framework.pytorch("2.9.0"),
              compiler=Compiler.torch_compile(), pipeline_name="ltr-ranker", **overrides)
    Annotations.from_stack(stack).has_warning("/Team/Bert", Match.string_like_regexp(
        r"^distribution is none, so SageMaker starts one process per instance, on one GPU: "
        + idle + r".*use Distribution.TORCH_DISTRIBUTED \(torchrun, one process per GPU.*"
        r"\[ack: compiled-training:TrainingPipeline:IdleGpus\]$"))


@pytest.mark.parametrize("overrides", [
    {"instance_type": "ml.g5.xlarge"},  # one GPU on one instance: nothing idles
    {"instance_type": "ml.g5.12xlarge", "distribution": Distribution.TORCH_DISTRIBUTED},
    {"instance_type": "ml.m5.xlarge", "compiler": Compiler.none(), "instance_count": 2},
    {"framework": Framework.xgboost("1.7-1"), "compiler": Compiler.none(), "entry_point": None,
     "source_dir": None, "instance_type": "ml.g5.12xlarge", "instance_count": 2},
])
def test_no_idle_gpu_warning_where_every_gpu_works_or_none_is_paid_for(source_dir, overrides):
    stack = new_stack()
    props = {"framework": Framework.pytorch("2.9.0"), "compiler": Compiler.torch_compile(),
             "pipeline_name": "ltr-ranker", "source_dir": source_dir, **overrides}
    _pipeline(stack, **props)
    Annotations.from_stack(stack).has_no_warning("/Team/Bert", Match.string_like_regexp("IdleGpus"))


@pytest.mark.parametrize(("uri", "read"), [
    ("s3://acme-data/ltr/train", "ltr/train"),
    (Parameter.string("TrainUri", "s3://acme-data/ltr/train"), "ltr/train"),
    ("s3://acme-data/train", "train"),
])
def test_warns_on_a_channel_uri_that_names_a_folder_without_its_slash(source_dir, uri, read):
    stack = new_stack()
    _pipeline(stack, source_dir, pipeline_name="ltr", channels=[InputChannel("train", uri)])
    Annotations.from_stack(stack).has_warning("/Team/Bert", Match.string_like_regexp(
        f"^channel 'train' URI 's3://acme-data/{read}' ends without '/': SageMaker reads every "
        f"key that begins with '{read}' .* the execution role may read s3://acme-data/{read}\\*; "
        f"end it with '/' \\(s3://acme-data/{read}/\\) to mean that folder "
        r"\[ack: compiled-training:TrainingPipeline:ChannelPrefix\]$"))


@pytest.mark.parametrize("uri", ["s3://acme-data/ltr/train/", "s3://acme-data/ltr/train.csv",
                                 "s3://acme-data/ltr/part-0.jsonl.gz"])
def test_no_channel_warning_for_a_folder_with_its_slash_or_a_single_object(source_dir, uri):
    stack = new_stack()
    _pipeline(stack, source_dir, pipeline_name="ltr", channels=[InputChannel("train", uri)])
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


def test_no_warning_for_the_recommended_setup(source_dir):
    stack = new_stack()
    _pipeline(stack, source_dir, instance_count=2, pipeline_name="nlp-bert")
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


def test_pipelines_in_a_stack_share_the_output_bucket_and_code_but_not_prefixes(source_dir):
    stack = new_stack()
    first = _pipeline(stack, source_dir)
    second = TrainingPipeline(stack, "Roberta", framework=BERT, instance_type="ml.g5.xlarge",
                              compiler=Compiler.training_compiler(), source_dir=source_dir,
                              entry_point="train.py")
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 2)  # outputs and their access logs
    assert first.bucket is second.bucket
    first_statements = json.dumps(_statements(template, "BertExecutionRole"))
    assert f"/{first.pipeline_name}/*" in first_statements
    assert f"/{second.pipeline_name}/" not in first_statements
