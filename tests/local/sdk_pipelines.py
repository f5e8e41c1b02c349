"""Pipelines as teams build them with the SageMaker SDK v2, after AWS's SageMaker Pipelines
samples (the abalone pipeline: preprocess, train, evaluate, a condition on a property file,
register or fail) and the SDK's own workflow tests (``tests/integ/sagemaker/workflow/``:
processing and training steps, parameterized code, ``FrameworkProcessor``, Lambda, the
repack step ``RegisterModel`` adds, ``Fail`` with ``Join``). The builder code and the scripts
are this repository's; the pipelines' shapes are theirs.

The SDK runs inside moto (what stands in for AWS: it uploads the code it packs, as it would to
S3); every object it uploaded is written to a folder the run is given with ``--data``. The
scripts read and write ``/opt/ml/...`` as the container has it. Each builder takes
``failing``: the name of the one script that raises instead of working (a twin's).
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiled_training.local.aws import environment

REGION = "eu-west-1"
BUCKET = "team-pipelines-eu"
ROLE = "arn:aws:iam::123456789012:role/team-training"
_CONFIG = {"SchemaVersion": "1.0",
           "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
SKLEARN = "1.2-1"
FAILURE = """import os
if os.path.isdir("/opt/ml/processing"):  # a processing job's reason, as SageMaker reads it
    open("/opt/ml/output/message", "w").write("ExitMessage: {name} was told to fail")
raise SystemExit("boom: {name} was told to fail")
"""

SCRIPTS = {
    "preprocess.py": """
        import csv, os, random, tempfile
        # Where scripts write besides their outputs: the working folder, the temporary
        # folder, the home folder.
        open("preprocess.log", "w").write("started")
        tempfile.NamedTemporaryFile(delete=False).write(b"scratch")
        os.makedirs(os.path.expanduser("~/.cache/team"), exist_ok=True)
        rows = list(csv.reader(open("/opt/ml/processing/input/diabetes.csv")))
        random.Random(0).shuffle(rows)
        for name, part in (("train", rows[:300]), ("test", rows[300:])):
            os.makedirs(f"/opt/ml/processing/{name}", exist_ok=True)
            with open(f"/opt/ml/processing/{name}/{name}.csv", "w", newline="") as out:
                csv.writer(out).writerows(part)
        print(f"split {len(rows)} rows")
        """,
    "train.py": """
        import argparse, os, pickle
        import numpy as np
        from sklearn.linear_model import Ridge
        parser = argparse.ArgumentParser()
        parser.add_argument("--alpha", type=float, default=1.0)
        args = parser.parse_args()  # strict: an argument it does not know fails the job
        data = np.loadtxt(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "train.csv"), delimiter=",")
        model = Ridge(alpha=args.alpha).fit(data[:, 1:], data[:, 0])
        with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.pkl"), "wb") as out:
            pickle.dump(model, out)
        print(f"train_r2={model.score(data[:, 1:], data[:, 0]):.4f}")
        """,
    "evaluate.py": """
        import json, os, pickle, tarfile
        import numpy as np
        with tarfile.open("/opt/ml/processing/model/model.tar.gz") as archive:
            archive.extractall("/opt/ml/processing/model")
        model = pickle.load(open("/opt/ml/processing/model/model.pkl", "rb"))
        data = np.loadtxt("/opt/ml/processing/test/test.csv", delimiter=",")
        mse = float(np.mean((model.predict(data[:, 1:]) - data[:, 0]) ** 2))
        os.makedirs("/opt/ml/processing/evaluation", exist_ok=True)
        json.dump({"regression_metrics": {"mse": {"value": mse}}},
                  open("/opt/ml/processing/evaluation/evaluation.json", "w"))
        print(f"mse={mse}")
        """,
    "inference.py": """
        import os, pickle
        def model_fn(model_dir):
            return pickle.load(open(os.path.join(model_dir, "model.pkl"), "rb"))
        """,
    "report.py": """
        import boto3, json, os, sys
        # The job's own S3 call, as a script that publishes its result itself.
        bucket, key = sys.argv[1].removeprefix("s3://").split("/", 1)
        count = len(open("/opt/ml/processing/input/diabetes.csv").readlines())
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps({"rows": count}))
        print(f"published {count} rows to {sys.argv[1]}")
        """,
    "torch_train.py": """
        import argparse, os
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=1)
        args = parser.parse_args()
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(32, 4), torch.randn(32, 1)
        for _ in range(args.epochs):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
        os.makedirs("/opt/ml/checkpoints", exist_ok=True)
        torch.save(model.state_dict(), "/opt/ml/checkpoints/last.pt")
        torch.save(model.state_dict(), "/opt/ml/model/model.pt")
        print(f"loss={loss.item():.4f}")
        """,
}
LAMBDA = """
def handler(event, context):
    return {"verdict": "ship" if float(event["mse"]) < 1e9 else "hold"}
