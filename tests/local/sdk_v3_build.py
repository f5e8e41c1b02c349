"""Builds pipelines as teams write them with the SageMaker SDK v3 (``sagemaker`` 3.x), in the
environment that has it (``tests/environments.py``: v2, the other oracle, cannot share one).

Run by that environment's Python: ``sdk_v3_build.py SPECS.json OUT``. For each spec (a name,
an image, a source folder, hyperparameters) it builds a ``ModelTrainer`` training step in a
pipeline against moto (the SDK uploads the code and its driver scripts, as it would to S3),
then writes ``OUT/<name>/definition.json`` and the uploads under ``OUT/<name>/s3/<bucket>/``.
What stands in for AWS: moto; the role is not validated (``SAGEMAKER_VALIDATE_ROLE=false``:
moto has no IAM policy simulator).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REGION = "eu-west-1"
BUCKET = "v3-pipelines"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
os.environ.update(AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local",
                  AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
                  SAGEMAKER_VALIDATE_ROLE="false")


def image(spec: dict) -> str:
    """The image, as v3's own image_uris.retrieve names it (a team's own: as given)."""
    from sagemaker.core import image_uris

    framework = spec["image"]
    if framework.startswith("own:"):
        return framework.removeprefix("own:")
    arguments = {"pytorch": {"version": "2.9", "instance_type": "ml.m5.xlarge"},
                 "huggingface": {"version": "4.49.0", "base_framework_version": "pytorch2.5.1",
                                 "instance_type": "ml.g5.xlarge"},
                 "sklearn": {"version": "1.2-1"}, "xgboost": {"version": "1.7-1"}}[framework]
    return image_uris.retrieve(framework=framework, region=REGION, image_scope="training",
                               **arguments)


def build(spec: dict, out: Path) -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET,
                         CreateBucketConfiguration={"LocationConstraint": REGION})
        from sagemaker.core.workflow.pipeline_context import PipelineSession
        from sagemaker.mlops.workflow.pipeline import Pipeline
        from sagemaker.mlops.workflow.steps import TrainingStep
        from sagemaker.train import ModelTrainer
        from sagemaker.train.configs import Compute, InputData, SourceCode

        session = PipelineSession(boto_session=boto3.Session(region_name=REGION),
                                  default_bucket=BUCKET)
        if spec.get("flow"):
            write(spec, out, flow(spec, session), s3)
            return
        if spec.get("function"):
            write(spec, out, Pipeline(name=spec["name"], steps=[function_step(spec)],
                                      sagemaker_session=session), s3)
            return
        hyperparameters = spec.get("hyperparameters", {})
        if spec.get("sweep"):  # each item's own hyperparameters, read from the current item
            from sagemaker.mlops.workflow.for_each_step import CurrentItem

            hyperparameters = {key: getattr(CurrentItem(), key) for key in spec["sweep"][0]}
        trainer = ModelTrainer(
            training_image=image(spec), role=ROLE, sagemaker_session=session,
            source_code=SourceCode(source_dir=spec["source_dir"], entry_script="train.py"),
            compute=Compute(instance_type=spec.get("instance_type", "ml.m5.xlarge"),
                            instance_count=1),
            hyperparameters=hyperparameters, base_job_name=spec["name"])
        if spec.get("metric"):
            from sagemaker.core.shapes import MetricDefinition

            trainer = trainer.with_metric_definitions([MetricDefinition(
                name=spec["metric"], regex=f"{spec['metric']}=([0-9.]+)")])
        step = TrainingStep(name="Train", step_args=trainer.train(input_data_config=[
            InputData(channel_name="train", data_source=f"s3://{BUCKET}/data/train/")]))
        steps = sweep(spec, step) if spec.get("sweep") else [step]
        if spec.get("notify"):  # a step run on the training step's failure (a run condition)
            from sagemaker.mlops.workflow.fail_step import FailStep
            from sagemaker.mlops.workflow.step_dependency import StepDependency, TriggerCondition

            steps.append(FailStep(name="TrainingFailed", error_message="training failed",
                                  depends_on=[StepDependency(step, TriggerCondition.FAILED)]))
        if spec.get("cleanup"):  # the training job's outputs deleted once it is done
            from sagemaker.mlops.workflow.cleanup_step import CleanupStep, S3CleanupSource

            steps.append(CleanupStep(name="Cleanup", s3_sources=[S3CleanupSource(step)]))
        write(spec, out, Pipeline(name=spec["name"], steps=steps, sagemaker_session=session), s3)


def write(spec: dict, out: Path, pipeline: object, s3: object) -> None:
    """The definition, and what the SDK uploaded, as the run's --data will give it."""
    folder = out / spec["name"]
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text(pipeline.definition())  # type: ignore[attr-defined]
    for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):  # type: ignore[attr-defined]
        target = folder / "s3" / BUCKET / item["Key"]
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, item["Key"], str(target))  # type: ignore[attr-defined]


