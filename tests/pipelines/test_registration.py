"""ModelRegistration: the quality gate, the RegisterModel step, the group and its permissions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from compiled_training import (
    Compiler,
    Framework,
    InputChannel,
    ModelRegistration,
    Parameter,
    RetrainingSchedule,
    TrainingPipeline,
)
from compiled_training.definition.registration import (
    FAIL_STEP,
    GATE_STEP,
    METRICS_STEP,
    REGISTER_STEP,
    REGRESSION_STEP,
)
from compiled_training.pipelines.registration import REGRESSION_PARAMETER
from tests.definition.sdk_oracle import sdk_registration_steps
from tests.helpers import (
    condition_outcome,
    definitions,
    new_stack,
    sdk_image_uris,
    validate_envelope,
    validate_job_arguments,
)

ACCURACY = "Steps.Train.FinalMetricDataList['validation_accuracy'].Value"
AUC = "Steps.Train.FinalMetricDataList['validation:auc'].Value"
LOSS = "Steps.Train.FinalMetricDataList['validation_loss'].Value"


_PIPELINE = "bert-training"


def _bert(stack: cdk.Stack, source_dir: Path, *, channels_with_validation: bool = True,
          **registration) -> TrainingPipeline:
    options = {"model_package_group_name": "bert-classifier", "gate_threshold": 0.9,
               **registration}
    channels = [InputChannel("train", "s3://team-data/bert/train/")]
    if channels_with_validation:
        channels.append(InputChannel("validation", "s3://team-data/bert/validation/"))
    return TrainingPipeline(
        stack, "Bert", framework=Framework.pytorch("1.13.1"),
        compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
        source_dir=source_dir, entry_point="train.py", pipeline_name=_PIPELINE,
        channels=channels, registration=ModelRegistration(**options))


def _xgboost(stack: cdk.Stack, *, channels_with_validation: bool = True,
             **registration) -> TrainingPipeline:
    channels = [InputChannel("train", "s3://team-data/tab/train/", content_type="text/csv")]
    if channels_with_validation:
        channels.append(InputChannel("validation", "s3://team-data/tab/validation/",
                                     content_type="text/csv"))
    return TrainingPipeline(
        stack, "Tabular", framework=Framework.xgboost("1.7-1"), instance_type="ml.m6i.12xlarge",
        hyperparameters={"objective": "binary:logistic", "eval_metric": "auc,logloss"},
        channels=channels,
        registration=ModelRegistration(model_package_group_name="Tabular-Churn",
                                       gate_threshold=0.8, **registration))


def _definition(stack: cdk.Stack) -> dict:
    (definition,) = definitions(Template.from_stack(stack).to_json())
    return definition


def _gate(definition: dict) -> dict:
    return _step(definition, GATE_STEP)


def _step(definition: dict, name: str) -> dict:
    return next(s for s in definition["Steps"] if s["Name"] == name)


def _register(gate: dict) -> dict:
    """The registration step under the gate (under the approved-version check, where one is)."""
    (then,) = gate["Arguments"]["IfSteps"]
    return _register(then) if then["Type"] == "Condition" else then


# --- the definition --------------------------------------------------------------------------

def test_gate_and_registration_pass_the_schema_and_the_api_shapes(source_dir):
    for build in (lambda s: _bert(s, source_dir), _xgboost,
                  lambda s: _bert(s, source_dir, channels_with_validation=False,
                                  gate_metric="")):
        stack = new_stack()
        build(stack)
        definition = _definition(stack)
        validate_envelope(definition)
        validate_job_arguments(definition)


def test_registers_the_trained_model_with_the_inference_image_and_how_it_was_trained(source_dir):
    stack = new_stack()
    _bert(stack, source_dir, git_commit="0123abc")
    definition = _definition(stack)
    (register,) = _gate(definition)["Arguments"]["IfSteps"]
    arguments = register["Arguments"]
    assert register["Type"] == "RegisterModel"
    (container,) = arguments["InferenceSpecification"]["Containers"]
    assert container["ModelDataUrl"] == {"Get": "Steps.Train.ModelArtifacts.S3ModelArtifacts"}
    assert container["Image"] == sdk_image_uris().retrieve(
        "pytorch", "us-east-1", version="1.13.1", instance_type="ml.g5.xlarge",
        image_scope="inference")
    assert arguments["ModelApprovalStatus"] == "PendingManualApproval"
    metadata = arguments["CustomerMetadataProperties"]
    assert metadata["execution"] == {"Get": "Execution.PipelineExecutionArn"}
    assert metadata["compiler"] == "Training Compiler"
    assert metadata["git_commit"] == "0123abc"
    assert "pytorch-trcomp-training" in metadata["image"]
    assert {"Name": "MinValidationAccuracy", "Type": "Float", "DefaultValue": 0.9} in \
        definition["Parameters"]


def test_xgboost_registers_its_algorithm_image_after_a_gate_on_its_own_metric():
    stack = new_stack()
    _xgboost(stack)
    gate = _gate(_definition(stack))
    assert gate["Arguments"]["Conditions"] == [{
        "Type": "GreaterThanOrEqualTo", "LeftValue": {"Get": AUC},
        "RightValue": {"Get": "Parameters.MinValidationAuc"}}]
    (register,) = gate["Arguments"]["IfSteps"]
    spec = register["Arguments"]["InferenceSpecification"]
    assert spec["Containers"][0]["Image"] == sdk_image_uris().retrieve(
        "xgboost", "us-east-1", version="1.7-1", image_scope="inference")
    assert spec["SupportedContentTypes"] == ["text/csv"]
    assert spec["SupportedRealtimeInferenceInstanceTypes"] == ["ml.m5.large", "ml.m5.xlarge"]


def test_a_loss_gate_passes_at_or_below_its_threshold(source_dir):
    stack = new_stack()
    _bert(stack, source_dir, gate_metric="validation_loss", gate_threshold=0.4)
    (condition,) = _gate(_definition(stack))["Arguments"]["Conditions"]
    assert condition["Type"] == "LessThanOrEqualTo"
    assert condition["RightValue"] == {"Get": "Parameters.MaxValidationLoss"}


@pytest.mark.parametrize(("accuracy", "threshold", "registers"), [
    (0.93, 0.9, True), (0.9, 0.9, True), (0.87, 0.9, False), (0.93, 0.95, False)])
def test_the_gate_registers_only_a_model_at_or_above_the_threshold(source_dir, accuracy,
                                                                    threshold, registers):
    stack = new_stack()
    _bert(stack, source_dir)
    gate = _gate(_definition(stack))
    values = {ACCURACY: accuracy, "MinValidationAccuracy": threshold}
    assert condition_outcome(gate, values, {}) is registers
    # The branch taken: the registration, or a failure naming the metric, value and threshold.
    assert [s["Name"] for s in gate["Arguments"]["IfSteps"]] == [REGISTER_STEP]
    (fail,) = gate["Arguments"]["ElseSteps"]
    assert fail["Name"] == FAIL_STEP
    from tests.helpers import substitute_expressions
    assert substitute_expressions(fail["Arguments"]["ErrorMessage"], values) == (
        f"Model not registered: validation_accuracy {accuracy} is below the threshold "
        f"MinValidationAccuracy {threshold}")


@pytest.mark.parametrize("max_regression", [None, 0.02])
def test_matches_the_sdk_register_model_lambda_and_condition_steps(source_dir, max_regression):
    stack = new_stack()
    pipeline = _bert(stack, source_dir, git_commit="0123abc", max_regression=max_regression)
    definition = _definition(stack)
    ours = _gate(definition)
    register = _register(ours)
    arguments = register["Arguments"]
    spec = arguments["InferenceSpecification"]
    metadata = {k: v for k, v in arguments["CustomerMetadataProperties"].items()
                if not k.startswith("gate_") and k != "approved_comparison"}
    metadata["execution"] = "<execution>"
    metrics = _step(definition, METRICS_STEP)
    registration = pipeline.registration.registration
    sdk = sdk_registration_steps(
        image_uri=spec["Containers"][0]["Image"], group="bert-classifier",
        approval_status="PendingManualApproval", metric="validation_accuracy", threshold=0.9,
        higher_is_better=True, realtime=spec["SupportedRealtimeInferenceInstanceTypes"],
        transform=spec["SupportedTransformInstanceTypes"],
        content_types=spec["SupportedContentTypes"],
        response_types=spec["SupportedResponseMIMETypes"], metadata=metadata,
        description=arguments["ModelPackageDescription"], report={
            "function_arn": metrics["FunctionArn"], "bucket": metrics["Arguments"]["bucket"],
            "prefix": registration.report_prefix, "metrics": [
                ("validation_loss", "loss"), ("validation_accuracy", "accuracy")],
            "problem_type": "binary_classification", "max_regression": max_regression})
    # The one deliberate difference: the SDK names the step after its collection.
    sdk_register = _register(sdk["Gate"])
    assert sdk_register.pop("Name") == f"{REGISTER_STEP}-RegisterModel"
    sdk_register["Name"] = REGISTER_STEP
    # And a named one: the SDK also writes empty Bias and Explainability reports.
    assert sdk_register["Arguments"]["ModelMetrics"].pop("Bias") == {}
    assert sdk_register["Arguments"]["ModelMetrics"].pop("Explainability") == {}
    assert ours == sdk["Gate"]
    assert metrics == sdk["Metrics"]
    assert all(p in definition["Parameters"] for p in sdk["Parameters"])


# --- the model-quality report and the approved-version gate ----------------------------------

def _run_metrics_step(definition: dict, accuracy: float, execution: str,
                      max_regression: float | None = None) -> dict:
    """The ModelMetrics step as Pipelines runs it: its arguments evaluated, its function
    called. AWS itself cannot exist here: moto stands in for S3 and SageMaker."""
    from compiled_training.handlers import model_metrics
    from tests.helpers import substitute_expressions

    step = _step(definition, METRICS_STEP)
    values = {ACCURACY: accuracy, LOSS: 0.25, "Execution.PipelineExecutionId": execution,
              **{p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}}
    if max_regression is not None:
        values[REGRESSION_PARAMETER] = max_regression
    outputs = model_metrics.handler(substitute_expressions(step["Arguments"], values))
    assert set(outputs) == {o["OutputName"] for o in step["OutputParameters"]}
    return outputs


@pytest.fixture
def aws(monkeypatch):
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield


def _approve_run(definition: dict, statistics: str) -> None:
    """A version registered from a run's report, then approved (as a person would)."""
    import boto3

    register = _register(_gate(definition))["Arguments"]
    boto3.client("sagemaker").create_model_package(
        ModelPackageGroupName=register["ModelPackageGroupName"],
        ModelApprovalStatus="Approved",
        InferenceSpecification={**register["InferenceSpecification"], "Containers": [{
            "Image": register["InferenceSpecification"]["Containers"][0]["Image"],
            "ModelDataUrl": "s3://bucket/model.tar.gz"}]},
        ModelMetrics={"ModelQuality": {"Statistics": {"ContentType": "application/json",
                                                      "S3Uri": statistics}}})


