"""A Training step, run as SageMaker runs the job: SageMaker's own training toolkit
(``sagemaker-training``) in the image's ``--python``, with the launcher the image would start,
in the job's container view (`container.Job`).

Stand-ins for what cannot exist here: the GPUs (an ``nvidia-smi`` listing ``--processes`` of
them, all the toolkit reads of them), AWS's ``xla_spawn`` (``stand_ins/xla_spawn``), and the
instances (one host, whatever ``InstanceCount`` says).
"""

from __future__ import annotations

import json
import re
import socket
import tarfile
import time
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from compiled_training.compilers import recognize
from compiled_training.local.aws import (
    download,
    download_prefix,
    not_given,
    upload,
    upload_tree,
)
from compiled_training.local.container import OPT_ML, Job
from compiled_training.local.expressions import StepFailed, text
from compiled_training.local.images import Image, classify
from compiled_training.local.run import Run
from compiled_training_runtime import contract

XLA_SPAWN = resources.files(__package__) / "stand_ins" / "xla_spawn"
CHECKPOINTS = f"{OPT_ML}/checkpoints"
FAILURE_FILE = f"{OPT_ML}/output/failure"
"""What a training job writes when it fails: the job's FailureReason."""
_FOLDERS = (f"{OPT_ML}/input/config", f"{OPT_ML}/model", f"{OPT_ML}/output/data", f"{OPT_ML}/code")
_TOOLKIT = "from sagemaker_training import trainer; trainer.train()"


def hyperparameter_text(value: Any) -> str:
    """A hyperparameter's value as a string: SageMaker's JSON-quoted form unquoted, or the value
    as it stands (the SDK leaves a parameter's ``Get`` unquoted)."""
    raw = text(value)
    try:
        decoded = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return decoded if isinstance(decoded, str) else raw


def compiles_through_xla(arguments: Mapping[str, Any]) -> bool:
    """Whether the training job runs its graph through torch-xla: its compiler does (Training
    Compiler, the Neuron SDK's XLA path), or the pytorchxla launcher starts it."""
    hyperparameters = arguments.get("HyperParameters", {})
    image = text(arguments.get("AlgorithmSpecification", {}).get("TrainingImage", ""))
    compiler = recognize(hyperparameters, arguments.get("Environment", {}), image)
    launcher = hyperparameter_text(hyperparameters.get(contract.HP_PYTORCH_XLA_MULTI_WORKER, ""))
    return compiler.through_xla or launcher == "true"


def train(name: str, arguments: Mapping[str, Any], run: Run) -> dict[str, Any]:
    """The job's properties, as DescribeTrainingJob gives them, once its process succeeds."""
    with run.transfers(arguments.get("RoleArn")) as s3:
        return _train(name, arguments, run, s3)


def _train(name: str, arguments: Mapping[str, Any], run: Run, s3: Any) -> dict[str, Any]:
    job = run.job(name)
    checkpoint = arguments.get("CheckpointConfig", {})
    local_checkpoints = str(checkpoint.get("LocalPath") or CHECKPOINTS)
    job.make((*_FOLDERS, *([local_checkpoints] if checkpoint else [])))
    hyperparameters = _hyperparameters(name, arguments, run)
    code = hyperparameters.get("sagemaker_submit_directory")
    if code:
        local = job.folder / "sourcedir.tar.gz"
        download(s3, hyperparameter_text(code), local)
        hyperparameters["sagemaker_submit_directory"] = json.dumps(str(local))
    channels = {}
    for channel in arguments.get("InputDataConfig", []):
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        target = job.host_path(f"{OPT_ML}/input/data/{channel['ChannelName']}")
        if not download_prefix(s3, uri, target):
            raise StepFailed(f"ClientError: No S3 objects found under S3 URL \"{uri}\" given in "
                             f"input data source{not_given(uri)}")
        channels[channel["ChannelName"]] = {"TrainingInputMode": "File"}
    if checkpoint.get("S3Uri"):  # SageMaker fills the folder before the job starts
        download_prefix(s3, checkpoint["S3Uri"], job.host_path(local_checkpoints))
    instance_type = str(arguments.get("ResourceConfig", {}).get("InstanceType", ""))
    config = job.host_path(f"{OPT_ML}/input/config")
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    (config / "inputdataconfig.json").write_text(json.dumps(channels))
    (config / "resourceconfig.json").write_text(json.dumps(resource_config(instance_type)))

    log = job.folder / "training.log"
    began = time.monotonic()
    result = _launch(name, job, arguments, hyperparameters, run, log)
    seconds = max(1, round(time.monotonic() - began))
    output = str(arguments["OutputDataConfig"]["S3OutputPath"]).rstrip("/")
    if checkpoint.get("S3Uri"):  # synced as it writes them, failed or not
        upload_tree(s3, job.host_path(local_checkpoints), checkpoint["S3Uri"])
    written = job.written(FAILURE_FILE)
    if result != 0:
        raise StepFailed(job.failure(result, log, written))
    if written:
        run.notes.append(f"{name}: the job exited 0 but wrote {FAILURE_FILE}; SageMaker counts "
                         f"the exit code, so the step succeeded")
    model = job.host_path(f"{OPT_ML}/model")
    if not any(model.rglob("*")):
        run.notes.append(f"{name}: warning: the job left {OPT_ML}/model empty, so model.tar.gz "
                         f"holds nothing; write the model to SM_MODEL_DIR")
    model_uri = f"{output}/{job.name}/output/model.tar.gz"
    upload(s3, _pack(model, job.folder / "model.tar.gz"), model_uri)
    data = job.host_path(f"{OPT_ML}/output/data")
    cache = compile_cache_summary(data)
    if cache:
        run.compile_caches[name] = cache
    if any(data.iterdir()):
        upload(s3, _pack(data, job.folder / "output.tar.gz"),
               f"{output}/{job.name}/output/output.tar.gz")
    count = arguments.get("ResourceConfig", {}).get("InstanceCount", 1)
    return {"TrainingJobName": job.name, "TrainingJobStatus": "Completed",
            # The one host stood in for every instance: billed as SageMaker bills them.
            "TrainingTimeInSeconds": seconds, "BillableTimeInSeconds": seconds * int(count),
            "ModelArtifacts": {"S3ModelArtifacts": model_uri},
            "FinalMetricDataList": _metrics(name, arguments, log, run)}


