"""A Processing step, run as SageMaker runs the job: the container's entry point and arguments
as the request gives them, in the image's ``--python``, with its inputs and outputs at the
``/opt/ml/processing/...`` paths the request names (`container.Job`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compiled_training.local.aws import download_prefix, not_given, upload_tree
from compiled_training.local.container import OPT_ML
from compiled_training.local.expressions import StepFailed, json_document, text
from compiled_training.local.images import classify
from compiled_training.local.run import Run

PROCESSING_ROOT = f"{OPT_ML}/processing"
MESSAGE_FILE = f"{OPT_ML}/output/message"
"""What a processing job may write as it exits: the job's ExitMessage, its reason on failure."""


def process(name: str, step: Mapping[str, Any], arguments: Mapping[str, Any],
            run: Run) -> dict[str, Any]:
    """The job's properties, with its property files read, once its process succeeds."""
    with run.transfers(arguments.get("RoleArn")) as s3:
        return _process(name, step, arguments, run, s3)


def _process(name: str, step: Mapping[str, Any], arguments: Mapping[str, Any], run: Run,
             s3: Any) -> dict[str, Any]:
    job = run.job(name)
    inputs = [item["S3Input"] for item in arguments.get("ProcessingInputs", [])]
    outputs = {item["OutputName"]: item for item in
               arguments.get("ProcessingOutputConfig", {}).get("Outputs", [])}
    local_paths = [*(i["LocalPath"] for i in inputs),
                   *(o["S3Output"]["LocalPath"] for o in outputs.values())]
    for path in local_paths:
        if not path.startswith(f"{PROCESSING_ROOT}/"):
            raise StepFailed(f"LocalPath {path} must be under {PROCESSING_ROOT}/, as SageMaker "
                             f"requires")
    job.make((f"{OPT_ML}/config", f"{OPT_ML}/output", *local_paths))
    for item, source in zip(arguments.get("ProcessingInputs", []), inputs, strict=True):
        if not download_prefix(s3, source["S3Uri"], job.host_path(source["LocalPath"])):
            raise StepFailed(f"ClientError: no S3 objects under {source['S3Uri']} (input "
                             f"{item['InputName']}){not_given(source['S3Uri'])}")
    config = job.host_path(f"{OPT_ML}/config")
    (config / "processingjobconfig.json").write_text(json.dumps(
        {"ProcessingJobName": job.name, **arguments}, default=str))
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1"]}))

    app = arguments["AppSpecification"]
    image = classify(str(app.get("ImageUri", "")), script_mode=True)
    python = run.python(image.kind)
    command = [text(part) for part in [*app.get("ContainerEntrypoint", []),
                                       *app.get("ContainerArguments", [])]]
    variables = {str(k): text(v) for k, v in arguments.get("Environment", {}).items()}
    env = job.environment(python=python, region=run.region, endpoint=run.endpoint,
                          access_key=run.access_key(arguments.get("RoleArn")),
                          variables=variables)
    log = job.folder / "processing.log"
    result = job.launch(command, env, log)
    message = job.written(MESSAGE_FILE)
    if result != 0:
        raise StepFailed(job.failure(result, log, message))
    for item in outputs.values():
        upload_tree(s3, job.host_path(item["S3Output"]["LocalPath"]),
                    str(item["S3Output"]["S3Uri"]))
    files = {}
    for spec in step.get("PropertyFiles", []):
        output = outputs[spec["OutputName"]]
        path = job.host_path(output["S3Output"]["LocalPath"]) / spec["FilePath"]
        if not path.is_file():
            raise StepFailed(f"property file {spec['PropertyFileName']}: the step wrote no "
                             f"{spec['FilePath']} in output {spec['OutputName']}")
        files[spec["PropertyFileName"]] = json_document(path.read_text(),
                                                        f"property file {path}")
    return {"ProcessingJobName": job.name, "ProcessingJobStatus": "Completed",
            **({"ExitMessage": message} if message else {}),
            "ProcessingJobArn": f"{run.arn('sagemaker')}:processing-job/{job.name}",
            "ProcessingOutputConfig": {"Outputs": outputs}, "PropertyFiles": files}