def test_each_run_writes_a_model_quality_report_the_version_references(source_dir, aws):
    import boto3

    stack = new_stack()
    _bert(stack, source_dir)
    definition = _definition(stack)
    step = _step(definition, METRICS_STEP)
    bucket = step["Arguments"]["bucket"]
    boto3.client("s3").create_bucket(Bucket=bucket)

    outputs = _run_metrics_step(definition, 0.93, "run1")

    assert outputs == {"statistics": f"s3://{bucket}/{_PIPELINE}/model-metrics/run1/"
                                     f"statistics.json"}
    report = boto3.client("s3").get_object(Bucket=bucket, Key=outputs["statistics"].split(
        "/", 3)[3])
    assert report["ContentType"] == "application/json"
    # SageMaker's model-quality format: the held-out metrics, by their report names.
    assert json.loads(report["Body"].read()) == {
        "version": 0.0, "binary_classification_metrics": {
            "accuracy": {"value": 0.93, "standard_deviation": "NaN"},
            "loss": {"value": 0.25, "standard_deviation": "NaN"}}}
    assert _register(_gate(definition))["Arguments"]["ModelMetrics"] == {"ModelQuality": {
        "Statistics": {"ContentType": "application/json",
                       "S3Uri": {"Get": f"Steps.{METRICS_STEP}.OutputParameters['statistics']"}}}}