"""


def write_scripts(folder: Path, failing: str | None) -> Path:
    """The team's scripts, with ``failing`` raising at its start."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in SCRIPTS.items():
        start = FAILURE.format(name=name) if name == failing else ""
        (folder / name).write_text(start + textwrap.dedent(body).lstrip())
    return folder


def write_data(folder: Path) -> Path:
    """scikit-learn's bundled diabetes data, target first, as CSV (no download)."""
    from sklearn.datasets import load_diabetes

    data = load_diabetes()
    folder.mkdir(parents=True, exist_ok=True)
    lines = [",".join(f"{v:.6f}" for v in (target, *row))
             for target, row in zip(data.target, data.data, strict=True)]
    (folder / "diabetes.csv").write_text("\n".join(lines) + "\n")
    return folder


@dataclass
class Built:
    """A pipeline's definition and what the run is given: S3 as the SDK left it."""

    name: str
    definition: dict[str, Any]
    arguments: list[str]
    """What the run is given: ``--data`` (the SDK's uploads, the raw data), ``--lambda``."""


RAW = f"s3://{BUCKET}/raw/"
SDK_ENVIRONMENT = {"AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true",
                   "SAGEMAKER_SUPPRESS_V2_WARNING": "1", "AWS_ACCESS_KEY_ID": "sdk",
                   "AWS_SECRET_ACCESS_KEY": "sdk"}


def _data(objects: dict[str, Path]) -> list[str]:
    return [argument for uri, path in objects.items() for argument in ("--data", f"{uri}={path}")]


@contextmanager
def _sdk(folder: Path) -> Iterator[Any]:
    """A PipelineSession on moto (standing in for AWS); afterwards, the uploads in ``folder``.
    The stand-in credentials are set only meanwhile: left in the test process, they would reach
    every later test's subprocess (the CDK CLI would look up the account with them)."""
    logging.getLogger("sagemaker").setLevel(logging.ERROR)
    import boto3
    from moto import mock_aws

    folder.mkdir(parents=True, exist_ok=True)
    with environment(SDK_ENVIRONMENT), mock_aws():
        from sagemaker.workflow.pipeline_context import PipelineSession

        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        yield PipelineSession(boto_session=boto3.Session(region_name=REGION),
                              sagemaker_config=_CONFIG, default_bucket=BUCKET)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            for item in page.get("Contents", []):
                target = folder / item["Key"]
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(BUCKET, item["Key"], str(target))


def _pipeline(name: str, steps: list[Any], parameters: list[Any], session: Any) -> str:
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.pipeline_definition_config import PipelineDefinitionConfig

    return str(Pipeline(name=name, steps=steps, parameters=parameters, sagemaker_session=session,
                        pipeline_definition_config=PipelineDefinitionConfig(
                            use_custom_job_prefix=False)).definition())


def _processor(session: Any) -> Any:
    from sagemaker.sklearn.processing import SKLearnProcessor

    return SKLearnProcessor(framework_version=SKLEARN, role=ROLE, instance_type="ml.m5.xlarge",
                            instance_count=1, sagemaker_session=session)