def flow(spec: dict, session: object) -> object:
    """Process, then train on what it wrote, then a condition on the processing step's
    property file that registers the model, with parameters (one held to its EnumValues):
    v3's own classes."""
    from sagemaker.core.processing import ScriptProcessor
    from sagemaker.core.shapes import (
        ProcessingInput,
        ProcessingOutput,
        ProcessingS3Input,
        ProcessingS3Output,
    )
    from sagemaker.core.workflow.conditions import ConditionGreaterThanOrEqualTo
    from sagemaker.core.workflow.functions import JsonGet
    from sagemaker.core.workflow.parameters import ParameterFloat, ParameterString
    from sagemaker.core.workflow.properties import PropertyFile
    from sagemaker.mlops.workflow.condition_step import ConditionStep
    from sagemaker.mlops.workflow.fail_step import FailStep
    from sagemaker.mlops.workflow.model_step import ModelStep
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import ProcessingStep, TrainingStep
    from sagemaker.serve.model_builder import ModelBuilder
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import Compute, InputData, SourceCode

    split = ParameterString(name="Split", default_value="train", enum_values=["train", "all"])
    floor = ParameterFloat(name="MinRows", default_value=1.0)
    processor = ScriptProcessor(role=ROLE, image_uri=image({"image": "sklearn"}),
                                command=["python3"], instance_count=1,
                                instance_type="ml.m5.large", sagemaker_session=session)
    stats = PropertyFile(name="Stats", output_name="stats", path="stats.json")
    prepared = f"s3://{BUCKET}/prepared"
    process = ProcessingStep(name="Prepare", step_args=processor.run(
        code=str(Path(spec["source_dir"]) / "prepare.py"), arguments=["--split", split],
        inputs=[ProcessingInput(input_name="raw", s3_input=ProcessingS3Input(
            s3_uri=f"s3://{BUCKET}/data/train/", local_path="/opt/ml/processing/raw",
            s3_data_type="S3Prefix", s3_input_mode="File"))],
        outputs=[ProcessingOutput(output_name=name, s3_output=ProcessingS3Output(
            s3_uri=f"{prepared}/{name}", local_path=f"/opt/ml/processing/{name}",
            s3_upload_mode="EndOfJob")) for name in ("rows", "stats")]),
        property_files=[stats])
    trainer = ModelTrainer(
        training_image=image({"image": "pytorch"}), role=ROLE, sagemaker_session=session,
        source_code=SourceCode(source_dir=spec["source_dir"], entry_script="train.py"),
        compute=Compute(instance_type="ml.m5.xlarge", instance_count=1),
        hyperparameters=spec.get("hyperparameters", {}), base_job_name=spec["name"])
    train = TrainingStep(name="Train", depends_on=[process], step_args=trainer.train(
        input_data_config=[InputData(channel_name="train", data_source=f"{prepared}/rows")]))
    model = ModelBuilder(s3_model_data_url=train.properties.ModelArtifacts.S3ModelArtifacts,
                         image_uri=image({"image": "pytorch"}).replace("-training:",
                                                                       "-inference:"),
                         role_arn=ROLE, sagemaker_session=session)
    register = ModelStep(name="Register", step_args=model.register(
        model_package_group_name=f"{spec['name']}-models", content_types=["application/json"],
        response_types=["application/json"], inference_instances=["ml.m5.large"],
        approval_status="PendingManualApproval"))
    check = ConditionStep(name="EnoughRows", depends_on=[train], conditions=[
        ConditionGreaterThanOrEqualTo(left=JsonGet(step_name=process.name, property_file=stats,
                                                   json_path="rows"), right=floor)],
        if_steps=[register],
        else_steps=[FailStep(name="TooFewRows", error_message="too few rows")])
    return Pipeline(name=spec["name"], parameters=[split, floor],
                    steps=[process, train, check], sagemaker_session=session)


def function_step(spec: dict) -> object:
    """A ``@step`` function: v3 pickles it and its arguments to S3, and its job's own driver
    (``job_driver.sh``) runs it in the image's Python, which must have the SDK."""
    from sagemaker.mlops.workflow.function_step import step

    @step(name="Double", image_uri=image({"image": "pytorch"}), instance_type="ml.m5.large",
          role=ROLE)
    def double(x: int) -> int:
        print("v3 marker: the @step function ran with", x)
        if spec["function"] == "raises":
            raise RuntimeError("the v3 step function failed")
        return x * 2

    return double(21)


def sweep(spec: dict, train: object) -> list[object]:
    """A ForEach step training once a hyperparameter set (JSON objects), the best by the
    metric picked (MaxBy) and held to a floor by a condition on the pick."""
    from sagemaker.core.workflow.conditions import ConditionGreaterThanOrEqualTo
    from sagemaker.mlops.workflow.condition_step import ConditionStep
    from sagemaker.mlops.workflow.fail_step import FailStep
    from sagemaker.mlops.workflow.for_each_step import (
        ForEachSelector,
        ForEachStep,
        IterationOutput,
    )

    metric = spec["metric"]
    for_each = ForEachStep(
        name="Sweep", iterable_items=[json.dumps(item) for item in spec["sweep"]],
        max_concurrency=2, for_each_body=[train], selector=ForEachSelector(
            pick="MaxBy", field=IterationOutput(train).FinalMetricDataList[metric].Value))
    floor = ConditionStep(name="GoodEnough", conditions=[ConditionGreaterThanOrEqualTo(
        left=for_each.properties.Selected.FinalMetricDataList[metric].Value,
        right=spec["floor"])], if_steps=[], else_steps=[FailStep(
            name="BelowFloor", error_message=f"the best {metric} is below {spec['floor']}")])
    return [for_each, floor]


def main() -> None:
    specs, out = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
    for spec in specs:
        build(spec, out)


if __name__ == "__main__":
    main()