def test_fails_to_report_a_model_that_diverged(source_dir, aws):
    import boto3

    stack = new_stack()
    _bert(stack, source_dir)
    definition = _definition(stack)
    boto3.client("s3").create_bucket(Bucket=_step(definition, METRICS_STEP)["Arguments"]["bucket"])
    with pytest.raises(ValueError, match=r"^metric accuracy is nan: no report for a model that "
                                         r"diverged$"):
        _run_metrics_step(definition, float("nan"), "run1")


def test_xgboost_reports_its_validation_metrics_as_a_binary_classifier():
    stack = new_stack()
    _xgboost(stack)
    arguments = _step(_definition(stack), METRICS_STEP)["Arguments"]
    assert arguments["problem_type"] == "binary_classification"
    assert arguments["metrics"]["Std:Join"]["Values"] == [
        "auc=", {"Get": AUC}, ",logloss=",
        {"Get": "Steps.Train.FinalMetricDataList['validation:logloss'].Value"}]


@pytest.mark.parametrize(("approved", "accuracy", "allowed", "registers", "reason"), [
    (None, 0.80, 0.01, True, r"no approved version in group bert-classifier yet"),
    (0.93, 0.925, 0.01, True, r"accuracy 0.925 is 0.005 below approved version "
                              r"arn:aws:sagemaker:us-east-1:123456789012:model-package/"
                              r"bert-classifier/1 at 0.93 and at most 0.01 worse is allowed"),
    (0.93, 0.91, 0.01, False, r"accuracy 0.91 is 0.02 below approved version .* at 0.93 and "
                              r"at most 0.01 worse is allowed"),
    # The per-run parameter loosens it.
    (0.93, 0.91, 0.05, True, r"accuracy 0.91 is 0.02 below .* at most 0.05 worse is allowed"),
    (0.93, 0.95, 0.0, True, r"accuracy 0.95 is 0.02 better than approved version .* at 0.93 "
                            r"and at most 0 worse is allowed"),
])
def test_registers_only_a_run_no_worse_than_the_latest_approved_version(
        source_dir, aws, approved, accuracy, allowed, registers, reason):
    import boto3

    from tests.helpers import condition_outcome, substitute_expressions

    stack = new_stack()
    _bert(stack, source_dir, max_regression=0.01)
    definition = _definition(stack)
    boto3.client("s3").create_bucket(Bucket=_step(definition, METRICS_STEP)["Arguments"]["bucket"])
    boto3.client("sagemaker").create_model_package_group(ModelPackageGroupName="bert-classifier")
    if approved is not None:
        earlier = _run_metrics_step(definition, approved, "run1", max_regression=allowed)
        _approve_run(definition, earlier["statistics"])

    outputs = _run_metrics_step(definition, accuracy, "run2", max_regression=allowed)

    assert re.fullmatch(reason, outputs["comparison"])
    # Past the threshold gate, the approved-version check decides, on the step's outputs.
    (check,) = _gate(definition)["Arguments"]["IfSteps"]
    assert check["Name"] == REGRESSION_STEP
    values = {f"Steps.{METRICS_STEP}.OutputParameters['{k}']": v for k, v in outputs.items()}
    assert condition_outcome(check, values, {}) is registers
    assert [s["Name"] for s in check["Arguments"]["IfSteps"]] == [REGISTER_STEP]
    (fail,) = check["Arguments"]["ElseSteps"]
    assert substitute_expressions(fail["Arguments"]["ErrorMessage"], values) == \
        "Model not registered: " + outputs["comparison"]
    assert _register(_gate(definition))["Arguments"]["CustomerMetadataProperties"][
        "approved_comparison"] == {"Get": f"Steps.{METRICS_STEP}.OutputParameters['comparison']"}
    assert {"Name": REGRESSION_PARAMETER, "Type": "Float", "DefaultValue": 0.01} in \
        definition["Parameters"]


def test_an_approved_version_without_a_report_of_this_pipeline_is_no_baseline(source_dir, aws):
    import boto3

    stack = new_stack()
    _bert(stack, source_dir, max_regression=0.0)
    definition = _definition(stack)
    boto3.client("s3").create_bucket(Bucket=_step(definition, METRICS_STEP)["Arguments"]["bucket"])
    boto3.client("sagemaker").create_model_package_group(ModelPackageGroupName="bert-classifier")
    _approve_run(definition, "s3://elsewhere/statistics.json")

    outputs = _run_metrics_step(definition, 0.5, "run2")

    assert outputs["within_tolerance"] is True
    assert re.fullmatch(r"approved version \S+/bert-classifier/1 has no report of accuracy "
                        r"under s3://\S+/model-metrics/", outputs["comparison"])


def test_the_metrics_function_writes_reports_and_reads_its_own_group_only(source_dir):
    stack = new_stack()
    pipeline = _bert(stack, source_dir, max_regression=0.01)
    template = Template.from_stack(stack)
    function = stack.get_logical_id(pipeline.registration.metrics_function.node.default_child)
    role = template.to_json()["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = template.to_json()["Resources"][role]["Properties"]["Policies"][0][
        "PolicyDocument"]["Statement"]
    rendered = json.dumps(statements)
    assert f"/{_PIPELINE}/model-metrics/*" in rendered
    assert "model-package/bert-classifier/*" in rendered
    actions = {a for s in statements for a in (s["Action"] if isinstance(s["Action"], list)
                                               else [s["Action"]])}
    assert actions == {"s3:PutObject", "s3:GetObject", "s3:ListBucket",
                       "sagemaker:DescribeModelPackage", "sagemaker:ListModelPackages",
                       "logs:CreateLogStream", "logs:PutLogEvents"}
    pipeline_role = pipeline.pipeline_role.node.default_child
    assert "lambda:InvokeFunction" in json.dumps(
        template.to_json()["Resources"][stack.get_logical_id(pipeline_role)])


# --- the construct ---------------------------------------------------------------------------