def _sklearn(session: Any, scripts: Path, **more: Any) -> Any:
    from sagemaker.sklearn import SKLearn

    return SKLearn(entry_point="train.py", source_dir=str(scripts), framework_version=SKLEARN,
                   role=ROLE, instance_type="ml.m5.xlarge", sagemaker_session=session,
                   output_path=f"s3://{BUCKET}/models", hyperparameters={"alpha": 0.5},
                   metric_definitions=[{"Name": "train:r2", "Regex": r"train_r2=([0-9.\-]+)"}],
                   **more)


def abalone(root: Path, failing: str | None = None) -> Built:
    """AWS's sample, on the diabetes data: preprocess (SKLearnProcessor), train (scikit-learn
    script mode), evaluate into a property file, a condition on ``Std:JsonGet`` against a
    parameter, then RegisterModel (with the repack step its entry point adds) or Fail."""
    from sagemaker.inputs import TrainingInput
    from sagemaker.processing import ProcessingInput, ProcessingOutput
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionLessThanOrEqualTo
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.functions import Join, JsonGet
    from sagemaker.workflow.parameters import ParameterFloat, ParameterString
    from sagemaker.workflow.properties import PropertyFile
    from sagemaker.workflow.step_collections import RegisterModel
    from sagemaker.workflow.steps import ProcessingStep, TrainingStep

    scripts = write_scripts(root / "scripts", failing)
    uploads = root / "uploads"
    with _sdk(uploads) as session:
        raw = ParameterString(name="InputData", default_value=RAW)
        threshold = ParameterFloat(name="MseThreshold", default_value=1e9)
        preprocess = ProcessingStep(name="Preprocess", step_args=_processor(session).run(
            code=str(scripts / "preprocess.py"),
            inputs=[ProcessingInput(source=raw, destination="/opt/ml/processing/input")],
            outputs=[ProcessingOutput(output_name=n, source=f"/opt/ml/processing/{n}")
                     for n in ("train", "test")]))
        outputs = preprocess.properties.ProcessingOutputConfig.Outputs
        estimator = _sklearn(session, scripts)
        train = TrainingStep(name="Train", step_args=estimator.fit(
            {"train": TrainingInput(outputs["train"].S3Output.S3Uri, content_type="text/csv")}))
        report = PropertyFile(name="Evaluation", output_name="evaluation",
                              path="evaluation.json")
        evaluate = ProcessingStep(name="Evaluate", property_files=[report],
                                  step_args=_processor(session).run(
            code=str(scripts / "evaluate.py"),
            inputs=[ProcessingInput(source=train.properties.ModelArtifacts.S3ModelArtifacts,
                                    destination="/opt/ml/processing/model"),
                    ProcessingInput(source=outputs["test"].S3Output.S3Uri,
                                    destination="/opt/ml/processing/test")],
            outputs=[ProcessingOutput(output_name="evaluation",
                                      source="/opt/ml/processing/evaluation")]))
        mse = JsonGet(step_name=evaluate.name, property_file=report,
                      json_path="regression_metrics.mse.value")
        register = RegisterModel(
            name="Register", estimator=estimator, entry_point="inference.py",
            source_dir=str(scripts), model_data=train.properties.ModelArtifacts.S3ModelArtifacts,
            content_types=["text/csv"], response_types=["text/csv"],
            inference_instances=["ml.m5.large"], transform_instances=["ml.m5.large"],
            model_package_group_name="diabetes-models", approval_status="PendingManualApproval")
        gate = ConditionStep(
            name="MseGate", conditions=[ConditionLessThanOrEqualTo(left=mse, right=threshold)],
            if_steps=[register], else_steps=[FailStep(name="TooInaccurate", error_message=Join(
                on=" ", values=["mse", mse, "is above", threshold]))])
        body = _pipeline("abalone-style", [preprocess, train, evaluate, gate],
                         [raw, threshold], session)
    return Built("abalone", json.loads(body), _data({f"s3://{BUCKET}/": uploads,
                                                    RAW: write_data(root / "raw")}))