def _metrics(name: str, arguments: Mapping[str, Any], log: Path, run: Run) -> dict[str, Any]:
    """The job's final metrics; those whose regex never matched are said, once for the run
    and again by whatever reads them."""
    definitions = arguments.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])
    metrics = final_metrics(definitions, log.read_text(errors="replace"))
    unmatched = {d["Name"]: f"its regex {d['Regex']!r} never matched the job's log ({log}), so "
                            f"SageMaker reports no such metric: print it so, or fix the regex"
                 for d in definitions if d["Name"] not in metrics}
    if unmatched:
        run.unmatched_metrics[name] = unmatched
        run.notes.append(f"{name}: metrics never printed as their definitions read them: "
                         + "; ".join(f"{metric}: {why}" for metric, why in unmatched.items()))
    return metrics


def compile_cache_summary(output_data: Path) -> dict[str, Any]:
    """The warm start's summary in a job's output data: the launcher's own file, or the
    runtime's run summary; {} where the job carried no compile cache."""
    for name, key in ((contract.COMPILE_CACHE_SUMMARY_FILE, None),
                      (contract.RUN_SUMMARY_FILE, contract.SUMMARY_COMPILE_CACHE)):
        try:
            document = json.loads((output_data / name).read_text())
        except (OSError, ValueError):
            continue
        found = document.get(key) if key else document
        if isinstance(found, dict):
            return found
    return {}


def resource_config(instance_type: str) -> dict[str, Any]:
    """``resourceconfig.json`` as SageMaker writes it for one host."""
    group = "homogeneousCluster"
    return {"current_host": "algo-1", "current_instance_type": instance_type,
            "current_group_name": group, "hosts": ["algo-1"],
            "instance_groups": [{"instance_group_name": group, "instance_type": instance_type,
                                 "hosts": ["algo-1"]}],
            "network_interface_name": "eth0"}


def _hyperparameters(name: str, arguments: Mapping[str, Any], run: Run) -> dict[str, str]:
    hyperparameters = {key: text(value) for key, value in
                       arguments.get("HyperParameters", {}).items()}
    overrides = run.overrides.get(name, {})
    changed = {k: v for k, v in overrides.items() if k in hyperparameters}
    added = {k: v for k, v in overrides.items() if k not in hyperparameters}
    hyperparameters.update(overrides)
    if changed:
        run.notes.append(f"{name}: hyperparameters overridden for this run (--set): " + ", ".join(
            f"{key}={value}" for key, value in changed.items()))
    if added:
        run.notes.append(f"{name}: hyperparameters the definition does not have, added for this "
                         f"run (--set; check their spelling): " + ", ".join(
                             f"{key}={value}" for key, value in added.items()))
    return hyperparameters


def final_metrics(definitions: list[Mapping[str, str]], logs: str) -> dict[str, Any]:
    """SageMaker's extraction: each definition's regex over the job's log, the first group of
    the last match the final value."""
    metrics = {}
    for definition in definitions:
        found = re.findall(definition["Regex"], logs)
        if found:
            last = found[-1]
            value = float(last[0] if isinstance(last, tuple) else last)
            metrics[definition["Name"]] = {"MetricName": definition["Name"], "Value": value}
    return metrics