def test_creates_the_group_retained_before_the_pipeline(source_dir):
    stack = new_stack()
    pipeline = _bert(stack, source_dir, deployment_account="210987654321")
    template = Template.from_stack(stack)
    groups = template.find_resources("AWS::SageMaker::ModelPackageGroup")
    ((logical_id, group),) = groups.items()
    assert group["DeletionPolicy"] == "Retain"
    assert group["Properties"]["ModelPackageGroupName"] == "bert-classifier"
    statements = group["Properties"]["ModelPackageGroupPolicy"]["Statement"]
    assert {a for s in statements for a in s["Action"]} == {
        "sagemaker:DescribeModelPackageGroup", "sagemaker:DescribeModelPackage",
        "sagemaker:ListModelPackages"}
    assert "210987654321" in json.dumps(statements)
    pipeline_resource = template.to_json()["Resources"][
        stack.get_logical_id(pipeline.resource)]
    assert logical_id in pipeline_resource["DependsOn"]


def test_an_existing_group_is_not_created():
    stack = new_stack()
    _xgboost(stack, existing_group=True)
    Template.from_stack(stack).resource_count_is("AWS::SageMaker::ModelPackageGroup", 0)


def test_pipeline_role_registers_only_into_its_group_and_passes_nothing_new():
    stack = new_stack()
    _xgboost(stack)
    template = Template.from_stack(stack)
    roles = template.find_resources("AWS::IAM::Role")
    pipeline_role = next(r for k, r in roles.items() if k.startswith("TabularPipelineRole"))
    statements = pipeline_role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    rendered = json.dumps(statements)
    create = [s for s in statements if "sagemaker:CreateModelPackage" in json.dumps(s)]
    assert len(create) == 1 and "model-package/Tabular-Churn/*" in json.dumps(create[0]) and \
        "model-package/tabular-churn/*" in json.dumps(create[0])
    assert rendered.count("iam:PassRole") == 1  # the execution role's, as before
    assert "model-package-group/Tabular-Churn" in rendered
    assert '"*"' not in json.dumps([s["Resource"] for s in create])


def test_a_schedule_may_override_the_threshold_per_run(source_dir):
    stack = new_stack()
    pipeline = _bert(stack, source_dir)
    assert pipeline.parameters["MinValidationAccuracy"] == Parameter.float(
        "MinValidationAccuracy", 0.9)
    RetrainingSchedule(stack, "Schedule", pipeline=pipeline, team="nlp",
                       expression="cron(0 1 ? * MON *)",
                       parameters={"MinValidationAccuracy": 0.95})
    Template.from_stack(stack).has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": Match.object_like({"SageMakerPipelineParameters": {
            "PipelineParameterList": [{"Name": "MinValidationAccuracy", "Value": "0.95"}]}})})


def test_summary_names_group_status_and_gate(source_dir):
    assert _bert(new_stack(), source_dir).summary()["registration"] == (
        "group bert-classifier, PendingManualApproval, if validation_accuracy >= "
        "MinValidationAccuracy (default 0.9)")
    assert _bert(new_stack(), source_dir, max_regression=0.01).summary()["registration"] == (
        "group bert-classifier, PendingManualApproval, if validation_accuracy >= "
        "MinValidationAccuracy (default 0.9) and no worse than the latest approved version by "
        "MaxRegressionFromApproved (default 0.01)")


# --- failures ---------------------------------------------------------------------------

@pytest.mark.parametrize(("overrides", "message"), [
    ({"gate_metric": "validation_f1"},
     r"gate_metric must be a metric the training job reports \(train_loss, samples_per_second, "
     r"validation_loss, validation_accuracy\), got 'validation_f1'"),
    ({"approval_status": "Rejected"},
     r"approval_status must be one of PendingManualApproval, Approved, got 'Rejected'"),
    ({"model_package_group_name": "bert_classifier"},
     r"model_package_group_name must be 1-63 letters, digits and hyphens, .*got "
     r"'bert_classifier'"),
    ({"model_package_group_name": "b" * 64}, r"model_package_group_name must be 1-63"),
    ({"realtime_instance_types": ["ml.g5.huge"]},
     r"realtime_instance_types must be SageMaker instance types .*got 'ml.g5.huge'"),
    ({"realtime_instance_types": ["ml.g5.xlarge"], "transform_instance_types": ["ml.m5.xlarge"]},
     r"realtime_instance_types and transform_instance_types must all be GPU or all CPU \(one inference image serves them\), got ml.g5.xlarge, "
     r"ml.m5.xlarge"),
    ({"deployment_account": "dev"}, r"deployment_account must be a 12-digit account id"),
    ({"max_regression": -0.1},
     r"max_regression must be a number of at least 0 \(how much worse than the latest "
     r"approved version the gate metric may be\), with a gate metric, got -0.1$"),
    ({"max_regression": 0.01, "gate_metric": ""},
     r"max_regression must be a number of at least 0 .*got 0.01 and no gate metric$"),
])
def test_fails_on_bad_registration_naming_field_value_and_allowed(source_dir, overrides,
                                                                   message):
    with pytest.raises(ValueError, match=r"TrainingPipeline Team/Bert: registration: " + message):
        _bert(new_stack(), source_dir, **overrides)


@pytest.mark.parametrize(("field", "value", "error", "message"), [
    ("gate_threshold", "0.8", TypeError, "gate_threshold must be a float or None, got str '0.8'"),
    ("gate_threshold", True, TypeError, "gate_threshold must be a float or None, got bool True"),
    ("max_regression", float("inf"), ValueError, "max_regression must be a finite number, got inf"),
    ("existing_group", "yes", TypeError, "existing_group must be a bool, got str 'yes'"),
    ("realtime_instance_types", "ml.m5.large", TypeError,
     "realtime_instance_types must be a sequence of a str or None, got str 'ml.m5.large'"),
])
def test_a_registration_of_the_wrong_type_is_refused_where_it_is_written(field, value, error,
                                                                         message):
    with pytest.raises(error, match=re.escape(f"ModelRegistration: {message}")):
        ModelRegistration("bert-classifier", **{field: value})
    ModelRegistration("bert-classifier", **{field: None if field != "existing_group" else True})


def test_a_schedule_s_threshold_is_held_to_the_metric_s_range(source_dir):
    stack = new_stack()
    pipeline = _bert(stack, source_dir)
    with pytest.raises(ValueError, match=r"RetrainingSchedule Team/Weekly: parameter "
                                         r"'MinValidationAccuracy' 85.0 is outside \[0, 1\], the "
                                         r"range of 'validation_accuracy' .*for 85 % give 0.85$"):
        RetrainingSchedule(stack, "Weekly", pipeline=pipeline, team="nlp",
                           expression="rate(7 days)", parameters={"MinValidationAccuracy": 85})
    RetrainingSchedule(stack, "Weekly2", pipeline=pipeline, team="nlp",  # its twin
                       expression="rate(7 days)", parameters={"MinValidationAccuracy": 0.85})