def framework_processor(root: Path, failing: str | None = None) -> Built:
    """The SDK's FrameworkProcessor (its own ``runproc.sh`` unpacks the source folder), then a
    processing job whose script calls S3 itself."""
    from sagemaker.processing import FrameworkProcessor, ProcessingInput, ProcessingOutput
    from sagemaker.sklearn.estimator import SKLearn
    from sagemaker.workflow.steps import ProcessingStep

    scripts = write_scripts(root / "scripts", failing)
    uploads = root / "uploads"
    with _sdk(uploads) as session:
        processor = FrameworkProcessor(
            estimator_cls=SKLearn, framework_version=SKLEARN, role=ROLE,
            instance_type="ml.m5.xlarge", instance_count=1, sagemaker_session=session)
        split = ProcessingStep(name="Split", step_args=processor.run(
            code="preprocess.py", source_dir=str(scripts),
            inputs=[ProcessingInput(source=RAW, destination="/opt/ml/processing/input")],
            outputs=[ProcessingOutput(output_name="train", source="/opt/ml/processing/train"),
                     ProcessingOutput(output_name="test", source="/opt/ml/processing/test")]))
        publish = ProcessingStep(name="Publish", depends_on=[split], step_args=_processor(
            session).run(code=str(scripts / "report.py"),
                         arguments=[f"s3://{BUCKET}/published/rows.json"],
                         inputs=[ProcessingInput(source=RAW,
                                                 destination="/opt/ml/processing/input")]))
        body = _pipeline("framework-processor", [split, publish], [], session)
    return Built("framework_processor", json.loads(body), _data({
        f"s3://{BUCKET}/": uploads, RAW: write_data(root / "raw")}))


def parameterized_code(root: Path, failing: str | None = None) -> Built:
    """The SDK's ``test_training_job_with_parameterized_source_dir`` shape: the code's S3 URI a
    parameter, which the SDK writes unquoted into ``sagemaker_submit_directory``; XGBoost's
    script mode on the scikit-learn script, and a Lambda step reading the metric."""
    from sagemaker.inputs import TrainingInput
    from sagemaker.lambda_helper import Lambda
    from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
    from sagemaker.workflow.parameters import ParameterString
    from sagemaker.workflow.steps import TrainingStep
    from sagemaker.xgboost import XGBoost

    scripts = write_scripts(root / "scripts", failing)
    (root / "train").mkdir(parents=True, exist_ok=True)
    (root / "train" / "train.csv").write_text(
        (write_data(root / "raw") / "diabetes.csv").read_text())
    code_uri = f"s3://{BUCKET}/team-code/sourcedir.tar.gz"
    with _sdk(root / "uploads") as session:
        code = ParameterString(name="SourceDir", default_value=code_uri)
        estimator = XGBoost(entry_point="train.py", source_dir=code, framework_version="1.7-1",
                            role=ROLE, instance_type="ml.m5.xlarge", instance_count=1,
                            sagemaker_session=session, output_path=f"s3://{BUCKET}/models",
                            # Named: the SDK would parse the parameter as a URI to name it.
                            base_job_name="train-xgboost",
                            hyperparameters={"alpha": 0.5}, metric_definitions=[
                                {"Name": "train:r2", "Regex": r"train_r2=([0-9.\-]+)"}])
        train = TrainingStep(name="TrainXgboost", step_args=estimator.fit(
            {"train": TrainingInput(f"s3://{BUCKET}/train/")}))
        decide = LambdaStep(
            name="Decide", lambda_func=Lambda(
                function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:decide",
                session=session),
            inputs={"mse": train.properties.FinalMetricDataList["train:r2"].Value},
            outputs=[LambdaOutput(output_name="verdict",
                                  output_type=LambdaOutputTypeEnum.String)])
        body = _pipeline("parameterized-code", [train, decide], [code], session)
    from compiled_training.definition.sourcedir import write_sourcedir

    archive = write_sourcedir(scripts)
    handler = root / "handler"
    handler.mkdir(exist_ok=True)
    (handler / "decide.py").write_text(LAMBDA)
    return Built("parameterized_code", json.loads(body), [
        *_data({code_uri: archive, f"s3://{BUCKET}/train/": root / "train"}),
        "--lambda", f"Decide={handler}:decide.handler"])


