"""The SageMaker SDK v2 as an offline oracle: what would it build for a case?

Offline means: region set, instance metadata disabled, the role as a full ARN, source_dir
as an S3 URI of a sourcedir.tar.gz, an explicit output_path, telemetry opted out through
``sagemaker_config`` and ``use_custom_job_prefix=False``. ``Pipeline.definition()`` then
makes no AWS call.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

from compiled_training import Distribution
from compiled_training_runtime import contract

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["SAGEMAKER_SUPPRESS_V2_WARNING"] = "1"
logging.getLogger("sagemaker").setLevel(logging.ERROR)

SDK_OUTPUT = "s3://output-bucket/parity/output"
ROLE = "arn:aws:iam::123456789012:role/training"
_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}


@dataclass(frozen=True)
class SdkCase:
    estimator: str
    version: str
    pytorch_version: str | None
    py_version: str
    instance_type: str
    instance_count: int
    distribution: Distribution | None
    """None: omitted (the SDK treats it as ``Distribution.NONE``)."""
    compiled: bool
    debugger: bool = False
    profiler: bool = False

    def __str__(self) -> str:
        framework = f"{self.estimator}{self.version}" + (
            f"-pt{self.pytorch_version}" if self.pytorch_version else "")
        distribution = self.distribution.value if self.distribution else "default"
        return (f"{framework}-{self.instance_type}x{self.instance_count}-{distribution}-"
                f"{'compiled' if self.compiled else 'eager'}")


@cache
def _session() -> Any:
    import sagemaker.utils
    from sagemaker.config.config import validate_sagemaker_config
    from sagemaker.workflow.pipeline_context import PipelineSession

    # The SDK re-validates its config against a JSON schema on every lookup (~0.3 s, twenty
    # lookups a case). Ours is one fixed dict: validate it once, for real, then let the SDK
    # skip re-validating that same object (any other config still goes through).
    validate_sagemaker_config(_CONFIG)
    original = sagemaker.utils.validate_sagemaker_config

    def validate_once(config: Any = None) -> Any:
        return None if config is _CONFIG else original(config)

    sagemaker.utils.validate_sagemaker_config = validate_once
    # image_uris.retrieve re-reads botocore's endpoints file (1 MB of JSON, ~0.05 s) for every
    # URI, twice a case, only to name the registry host: read it once.
    sagemaker.utils._botocore_resolver = cache(sagemaker.utils._botocore_resolver)
    return PipelineSession(sagemaker_config=_CONFIG, default_bucket="output-bucket")


def _distribution(distribution: Distribution | None) -> dict[str, Any] | None:
    return {
        None: None,
        Distribution.NONE: None,
        Distribution.PYTORCHXLA: {"pytorchxla": {"enabled": True}},
        Distribution.TORCH_DISTRIBUTED: {"torch_distributed": {"enabled": True}},
        Distribution.SMDISTRIBUTED_DATA_PARALLEL: {"smdistributed": {"dataparallel": {"enabled": True}}},
    }[distribution]


def sdk_training_arguments(case: SdkCase, source_s3_uri: str,
                           image_uri: str | None = None,
                           environment: dict[str, str] | None = None,
                           hyperparameters: dict[str, Any] | None = None
                           ) -> dict[str, Any] | None:
    """The SDK's training-step arguments for a case, or None when the SDK rejects it;
    ``environment`` and ``hyperparameters`` (beside the case's own) as an estimator takes
    them."""
    from sagemaker.huggingface import HuggingFace
    from sagemaker.huggingface import TrainingCompilerConfig as HuggingFaceCompilerConfig
    from sagemaker.pytorch import PyTorch
    from sagemaker.pytorch import TrainingCompilerConfig as PyTorchCompilerConfig
    from sagemaker.workflow.parameters import ParameterInteger
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.pipeline_definition_config import PipelineDefinitionConfig
    from sagemaker.workflow.steps import TrainingStep

    epochs = ParameterInteger(name="Epochs", default_value=3)
    kwargs: dict[str, Any] = {
        "entry_point": "train.py",
        "source_dir": source_s3_uri,
        "role": ROLE,
        "instance_type": case.instance_type,
        "instance_count": case.instance_count,
        "py_version": case.py_version,
        "output_path": SDK_OUTPUT,
        "sagemaker_session": _session(),
        "hyperparameters": {"epochs": epochs, "learning_rate": 5e-5, "model_family": "bert",
                            **(hyperparameters or {})},
        "metric_definitions": contract.metric_definitions(),
        "disable_profiler": not case.profiler,
    }
    if not case.debugger:
        kwargs["debugger_hook_config"] = False
    if image_uri:
        kwargs["image_uri"] = image_uri
    if environment:
        kwargs["environment"] = environment
    distribution = _distribution(case.distribution)
    if distribution:
        kwargs["distribution"] = distribution
    try:
        if case.estimator == "huggingface":
            if case.compiled:
                kwargs["compiler_config"] = HuggingFaceCompilerConfig()
            estimator = HuggingFace(transformers_version=case.version,
                                    pytorch_version=case.pytorch_version, **kwargs)
        else:
            if case.compiled:
                kwargs["compiler_config"] = PyTorchCompilerConfig()
            estimator = PyTorch(framework_version=case.version, **kwargs)
        step = TrainingStep(name="Train", step_args=estimator.fit())
        pipeline = Pipeline(
            name="parity", steps=[step], parameters=[epochs], sagemaker_session=_session(),
            pipeline_definition_config=PipelineDefinitionConfig(use_custom_job_prefix=False),
        )
        definition = json.loads(pipeline.definition())
    except ValueError:
        return None
    return definition["Steps"][0]["Arguments"]


def sdk_registration_steps(*, image_uri: str, group: str, approval_status: str,
                           metric: str, threshold: float, higher_is_better: bool,
                           realtime: list[str], transform: list[str], content_types: list[str],
                           response_types: list[str], metadata: dict[str, Any],
                           description: str, report: dict[str, Any] | None = None
                           ) -> dict[str, Any]:
    """The SDK's gate (a ConditionStep) with its RegisterModel and Fail steps, as it writes
    them after a training step named ``Train``: the step JSON, by name (branches included).

    With ``report`` (function_arn, bucket, prefix, metrics as (job name, report name) pairs,
    problem_type, and max_regression or None), first a LambdaStep ``ModelMetrics`` whose
    output is the version's ``ModelMetrics`` report, and with max_regression a ConditionStep
    on its verdict around the RegisterModel (returned as "Metrics")."""
    from sagemaker.estimator import Estimator
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import (
        ConditionGreaterThanOrEqualTo,
        ConditionLessThanOrEqualTo,
    )
    from sagemaker.workflow.execution_variables import ExecutionVariables
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.functions import Join
    from sagemaker.workflow.parameters import ParameterFloat
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.pipeline_definition_config import PipelineDefinitionConfig
    from sagemaker.workflow.step_collections import RegisterModel
    from sagemaker.workflow.steps import TrainingStep

    estimator = Estimator(image_uri=image_uri, role=ROLE, instance_type="ml.m5.xlarge",
                          instance_count=1, output_path=SDK_OUTPUT,
                          sagemaker_session=_session())
    train = TrainingStep(name="Train", step_args=estimator.fit())
    name = ("Min" if higher_is_better else "Max") + "".join(
        c for c in metric.title() if c.isalnum())
    limit = ParameterFloat(name=name, default_value=threshold)
    value = train.properties.FinalMetricDataList[metric].Value
    sdk_metadata = {k: ExecutionVariables.PIPELINE_EXECUTION_ARN if v == "<execution>" else v
                    for k, v in metadata.items()}
    sdk_metadata.update({"gate_metric": metric, "gate_value": Join(on="", values=[value]),
                         "gate_threshold": Join(on="", values=[limit])})
    parameters = [limit]
    steps: list[Any] = [train]
    model_metrics = lambda_step = None
    if report is not None:
        from sagemaker.lambda_helper import Lambda
        from sagemaker.model_metrics import MetricsSource, ModelMetrics
        from sagemaker.workflow.conditions import ConditionEquals
        from sagemaker.workflow.lambda_step import (
            LambdaOutput,
            LambdaOutputTypeEnum,
            LambdaStep,
        )

        values: list[Any] = []
        for index, (job_metric, report_name) in enumerate(report["metrics"]):
            values += [("," if index else "") + f"{report_name}=",
                       train.properties.FinalMetricDataList[job_metric].Value]
        inputs: dict[str, Any] = {
            "metrics": Join(on="", values=values), "problem_type": report["problem_type"],
            "bucket": report["bucket"], "key": Join(on="/", values=[
                report["prefix"], ExecutionVariables.PIPELINE_EXECUTION_ID, "statistics.json"])}
        outputs = [LambdaOutput("statistics", LambdaOutputTypeEnum.String)]
        if report["max_regression"] is not None:
            allowed = ParameterFloat(name="MaxRegressionFromApproved",
                                     default_value=report["max_regression"])
            parameters.append(allowed)
            inputs.update({"group": group, "gate_metric": dict(report["metrics"])[metric],
                           "higher_is_better": higher_is_better, "max_regression": allowed,
                           "reports": f"s3://{report['bucket']}/{report['prefix']}/"})
            outputs += [LambdaOutput("within_tolerance", LambdaOutputTypeEnum.Boolean),
                        LambdaOutput("approved_version", LambdaOutputTypeEnum.String),
                        LambdaOutput("comparison", LambdaOutputTypeEnum.String)]
            sdk_metadata["approved_comparison"] = None  # set once the step exists
        lambda_step = LambdaStep(name="ModelMetrics", lambda_func=Lambda(
            function_arn=report["function_arn"], session=_session()), inputs=inputs,
            outputs=outputs)
        steps.append(lambda_step)
        model_metrics = ModelMetrics(model_statistics=MetricsSource(
            content_type="application/json",
            s3_uri=lambda_step.properties.Outputs["statistics"]))
        if "approved_comparison" in sdk_metadata:
            sdk_metadata["approved_comparison"] = lambda_step.properties.Outputs["comparison"]
    register = RegisterModel(
        name="RegisterModel", estimator=estimator,
        model_data=train.properties.ModelArtifacts.S3ModelArtifacts, image_uri=image_uri,
        content_types=content_types, response_types=response_types,
        inference_instances=realtime, transform_instances=transform,
        model_package_group_name=group, approval_status=approval_status,
        customer_metadata_properties=sdk_metadata, description=description,
        model_metrics=model_metrics)
    then: Any = register
    if lambda_step is not None and report is not None and report["max_regression"] is not None:
        then = ConditionStep(
            name="NoWorseThanApproved", conditions=[ConditionEquals(
                left=lambda_step.properties.Outputs["within_tolerance"], right=True)],
            if_steps=[register], else_steps=[FailStep(
                name="WorseThanApproved", error_message=Join(on="", values=[
                    "Model not registered: ", lambda_step.properties.Outputs["comparison"]]))])
    compare = ConditionGreaterThanOrEqualTo if higher_is_better else ConditionLessThanOrEqualTo
    below = "below" if higher_is_better else "above"
    fail = FailStep(name="QualityGateFailed", error_message=Join(on="", values=[
        f"Model not registered: {metric} ", value, f" is {below} the threshold {name} ",
        limit]))
    gate = ConditionStep(name="QualityGate", conditions=[compare(left=value, right=limit)],
                         if_steps=[then], else_steps=[fail])
    pipeline = Pipeline(
        name="parity", steps=[*steps, gate], parameters=parameters,
        sagemaker_session=_session(),
        pipeline_definition_config=PipelineDefinitionConfig(use_custom_job_prefix=False))
    with warnings.catch_warnings():  # "won't be updated": the Lambda is only described here
        warnings.simplefilter("ignore", UserWarning)
        definition = json.loads(pipeline.definition())
    found = {step["Name"]: step for step in definition["Steps"]}
    return {"Parameters": definition["Parameters"], "Gate": found["QualityGate"],
            "Metrics": found.get("ModelMetrics")}


def sdk_gated_training_definition(source_s3_uri: str, data_s3_uri: str,
                                  hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """A pipeline a team builds with the SDK: a PyTorch training step on the runtime's code
    (``train`` a String parameter, ``validation`` fixed), then a condition on its
    ``validation_accuracy`` against a Float parameter with a ``Fail`` step below it. The whole
    definition, as ``pipeline.definition()`` writes it."""
    from sagemaker.inputs import TrainingInput
    from sagemaker.pytorch import PyTorch
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.functions import Join
    from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.pipeline_definition_config import PipelineDefinitionConfig
    from sagemaker.workflow.steps import TrainingStep

    steps = ParameterInteger(name="MaxSteps", default_value=4)
    train_data = ParameterString(name="TrainData", default_value=f"{data_s3_uri}/train/")
    minimum = ParameterFloat(name="MinAccuracy", default_value=0.9)
    estimator = PyTorch(
        entry_point="train.py", source_dir=source_s3_uri, role=ROLE,
        framework_version="2.8.0", py_version="py312", instance_type="ml.g5.xlarge",
        instance_count=1, output_path=SDK_OUTPUT, sagemaker_session=_session(),
        hyperparameters={"max_steps": steps, **hyperparameters},
        metric_definitions=contract.metric_definitions(), disable_profiler=True,
        debugger_hook_config=False)
    train = TrainingStep(name="Train", step_args=estimator.fit(inputs={
        "train": TrainingInput(train_data),
        "validation": TrainingInput(f"{data_s3_uri}/validation/")}))
    accuracy = train.properties.FinalMetricDataList["validation_accuracy"].Value
    gate = ConditionStep(
        name="Gate", conditions=[ConditionGreaterThanOrEqualTo(left=accuracy, right=minimum)],
        if_steps=[], else_steps=[FailStep(name="TooInaccurate", error_message=Join(
            on="", values=["validation_accuracy ", accuracy, " is below ", minimum]))])
    pipeline = Pipeline(
        name="sdk-built", steps=[train, gate], parameters=[steps, train_data, minimum],
        sagemaker_session=_session(),
        pipeline_definition_config=PipelineDefinitionConfig(use_custom_job_prefix=False))
    return dict(json.loads(pipeline.definition()))