def test_fails_on_an_xgboost_metric_its_eval_metric_does_not_report():
    with pytest.raises(ValueError, match=r"gate_metric must be a metric the training job "
                                         r"reports \(train:auc, train:logloss, validation:auc, "
                                         r"validation:logloss\), got 'validation:rmse'"):
        _xgboost(new_stack(), gate_metric="validation:rmse")


def test_fails_with_every_registration_problem_at_once(source_dir):
    with pytest.raises(ValueError, match=r"model_package_group_name .*; approval_status .*; "
                                         r"gate_metric "):
        _bert(new_stack(), source_dir, model_package_group_name="-", approval_status="ok",
              gate_metric="f1")


# --- the gate reads only a metric the job reports ---------------------------------------------
# The runtime evaluates, and prints validation_*, only on a channel named "validation"
# (tests/runtime: a run without one prints train_loss and samples_per_second only); built-in
# XGBoost reports validation:* only for that channel too. A gate on a metric never reported
# fails every run at the gate, so it must fail at synth.

_ADD_CHANNEL = (r": add a channel named 'validation' \(held-out metrics, validation_\* and "
                r"validation:\*, are reported on it only\), or name one of the reported "
                r"metrics$")


@pytest.mark.parametrize(("options", "given"), [
    ({}, r"'validation_accuracy' \(the default\)"),
    ({"gate_metric": "validation_accuracy"}, r"'validation_accuracy'"),
    ({"gate_metric": "validation_loss", "max_regression": 0.01}, r"'validation_loss'"),
], ids=["defaulted", "given", "given-with-max-regression"])
def test_fails_on_a_held_out_gate_metric_without_a_validation_channel(source_dir, options,
                                                                       given):
    with pytest.raises(ValueError, match=(
            r"^TrainingPipeline Team/Bert: registration: gate_metric must be a metric the "
            r"training job reports \(train_loss, samples_per_second\), got " + given
            + _ADD_CHANNEL)):
        _bert(new_stack(), source_dir, channels_with_validation=False, **options)


def test_fails_on_xgboosts_default_gate_without_a_validation_channel():
    with pytest.raises(ValueError, match=(
            r"^TrainingPipeline Team/Tabular: registration: gate_metric must be a metric the "
            r"training job reports \(train:auc, train:logloss\), got 'validation:auc' \(the "
            r"default\)" + _ADD_CHANNEL)):
        _xgboost(new_stack(), channels_with_validation=False)


def test_fails_on_xgboosts_default_gate_without_an_eval_metric():
    # Without eval_metric no metric is known to be reported: this registered with no gate.
    with pytest.raises(ValueError, match=(
            r"gate_metric must be a metric the training job reports \(none\), got "
            r"'validation:<first eval_metric>' \(the default\): set the eval_metric "
            r"hyperparameter \(built-in XGBoost reports <channel>:<eval_metric> for each of "
            r"its metrics\)$")):
        TrainingPipeline(
            new_stack(), "Tabular", framework=Framework.xgboost("1.7-1"),
            instance_type="ml.m6i.12xlarge", hyperparameters={"objective": "binary:logistic"},
            channels=[InputChannel("train", "s3://team-data/tab/train/"),
                      InputChannel("validation", "s3://team-data/tab/validation/")],
            registration=ModelRegistration(model_package_group_name="Tabular-Churn"))


def test_without_a_validation_channel_a_reported_metric_gates_and_is_the_report():
    stack = new_stack()
    _xgboost(stack, channels_with_validation=False, gate_metric="train:auc")
    definition = _definition(stack)
    assert _gate(definition)["Arguments"]["Conditions"][0]["LeftValue"] == {
        "Get": "Steps.Train.FinalMetricDataList['train:auc'].Value"}
    assert _step(definition, METRICS_STEP)["Arguments"]["metrics"]["Std:Join"]["Values"] == [
        "train:auc=", {"Get": "Steps.Train.FinalMetricDataList['train:auc'].Value"}]


def test_a_parameterized_validation_channel_is_the_validation_channel(source_dir):
    stack = new_stack()
    TrainingPipeline(
        stack, "Bert", framework=Framework.pytorch("1.13.1"), instance_type="ml.g5.2xlarge",
        source_dir=source_dir, entry_point="train.py", pipeline_name=_PIPELINE,
        channels=[InputChannel("train", "s3://team-data/bert/train/"),
                  InputChannel("validation", Parameter.string(
                      "ValidationData", "s3://team-data/bert/validation/"))],
        registration=ModelRegistration(model_package_group_name="bert-classifier"))
    definition = _definition(stack)
    assert _gate(definition)["Arguments"]["Conditions"][0]["LeftValue"] == {"Get": ACCURACY}
    assert _step(definition, METRICS_STEP)["Arguments"]["metrics"]["Std:Join"]["Values"] == [
        "loss=", {"Get": LOSS}, ",accuracy=", {"Get": ACCURACY}]
    validate_envelope(definition)
    validate_job_arguments(definition)


def test_fails_where_no_inference_image_exists_and_asks_for_one(source_dir):
    with pytest.raises(ValueError, match=r"registration: Hugging Face 4.21.1 \(PyTorch 1.11.0\) has "
                                         r"no SageMaker inference image; supported huggingface "
                                         r"versions: .*; give ModelRegistration\(inference_image_uri=\.\.\.\), an image that serves this model$"):
        TrainingPipeline(
            new_stack(), "Hf", framework=Framework.huggingface("4.21.1", pytorch_version="1.11.0"),
            compiler=Compiler.training_compiler(), instance_type="ml.g5.2xlarge",
            source_dir=source_dir, entry_point="train.py",
            registration=ModelRegistration(model_package_group_name="hf"))