def _launch(name: str, job: Job, arguments: Mapping[str, Any],
            hyperparameters: Mapping[str, str], run: Run, log: Path) -> int:
    """The job's process: the step's own ContainerEntrypoint, which replaces the image's
    launcher as on SageMaker (SDK v3's ModelTrainer), else the image's toolkit."""
    spec = arguments.get("AlgorithmSpecification", {})
    if not spec.get("ContainerEntrypoint"):
        return _toolkit(job, arguments, hyperparameters, run, log)
    command = [text(part) for part in [*spec["ContainerEntrypoint"],
                                       *spec.get("ContainerArguments", [])]]
    run.notes.append(f"{name}: ran the step's ContainerEntrypoint ({' '.join(command)}) in "
                     f"place of the image's launcher, as SageMaker does")
    return job.launch(command, _job_environment(job, arguments, hyperparameters, run,
                                                _image(arguments)), log)


def _toolkit(job: Job, arguments: Mapping[str, Any], hyperparameters: Mapping[str, str],
             run: Run, log: Path) -> int:
    """The training toolkit in the job's view, as the image's entry point starts it."""
    image = _image(arguments)
    env = _job_environment(job, arguments, hyperparameters, run, image)
    python = run.python(image.kind)
    env.pop("SAGEMAKER_TRAINING_MODULE", None)
    if image.launcher:
        env["SAGEMAKER_TRAINING_MODULE"] = image.launcher
        env["PYTHONPATH"] = f"{XLA_SPAWN}:{env['PYTHONPATH']}"
    return job.launch([python, "-c", _TOOLKIT], env, log)


def _image(arguments: Mapping[str, Any]) -> Image:
    return classify(str(arguments.get("AlgorithmSpecification", {}).get("TrainingImage", "")),
                    script_mode=True)


def _job_environment(job: Job, arguments: Mapping[str, Any],
                     hyperparameters: Mapping[str, str], run: Run, image: Image) -> dict[str, str]:
    """What the job's process starts with, whatever it runs: the step's environment, what
    SageMaker sets, the image's Python first on the PATH, the stand-in GPUs."""
    python = run.python(image.kind)
    instance_type = str(arguments.get("ResourceConfig", {}).get("InstanceType", ""))
    variables = {str(k): text(v) for k, v in arguments.get("Environment", {}).items()}
    variables.update({"SM_STUDIO_LOCAL_MODE": "true", "PJRT_DEVICE": "CPU",
                      "TRAINING_JOB_NAME": job.name,
                      "TRAINING_JOB_ARN": f"{run.arn('sagemaker')}:training-job/{job.name}",
                      "PET_MASTER_PORT": str(free_port())})
    if not compiles_through_xla(arguments):
        # The image has no torch-xla; the interpreter standing in for it may, and Hugging Face
        # (transformers, accelerate) would move the model to an XLA device because of it.
        variables["USE_TORCH_XLA"] = "0"
    if not job.isolated:
        variables["SAGEMAKER_BASE_DIR"] = str(job.opt_ml)
    env = job.environment(python=python, region=run.region, endpoint=run.endpoint,
                          access_key=run.access_key(arguments.get("RoleArn")),
                          variables=variables)
    if instance_type.split(".")[1:2] and instance_type.split(".")[1][:1] in "gp":
        gpus = run.processes
        if hyperparameter_text(hyperparameters.get(contract.HP_PYTORCH_XLA_MULTI_WORKER)) == \
                "true" and gpus > 1:
            # torch-xla on a CPU runs one process: its replicas would be threads that miss
            # each other's collectives on a loaded machine.
            gpus = 1
            run.notes.append("pytorchxla steps run one XLA replica here, whatever --processes")
        env["PATH"] = f"{stand_in_gpus(job.folder / 'gpus', gpus)}:{env['PATH']}"
    return env


def stand_in_gpus(folder: Path, count: int) -> Path:
    """An ``nvidia-smi`` listing ``count`` GPUs: all the toolkit reads of them."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"echo 'GPU {i}: stand-in (UUID: GPU-local-{i})'\n" for i in range(count))
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{lines}")
    script.chmod(0o755)
    return folder


def free_port() -> int:
    """A free loopback port for a rendezvous (torchrun's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pack(folder: Path, archive_path: Path) -> Path:
    with tarfile.open(archive_path, "w:gz") as archive:
        for item in sorted(folder.iterdir()) if folder.is_dir() else []:
            archive.add(item, arcname=item.name)
    return archive_path