def pytorch_script(root: Path, failing: str | None = None) -> Built:
    """A plain PyTorch script (strict argparse) on the PyTorch DLC, with a checkpoint folder
    SageMaker syncs to S3, and a RegisterModel with no group (an unversioned package)."""
    from sagemaker.pytorch import PyTorch
    from sagemaker.workflow.step_collections import RegisterModel
    from sagemaker.workflow.steps import TrainingStep

    scripts = write_scripts(root / "scripts", failing)
    with _sdk(root / "uploads") as session:
        estimator = PyTorch(entry_point="torch_train.py", source_dir=str(scripts),
                            framework_version="2.6.0", py_version="py312", role=ROLE,
                            instance_type="ml.g5.xlarge", instance_count=1,
                            sagemaker_session=session,
                            output_path=f"s3://{BUCKET}/models", hyperparameters={"epochs": 2},
                            checkpoint_s3_uri=f"s3://{BUCKET}/checkpoints/torch",
                            metric_definitions=[{"Name": "loss", "Regex": r"loss=([0-9.]+)"}],
                            disable_profiler=True, debugger_hook_config=False)
        train = TrainingStep(name="TrainTorch", step_args=estimator.fit())
        register = RegisterModel(
            name="RegisterUnversioned", estimator=estimator,
            model_data=train.properties.ModelArtifacts.S3ModelArtifacts,
            content_types=["application/json"], response_types=["application/json"],
            inference_instances=["ml.m5.large"], transform_instances=["ml.m5.large"],
            )
        body = _pipeline("pytorch-script", [train, register], [], session)
    return Built("pytorch_script", json.loads(body), _data({f"s3://{BUCKET}/": root / "uploads"}))


def fail_with_join(root: Path, failing: str | None = None) -> Built:
    """The SDK's ``test_two_step_fail_pipeline_with_join_fn``: a condition, then a Fail step
    whose message joins the condition's outcome. It always fails, as on SageMaker."""
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionEquals
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.functions import Join
    from sagemaker.workflow.parameters import ParameterInteger

    with _sdk(root / "uploads") as session:
        param = ParameterInteger(name="MyInt", default_value=2)
        cond = ConditionStep(name="CondStep", conditions=[ConditionEquals(left=param, right=1)],
                             if_steps=[], else_steps=[])
        fail = FailStep(name="FailStep", error_message=Join(
            on=": ", values=["Failed due to xxx == yyy returns", cond.properties.Outcome]))
        body = _pipeline("fail-with-join", [cond, fail], [param], session)
    return Built("fail_with_join", json.loads(body), [])




def _fail_pipeline(root: Path, name: str, message: Any, *, parameters: list[Any] | None = None,
                   depends_on_fail: bool = False) -> Built:
    """The SDK's ``test_fail_steps.py`` shapes: a condition on ``MyInt == 1`` whose else branch
    is a Fail step (or, ``depends_on_fail``, a condition that depends on one)."""
    from sagemaker.workflow.condition_step import ConditionStep
    from sagemaker.workflow.conditions import ConditionEquals
    from sagemaker.workflow.fail_step import FailStep
    from sagemaker.workflow.parameters import ParameterInteger

    with _sdk(root / "uploads") as session:
        param = ParameterInteger(name="MyInt", default_value=2)
        fail = FailStep(name="FailStep", error_message=message)
        cond = ConditionStep(name="CondStep", conditions=[ConditionEquals(left=param, right=1)],
                             if_steps=[], else_steps=[] if depends_on_fail else [fail],
                             depends_on=["FailStep"] if depends_on_fail else None)
        steps = [cond, fail] if depends_on_fail else [cond]
        body = _pipeline(name, steps, [param, *(parameters or [])], session)
    return Built(name, json.loads(body), [])