@pytest.mark.parametrize("version", ["2.11", "2.14.0"])
def test_a_pytorch_2_11_or_later_model_is_told_to_give_its_inference_image(source_dir, version):
    """AWS's PyTorch inference images end at 2.6.0 in the SDK's configuration, and the Amazon
    Linux 2023 file lists training images only; with an image given, it registers."""
    def pipeline(stack: cdk.Stack, **registration: str) -> TrainingPipeline:
        return TrainingPipeline(
            stack, "Bert", framework=Framework.pytorch(version), compiler=Compiler.torch_compile(),
            instance_type="ml.g5.2xlarge", source_dir=source_dir, entry_point="train.py",
            registration=ModelRegistration(model_package_group_name="bert", gate_metric="",
                                           **registration))

    with pytest.raises(ValueError, match=rf"registration: PyTorch {version} has no SageMaker "
                                         r"inference image: AWS's PyTorch inference images end "
                                         r"at 2.6.0, and its Amazon Linux 2023 images \(PyTorch "
                                         r"2.11 on\) are for training only; give "
                                         r"ModelRegistration\(inference_image_uri=\.\.\.\), an "
                                         r"image that serves this model$"):
        pipeline(new_stack())
    served = "123456789012.dkr.ecr.us-east-1.amazonaws.com/bert-serving:1"
    stack = new_stack()
    pipeline(stack, inference_image_uri=served)
    register = _step(_definition(stack), "RegisterModel")
    assert register["Arguments"]["InferenceSpecification"]["Containers"][0]["Image"] == served


def _with_benchmark(stack: cdk.Stack, source_dir: Path, **benchmark) -> TrainingPipeline:
    from compiled_training import CompilerBenchmark

    compared = CompilerBenchmark(
        stack, "Benchmark", framework=Framework.pytorch(benchmark.pop("version", "1.13.1")),
        instance_type="ml.g5.2xlarge", source_dir=source_dir, entry_point="train.py",
        pipeline_name="bert-benchmark", decision_parameter_name="/nlp/bert/compiler-decision",
        channels=[InputChannel("train", "s3://team-data/bert/train/"),
                  InputChannel("validation", "s3://team-data/bert/validation/")])
    return _bert(stack, source_dir, benchmark=compared)


def test_a_version_records_the_benchmarks_verdict_as_it_stood(source_dir, aws):
    import boto3

    stack = new_stack()
    pipeline = _with_benchmark(stack, source_dir)
    (definition,) = [d for d in definitions(Template.from_stack(stack).to_json())
                     if any(s["Name"] == METRICS_STEP for s in d["Steps"])]
    step = _step(definition, METRICS_STEP)
    assert step["Arguments"]["benchmark_decision"] == "/nlp/bert/compiler-decision"
    assert _register(_gate(definition))["Arguments"]["CustomerMetadataProperties"][
        "compiler_benchmark"] == {
            "Get": f"Steps.{METRICS_STEP}.OutputParameters['compiler_benchmark']"}
    boto3.client("s3").create_bucket(Bucket=step["Arguments"]["bucket"])
    # What the benchmark's RecordDecision step wrote last.
    boto3.client("ssm").put_parameter(Name="/nlp/bert/compiler-decision", Type="String",
                                      Value=json.dumps({
                                          "verdict": "ship", "arm": "compiler-large-batch",
                                          "speedup": 0.54, "quality_drop": 0.05,
                                          "reason": "ship: 54 % faster (>= 20 %)",
                                          "comparison": "s3://b/bert-benchmark/comparison/x"}))

    outputs = _run_metrics_step(definition, 0.93, "run1")

    assert outputs["compiler_benchmark"] == (
        "verdict ship arm compiler-large-batch speedup 0.54 quality_drop 0.05 comparison "
        "s3://b/bert-benchmark/comparison/x")
    # The function may read that one parameter, and no other.
    template = Template.from_stack(stack).to_json()
    role = template["Resources"][stack.get_logical_id(
        pipeline.registration.metrics_function.node.default_child)]["Properties"]["Role"][
        "Fn::GetAtt"][0]
    reads = [s for p in template["Resources"].values() if p["Type"] == "AWS::IAM::Policy"
             and {"Ref": role} in p["Properties"]["Roles"]
             for s in p["Properties"]["PolicyDocument"]["Statement"]
             if "ssm:GetParameter" in s["Action"]]
    parameter = stack.node.find_child("Benchmark").decision_parameter.node.default_child
    assert len(reads) == 1 and {"Ref": stack.get_logical_id(parameter)} in \
        reads[0]["Resource"]["Fn::Join"][1]


def test_fails_on_a_benchmark_of_another_framework(source_dir):
    with pytest.raises(ValueError, match=r"registration: benchmark must be a CompilerBenchmark "
                                         r"of this pipeline's framework \(PyTorch 1.13.1\) .*"
                                         r"got PyTorch 1.12.0$"):
        _with_benchmark(new_stack(), source_dir, version="1.12.0")


# --- the deployment account's read --------------------------------------------------------

DEPLOYMENT = "210987654321"


def _kms_bert(stack: cdk.Stack, source_dir: Path, **registration) -> TrainingPipeline:
    from aws_cdk import aws_kms as kms

    return TrainingPipeline(
        stack, "Bert", framework=Framework.pytorch("1.13.1"),
        compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
        source_dir=source_dir, entry_point="train.py", pipeline_name=_PIPELINE,
        kms_key=kms.Key(stack, "Key", enable_key_rotation=True),
        channels=[InputChannel("train", "s3://team-data/bert/train/"),
                  InputChannel("validation", "s3://team-data/bert/validation/")],
        registration=ModelRegistration(model_package_group_name="bert-classifier",
                                       **registration))


def _allowed(statements: list[dict], request: dict) -> bool:
    """A resource policy as AWS evaluates it for a request from another account: an
    explicit deny wins, else an allow must match principal, action, resource and every
    condition (a condition key the request lacks, or an operator this reader does not know,
    is not met)."""
    import fnmatch

    def listed(value):
        return value if isinstance(value, list) else [value]

    def principal(statement):
        given = statement.get("Principal", {})
        arns = ["*"] if given == "*" else listed(given.get("AWS", []))
        return any(a in ("*", request["principal"], request["principal"].split(":")[4])
                   for a in arns)

    def conditions(statement):
        for operator, tests in statement.get("Condition", {}).items():
            for key, wanted in tests.items():
                if key not in request["context"]:
                    return False
                have = str(request["context"][key])
                if operator in ("StringEquals", "ArnEquals"):
                    met = have in listed(wanted)
                elif operator in ("StringLike", "ArnLike"):
                    met = any(fnmatch.fnmatchcase(have, w) for w in listed(wanted))
                elif operator == "Bool":
                    met = have.lower() in [str(w).lower() for w in listed(wanted)]
                else:
                    return False
                if not met:
                    return False
        return True

    matching = [s for s in statements if principal(s)
                and any(fnmatch.fnmatchcase(request["action"], a) for a in listed(s["Action"]))
                and any(fnmatch.fnmatchcase(request["resource"], r)
                        for r in listed(s["Resource"])) and conditions(s)]
    return not any(s["Effect"] == "Deny" for s in matching) and \
        any(s["Effect"] == "Allow" for s in matching)


def _policies(template: dict) -> tuple[str, list[dict], list[dict]]:
    """The output bucket's name, its bucket policy and its key's policy, rendered."""
    from tests.helpers import render_tree

    resources = template["Resources"]
    (bucket_policy,) = [r for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"
                        and "AccessLogs" not in json.dumps(r["Properties"]["Bucket"])]
    bucket = render_tree(bucket_policy["Properties"]["Bucket"], template)
    (key,) = [r for r in resources.values() if r["Type"] == "AWS::KMS::Key"]
    return (bucket,
            render_tree(bucket_policy["Properties"]["PolicyDocument"], template)["Statement"],
            render_tree(key["Properties"]["KeyPolicy"], template)["Statement"])


@pytest.mark.parametrize(("account", "key", "tls", "reads"), [
    (DEPLOYMENT, f"{_PIPELINE}/output/pipelines-0123-Train-abc/output/model.tar.gz", True, True),
    (DEPLOYMENT, f"{_PIPELINE}/model-metrics/0123456789ab/statistics.json", True, True),
    (DEPLOYMENT, f"{_PIPELINE}/checkpoints/0123456789ab/checkpoint.pt", True, False),
    (DEPLOYMENT, f"{_PIPELINE}/output/pipelines-0123-Train-abc/output/output.tar.gz", True,
     False),
    (DEPLOYMENT, "other-pipeline/output/job/output/model.tar.gz", True, False),
    (DEPLOYMENT, f"{_PIPELINE}/output/pipelines-0123-Train-abc/output/model.tar.gz", False,
     False),
    ("999999999999", f"{_PIPELINE}/output/pipelines-0123-Train-abc/output/model.tar.gz", True,
     False),
])
def test_the_deployment_account_reads_this_pipelines_models_and_reports_only(
        source_dir, account, key, tls, reads):
    stack = new_stack()
    _kms_bert(stack, source_dir, deployment_account=DEPLOYMENT)
    bucket, bucket_statements, key_statements = _policies(Template.from_stack(stack).to_json())
    principal = f"arn:aws:iam::{account}:root"
    get = {"principal": principal, "action": "s3:GetObject",
           "resource": f"arn:aws:s3:::{bucket}/{key}",
           "context": {"aws:SecureTransport": str(tls).lower()}}
    # S3 decrypts with the bucket key, in the requester's name, through S3.
    decrypt = {"principal": principal, "action": "kms:Decrypt",
               "resource": "arn:aws:kms:us-east-1:123456789012:key/1234abcd",
               "context": {"kms:ViaService": "s3.us-east-1.amazonaws.com",
                           "kms:EncryptionContext:aws:s3:arn": f"arn:aws:s3:::{bucket}"}}
    assert _allowed(bucket_statements, get) is reads
    assert _allowed(key_statements, decrypt) is (account == DEPLOYMENT)


def test_the_deployment_account_decrypts_only_through_s3(source_dir):
    stack = new_stack()
    _kms_bert(stack, source_dir, deployment_account=DEPLOYMENT)
    bucket, _, key_statements = _policies(Template.from_stack(stack).to_json())
    request = {"principal": f"arn:aws:iam::{DEPLOYMENT}:root", "action": "kms:Decrypt",
               "resource": "arn:aws:kms:us-east-1:123456789012:key/1234abcd"}
    through_s3 = {"kms:ViaService": "s3.us-east-1.amazonaws.com",
                  "kms:EncryptionContext:aws:s3:arn":
                      f"arn:aws:s3:::{bucket}/{_PIPELINE}/model-metrics/1/statistics.json"}
    assert _allowed(key_statements, {**request, "context": through_s3})
    # A direct call, or another service's, gets nothing: what S3 decrypts for it is what
    # the bucket policy lets it read.
    assert not _allowed(key_statements, {**request, "context": {
        "kms:EncryptionContext:aws:s3:arn": f"arn:aws:s3:::{bucket}"}})
    assert not _allowed(key_statements, {**request, "context": {
        **through_s3, "kms:ViaService": "sqs.us-east-1.amazonaws.com"}})
    assert not _allowed(key_statements, {**request, "action": "kms:Encrypt",
                                         "context": through_s3})


def test_without_a_deployment_account_no_other_account_reads(source_dir):
    stack = new_stack()
    _kms_bert(stack, source_dir)
    _, bucket_statements, key_statements = _policies(Template.from_stack(stack).to_json())
    assert DEPLOYMENT not in json.dumps([bucket_statements, key_statements])


def test_an_imported_bucket_cannot_grant_the_read_and_says_so(source_dir):
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Annotations

    stack = new_stack()
    TrainingPipeline(
        stack, "Bert", framework=Framework.pytorch("1.13.1"), instance_type="ml.g5.2xlarge",
        source_dir=source_dir, entry_point="train.py", pipeline_name=_PIPELINE,
        output_bucket=s3.Bucket.from_bucket_name(stack, "Outputs", "team-outputs"),
        channels=[InputChannel("train", "s3://team-data/bert/train/"),
                  InputChannel("validation", "s3://team-data/bert/validation/")],
        registration=ModelRegistration(model_package_group_name="bert-classifier",
                                       deployment_account=DEPLOYMENT))
    Annotations.from_stack(stack).has_warning("/Team/Bert", Match.string_like_regexp(
        r"deployment_account 210987654321 cannot read the artifacts of an imported bucket: "
        r"grant it s3:GetObject on bert-training/output/\*/output/model.tar.gz and "
        r"bert-training/model-metrics/\*"))