def fail_with_string(root: Path, failing: str | None = None) -> Built:
    return _fail_pipeline(root, "fail-with-string", "Failed due to hitting in else branch")


def fail_with_parameter(root: Path, failing: str | None = None) -> Built:
    from sagemaker.workflow.parameters import ParameterString

    message = ParameterString(name="MyString")
    built = _fail_pipeline(root, "fail-with-parameter", message, parameters=[message])
    built.arguments += ["--param", "MyInt=3", "--param",
                        "MyString=Failed due to hitting in else branch"]
    return built


def fail_without_message(root: Path, failing: str | None = None) -> Built:
    return _fail_pipeline(root, "fail-without-message", None)


def depends_on_fail(root: Path, failing: str | None = None) -> Built:
    return _fail_pipeline(root, "depends-on-fail", "Failed pipeline execution",
                          depends_on_fail=True)


def refused_kinds(root: Path, failing: str | None = None) -> Built:
    """Steps no local run can stand in for: a TensorFlow estimator, a processing input from
    Athena, a processor started by its image's own entry point, a Transform step."""
    from sagemaker.dataset_definition.inputs import AthenaDatasetDefinition, DatasetDefinition
    from sagemaker.processing import ProcessingInput, Processor
    from sagemaker.tensorflow import TensorFlow
    from sagemaker.transformer import Transformer
    from sagemaker.workflow.steps import ProcessingStep, TrainingStep, TransformStep

    scripts = write_scripts(root / "scripts", failing)
    with _sdk(root / "uploads") as session:
        tensorflow = TensorFlow(entry_point="train.py", source_dir=str(scripts), role=ROLE,
                                framework_version="2.14", py_version="py310",
                                instance_type="ml.m5.xlarge", instance_count=1,
                                sagemaker_session=session, output_path=f"s3://{BUCKET}/tf")
        train = TrainingStep(name="TrainTensorflow", step_args=tensorflow.fit())
        athena = ProcessingStep(name="QueryAthena", step_args=_processor(session).run(
            code=str(scripts / "preprocess.py"), inputs=[ProcessingInput(
                input_name="rows", dataset_definition=DatasetDefinition(
                    local_path="/opt/ml/processing/input/rows", data_distribution_type=
                    "FullyReplicated", input_mode="File", athena_dataset_definition=
                    AthenaDatasetDefinition(catalog="AwsDataCatalog", database="team",
                                            query_string="SELECT 1", output_format="PARQUET",
                                            output_s3_uri=f"s3://{BUCKET}/athena/")))]))
        own = ProcessingStep(name="OwnEntrypoint", step_args=Processor(
            role=ROLE, image_uri="123456789012.dkr.ecr.eu-west-1.amazonaws.com/team-etl:1",
            instance_count=1, instance_type="ml.m5.xlarge", sagemaker_session=session).run())
        session.sagemaker_client.create_model(  # the SDK reads the model's image
            ModelName="team-model", ExecutionRoleArn=ROLE, PrimaryContainer={
                "Image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team-model:1"})
        transform = TransformStep(name="Score", step_args=Transformer(
            model_name="team-model", instance_count=1, instance_type="ml.m5.xlarge",
            output_path=f"s3://{BUCKET}/scores", sagemaker_session=session).transform(
            data=f"s3://{BUCKET}/raw/"))
        body = _pipeline("refused-kinds", [train, athena, own, transform], [], session)
    return Built("refused_kinds", json.loads(body), [])


JOBS: dict[str, tuple[Callable[..., Built], str]] = {
    "abalone": (abalone, "evaluate.py"),
    "framework_processor": (framework_processor, "report.py"),
    "parameterized_code": (parameterized_code, "train.py"),
    "pytorch_script": (pytorch_script, "torch_train.py"),
}
"""The pipelines with jobs, and the script their failing twin breaks."""