def test_synth_with_reports_and_a_deployment_account_is_clean_under_the_scanners(
        tmp_path, source_dir):
    from cdk_nag import AwsSolutionsChecks

    from compiled_training import CompiledTrainingChecks
    from compiled_training.nag.rule_pack import PACK
    from compiled_training.wiring.acknowledgements import acknowledge
    from tests.helpers import cfn_lint

    app = cdk.App(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
    stack = new_stack(app=app)
    pipeline = _kms_bert(stack, source_dir, deployment_account=DEPLOYMENT, max_regression=0.01)
    acknowledge(pipeline.resource, "CompiledTraining-CT9",
                "Training Compiler's last release is what this team runs.", pack=PACK)
    # Not this feature's: the execution role's grant_encrypt_decrypt on a customer key
    # (kms:GenerateDataKey*, kms:ReEncrypt*), whichever pipeline has a kms_key.
    for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
        acknowledge(pipeline.role, f"AwsSolutions-IAM5[Action::{action}]",
                    "The training job's own use of the pipeline's key; outside this test.")
    app.synth()  # raises on any unacknowledged cdk-nag finding
    assert cfn_lint(str(tmp_path / "Team.template.json")) == []
    # And checkov: nothing failed, every skip explained (the execution role's key grant is
    # acknowledged above for cdk-nag only; checkov does not flag it).
    import subprocess

    from tests.environments import CHECKOV, require

    checkov = require(CHECKOV).folder / "bin" / "checkov"
    result = subprocess.run(
        [str(checkov), "-f", str(tmp_path / "Team.template.json"), "--framework",
         "cloudformation", "--skip-download", "--output", "json"],
        capture_output=True, text=True, timeout=600, check=False)
    report = json.loads(result.stdout)
    assert [f"{f['check_id']} {f['resource']}" for f in report["results"]["failed_checks"]] == []
    assert all(s["check_result"].get("suppress_comment")
               for s in report["results"]["skipped_checks"])
    assert report["summary"]["passed"] > 50  # it really checked the template


# --- notification -------------------------------------------------------------------------

def test_a_new_version_and_its_approval_reach_the_team_topic(source_dir):
    from tests.delivery import refusals

    stack = new_stack()
    schedule = RetrainingSchedule(stack, "Schedule", pipeline=_bert(stack, source_dir),
                                  team="nlp", expression="cron(0 1 ? * MON *)")
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Events::Rule", {
        "EventPattern": {"source": ["aws.sagemaker"],
                         "detail-type": ["SageMaker Model Package State Change"],
                         "detail": {"ModelPackageGroupName": ["bert-classifier"]}},
        "Targets": [Match.object_like({"InputTransformer": Match.object_like({
            "InputPathsMap": Match.object_like({
                "detail-ModelPackageArn": "$.detail.ModelPackageArn",
                "detail-ModelApprovalStatus": "$.detail.ModelApprovalStatus"}),
            "InputTemplate": Match.string_like_regexp(
                r"Team nlp: model version <detail-ModelPackageArn> of group bert-classifier is "
                r"<detail-ModelApprovalStatus> .*Console: https://console.aws.amazon.com/"
                r"sagemaker/home\?region=<region>#/model-registry/bert-classifier")})})]})
    rendered = template.to_json()
    assert refusals(rendered) == []
    (events_statement,) = [s for p in template.find_resources("AWS::SNS::TopicPolicy").values()
                           for s in p["Properties"]["PolicyDocument"]["Statement"]
                           if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    sources = events_statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    assert {"Fn::GetAtt": [stack.get_logical_id(schedule.model_rule.node.default_child),
                           "Arn"]} in sources
    assert len(sources) == 2


def test_no_model_rule_without_a_registration(source_dir):
    stack = new_stack()
    pipeline = TrainingPipeline(stack, "Plain", framework=Framework.xgboost("1.7-1"),
                                instance_type="ml.m6i.12xlarge")
    schedule = RetrainingSchedule(stack, "Schedule", pipeline=pipeline, team="tab",
                                  expression="cron(0 1 ? * MON *)")
    assert schedule.model_rule is None
    Template.from_stack(stack).resource_count_is("AWS::Events::Rule", 1)


# --- the reference platform -----------------------------------------------------------------

def test_reference_teams_register_after_their_gates(reference_assembly):
    from compiled_training.tools.summary import render
    from tests.delivery import refusals
    from tests.helpers import templates

    found = templates(reference_assembly)
    gates = {}
    for team in ("DocumentClassification", "Tabular"):
        definition = definitions(found[team])[0]  # the production pipeline (before a benchmark)
        gate = _gate(definition)
        gates[team] = gate["Arguments"]["Conditions"][0]["LeftValue"]["Get"]
        assert gate["Arguments"]["IfSteps"][0]["Type"] == "RegisterModel"
        assert refusals(found[team]) == [], team
    assert gates == {"DocumentClassification": ACCURACY, "Tabular": AUC}
    assert all(GATE_STEP not in json.dumps(d) for d in definitions(found["Creative"]))
    text = render(Path(reference_assembly.directory))
    assert ("Tabular: registers into group tabular-xgboost, PendingManualApproval, if "
            "validation:auc >= MinValidationAuc (default 0.75)") in text


@pytest.mark.parametrize(("value", "message"), [
    ({"gate_threshold": 0.9}, r"Tabular: registration.model_package_group_name is required"),
    ({"model_package_group_name": "t", "approval": "Approved"},
     r"Tabular: registration.approval is not a known key; allowed: model_package_group_name, "),
    ({"model_package_group_name": "t", "realtime_instance_types": "ml.m5.large"},
     r"Tabular: registration.realtime_instance_types must be a list, got str 'ml.m5.large'"),
    ({"model_package_group_name": "t", "gate_metric": "validation_accuracy"},
     r"Tabular: TrainingPipeline Tabular/Pipeline: registration: gate_metric must be a metric "
     r"the training job reports \(train:auc, validation:auc\), got 'validation_accuracy'"),
])
def test_fails_on_a_wrong_registration_in_cdk_json(tmp_path, value, message):
    from tests.helpers import cdk_json_context, synth_reference_app

    context = cdk_json_context()
    context["compiled-training:teams"]["Tabular"]["registration"] = value
    with pytest.raises(ValueError, match=message):
        synth_reference_app(tmp_path, context)

