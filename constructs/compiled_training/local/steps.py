"""Each step type, run here as SageMaker runs it. A step returns its properties (what later
steps read with ``Get``); a failure raises `StepFailed` with the reason the console shows.

Training runs SageMaker's own training toolkit (``sagemaker-training``) with the PyTorch DLCs'
launcher logic on an ``/opt/ml``-shaped folder, in the ``--python`` interpreter. Stand-ins
for what cannot exist here: the GPUs (an ``nvidia-smi`` listing ``--processes`` of them, which
is all the toolkit reads of them), AWS's ``xla_spawn`` (``stand_ins/xla_spawn``), and the
instances (one host, whatever ``InstanceCount`` says). Lambda steps run their handler from the
assembly, in this process, against the run's in-process AWS (moto).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError, ParamValidationError

from compiled_training.local.assembly import StackReader
from compiled_training.local.aws import download, download_prefix, environment, upload
from compiled_training.local.expressions import (
    Context,
    StepFailed,
    Unsupported,
    json_document,
    text,
    typed,
)
from compiled_training_runtime import contract

# What the PyTorch DLCs set: the toolkit hands the job to the PyTorch container's launcher
# logic, which picks the runner (pytorchxla, torch_distributed, or one process).
DLC_TRAINING_MODULE = "sagemaker_pytorch_container.training:main"
XLA_SPAWN = resources.files(__package__) / "stand_ins" / "xla_spawn"
# What SageMaker's built-in algorithms are served from: no script of the user's runs there.
BUILT_IN_IMAGES = ("sagemaker-xgboost", "sagemaker-scikit-learn", "linear-learner",
                   "image-classification", "blazingtext")
# The switches that need torch-xla in the training environment.
_XLA_SWITCHES = (contract.HP_TRAINING_COMPILER_ENABLED, contract.HP_PYTORCH_XLA_MULTI_WORKER,
                 contract.HP_NEURON_XLA)


@dataclass
class Run:
    """What every step of one local execution shares."""

    workdir: Path
    python: str
    processes: int
    s3: Any
    """The run's S3 (a boto3 client of the in-process AWS)."""
    stack: StackReader | None
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    """``--set STEP.NAME=VALUE``: hyperparameters by step."""
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``--outputs STEP=FILE``: properties of steps not run here."""
    notes: list[str] = field(default_factory=list)
    execution: str = "local"
    """The execution's id: jobs are named after their step and it."""
    s3_endpoint: str | None = None
    """The run's S3 over HTTP, where a training job's own S3 calls go (`aws.s3_endpoint`)."""

    def job_name(self, step: str) -> str:
        return f"{step.lower()}-{self.execution}"[:63]


# The step types the runner executes; any other is given with --outputs.
STEP_TYPES = ("Training", "Processing", "Lambda", "RegisterModel", "Fail", "Condition")


def not_run_here(name: str, kind: str) -> Unsupported:
    return Unsupported(f"step {name}: step type {kind!r} does not run locally yet; give its "
                       f"properties with --outputs {name}=FILE")


def run_step(step: Mapping[str, Any], context: Context, run: Run) -> dict[str, Any]:
    """One step's properties, from running it (or from ``--outputs``)."""
    name, kind = str(step["Name"]), str(step["Type"])
    if name in run.outputs:
        run.notes.append(f"{name}: properties from --outputs, not run")
        return run.outputs[name]
    arguments = context.evaluate(step.get("Arguments", {}), f"step {name}: Arguments")
    if kind == "Training":
        return _training(name, arguments, run)
    if kind == "Lambda":
        return _lambda(name, step, arguments, run)
    if kind == "RegisterModel":
        return _register(name, arguments, run)
    if kind == "Processing":
        return _processing(name, step, arguments, run)
    if kind == "Fail":
        raise StepFailed(text(arguments.get("ErrorMessage", "")))
    raise not_run_here(name, kind)


# --- Training ---------------------------------------------------------------------------

def training_refusal(name: str, arguments: Mapping[str, Any], python: str) -> str | None:
    """Why a training step cannot run here, before anything runs; None where it can."""
    image = str(arguments.get("AlgorithmSpecification", {}).get("TrainingImage", ""))
    hyperparameters = arguments.get("HyperParameters", {})
    if any(f"/{repo}:" in image for repo in BUILT_IN_IMAGES) or \
            "sagemaker_program" not in hyperparameters:
        return (f"step {name} runs a built-in algorithm ({image.rpartition('/')[2]}), whose "
                f"container does not exist here; give its properties with --outputs "
                f"{name}=FILE")
    instance_type = str(arguments.get("ResourceConfig", {}).get("InstanceType", ""))
    if instance_type.startswith("ml.trn"):
        return (f"step {name} trains on Trainium ({instance_type}): NeuronCores and neuronx-cc "
                f"do not exist here (the tests' stand-ins for them stay in the tests); give its "
                f"properties with --outputs {name}=FILE")
    if any(str(hyperparameters.get(s)).strip('"') == "true" for s in _XLA_SWITCHES) and \
            not _has(python, "torch_xla"):
        return (f"step {name} compiles through XLA and {python} has no torch_xla; pass --python "
                f"an environment that has it (make test-envs builds .venvs/py311-torch-xla2.8)")
    packages = {"sagemaker_training": "sagemaker-training", "torch": "torch",
                "sagemaker_pytorch_container": "sagemaker-pytorch-training"}
    missing = [package for module, package in packages.items() if not _has(python, module)]
    if missing:
        return (f"step {name} needs {', '.join(missing)} in {python} (pip install "
                f"{' '.join(missing)}, or pass --python an environment that has them)")
    return None


@functools.cache  # asked once an interpreter and module, however many steps ask
def _has(python: str, module: str) -> bool:
    probe = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0


def _training(name: str, arguments: Mapping[str, Any], run: Run) -> dict[str, Any]:
    folder = run.workdir / "steps" / name
    base = folder / "opt_ml"
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
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
    code = hyperparameters.get("sagemaker_submit_directory")
    if code:
        local = folder / "sourcedir.tar.gz"
        download(run.s3, json.loads(code), local)
        hyperparameters["sagemaker_submit_directory"] = json.dumps(str(local))
    channels = {}
    for channel in arguments.get("InputDataConfig", []):
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        target = base / "input" / "data" / channel["ChannelName"]
        if not download_prefix(run.s3, uri, target):
            raise StepFailed(f"ClientError: No S3 objects found under S3 URL \"{uri}\" given in "
                             f"input data source. Please ensure that the bucket exists in the "
                             f"selected region, that objects exist under that S3 prefix")
        channels[channel["ChannelName"]] = {"TrainingInputMode": "File"}
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    (config / "inputdataconfig.json").write_text(json.dumps(channels))
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}))
    log = folder / "training.log"
    began = time.monotonic()
    result = _toolkit(base, arguments, run, log)
    seconds = max(1, round(time.monotonic() - began))
    logs = log.read_text(errors="replace")
    if result != 0:
        raise _algorithm_error(base / "output" / "failure", log, result)
    job = run.job_name(name)
    output = str(arguments["OutputDataConfig"]["S3OutputPath"]).rstrip("/")
    model_uri = f"{output}/{job}/output/model.tar.gz"
    upload(run.s3, _pack(base / "model", folder / "model.tar.gz"), model_uri)
    if (base / "output" / "data").is_dir():
        upload(run.s3, _pack(base / "output" / "data", folder / "output.tar.gz"),
                f"{output}/{job}/output/output.tar.gz")
    checkpoint = arguments.get("CheckpointConfig", {}).get("S3Uri")
    if checkpoint and (base / "checkpoints").is_dir():
        for path in sorted((base / "checkpoints").rglob("*")):
            if path.is_file():
                upload(run.s3, path, f"{checkpoint.rstrip('/')}/"
                                      f"{path.relative_to(base / 'checkpoints').as_posix()}")
    count = arguments.get("ResourceConfig", {}).get("InstanceCount", 1)
    return {"TrainingJobName": job, "TrainingJobStatus": "Completed",
            # The one host stood in for every instance: billed as SageMaker bills them.
            "TrainingTimeInSeconds": seconds, "BillableTimeInSeconds": seconds * int(count),
            "ModelArtifacts": {"S3ModelArtifacts": model_uri},
            "FinalMetricDataList": final_metrics(
                arguments.get("AlgorithmSpecification", {}).get("MetricDefinitions", []), logs)}


def _algorithm_error(failure: Path, log: Path, code: int) -> StepFailed:
    """A job that exited non-zero: its failure file's reason, else its log's last line."""
    reason = failure.read_text().strip() if failure.is_file() else \
        (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
    return StepFailed(f"AlgorithmError: {reason} (exit code {code}; log: {log})")


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


def _toolkit(base: Path, arguments: Mapping[str, Any], run: Run, log: Path) -> int:
    """The training toolkit on ``base``, as the DLC's entry point starts it."""
    instance_type = str(arguments.get("ResourceConfig", {}).get("InstanceType", ""))
    env = dict(os.environ)
    env.update({str(k): text(v) for k, v in arguments.get("Environment", {}).items()})
    path = [str(Path(run.python).parent), env.get("PATH", "")]
    if instance_type.split(".")[1:2] and instance_type.split(".")[1][:1] in "gp":
        gpus = run.processes
        xla = str(arguments.get("HyperParameters", {}).get(
            contract.HP_PYTORCH_XLA_MULTI_WORKER)).strip('"') == "true"
        if xla and gpus > 1:
            # torch-xla on a CPU runs one process: its replicas would be threads that miss
            # each other's collectives on a loaded machine.
            gpus = 1
            run.notes.append("pytorchxla steps run one XLA replica here, whatever --processes")
        path.insert(0, str(stand_in_gpus(base.parent / "gpus", gpus)))
    env.update({"SAGEMAKER_BASE_DIR": str(base), "SM_STUDIO_LOCAL_MODE": "true",
                "PJRT_DEVICE": "CPU", "SAGEMAKER_TRAINING_MODULE": DLC_TRAINING_MODULE,
                "PATH": os.pathsep.join(path),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(XLA_SPAWN),
                                                             env.get("PYTHONPATH")])),
                "PET_MASTER_PORT": str(free_port())})
    if run.s3_endpoint:  # the job's own S3 calls (its warm start) reach the run's S3
        env["AWS_ENDPOINT_URL_S3"] = run.s3_endpoint
    code = "from sagemaker_training import trainer; trainer.train()"
    with log.open("w") as out:
        process = subprocess.run([run.python, "-c", code], env=env, stdout=out,
                                 stderr=subprocess.STDOUT, check=False)
    return process.returncode


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


# --- Processing ------------------------------------------------------------------------

PROCESSING_ROOT = "/opt/ml/processing"


def processing_mapped(value: Any, root: Path) -> str:
    """A container's entry point or argument with each ``/opt/ml/processing`` path in it
    (whole, after ``=`` or ``:``, or among words) under ``root`` instead."""
    return re.sub(rf"(?<![^=:\s]){re.escape(PROCESSING_ROOT)}(?=/|$|\s)", str(root),
                  text(value))


def _processing(name: str, step: Mapping[str, Any], arguments: Mapping[str, Any],
                run: Run) -> dict[str, Any]:
    """The container's entry point and arguments, with ``/opt/ml/processing`` (which user code
    names absolutely) mapped to the step's folder: in ``PROCESSING_ROOT`` and in each argument
    that names it (the library's own processing steps take their paths as arguments)."""
    folder = run.workdir / "steps" / name
    root = folder / "processing"

    def local(path: str) -> Path:
        if path != PROCESSING_ROOT and not path.startswith(f"{PROCESSING_ROOT}/"):
            raise StepFailed(f"{path} is outside {PROCESSING_ROOT}, which the runner cannot "
                             f"map into the step's folder")
        return root / Path(path).relative_to(PROCESSING_ROOT)


    for item in arguments.get("ProcessingInputs", []):
        source = item["S3Input"]
        if not download_prefix(run.s3, source["S3Uri"], local(source["LocalPath"])):
            raise StepFailed(f"ClientError: no S3 objects under {source['S3Uri']} (input "
                             f"{item['InputName']})")
    outputs = {item["OutputName"]: item for item in
               arguments.get("ProcessingOutputConfig", {}).get("Outputs", [])}
    for item in outputs.values():
        local(item["S3Output"]["LocalPath"]).mkdir(parents=True, exist_ok=True)
    app = arguments["AppSpecification"]
    command = [processing_mapped(a, root) for a in [*app.get("ContainerEntrypoint", []),
                                                    *app.get("ContainerArguments", [])]]
    env = {**os.environ, **{str(k): text(v) for k, v in arguments.get("Environment", {}).items()},
           "PROCESSING_ROOT": str(root),
           "PATH": os.pathsep.join([str(Path(run.python).parent), os.environ.get("PATH", "")])}
    log = folder / "processing.log"
    with log.open("w") as out:
        result = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                check=False).returncode
    if result != 0:
        raise _algorithm_error(root / "output" / "failure", log, result)
    for item in outputs.values():
        target = str(item["S3Output"]["S3Uri"]).rstrip("/")
        source_folder = local(item["S3Output"]["LocalPath"])
        for path in sorted(source_folder.rglob("*")):
            if path.is_file():
                upload(run.s3, path, f"{target}/{path.relative_to(source_folder).as_posix()}")
    files = {}
    for spec in step.get("PropertyFiles", []):
        output = outputs[spec["OutputName"]]
        path = local(output["S3Output"]["LocalPath"]) / spec["FilePath"]
        if not path.is_file():
            raise StepFailed(f"property file {spec['PropertyFileName']}: the step wrote no "
                             f"{spec['FilePath']} in output {spec['OutputName']}")
        files[spec["PropertyFileName"]] = json_document(path.read_text(),
                                                        f"property file {path}")
    return {"ProcessingJobName": run.job_name(name),
            "ProcessingJobStatus": "Completed",
            "ProcessingOutputConfig": {"Outputs": outputs}, "PropertyFiles": files}


# --- Lambda and RegisterModel -----------------------------------------------------------

def _lambda(name: str, step: Mapping[str, Any], arguments: Mapping[str, Any],
            run: Run) -> dict[str, Any]:
    function = str(step.get("FunctionArn", "")).rpartition(":")[2]
    stack = run.stack
    if stack is None or function not in stack.template.get("Resources", {}):
        raise Unsupported(f"step {name}: function {step.get('FunctionArn')} is not in the "
                          f"assembly; give its outputs with --outputs {name}=FILE")
    properties = stack.resource(function)["Properties"]
    code = properties["Code"]
    location = f"s3://{stack.resolve(code.get('S3Bucket'))}/{stack.resolve(code.get('S3Key'))}"
    asset = stack.assets.get(location)
    if asset is None or not asset.source.is_dir():
        raise Unsupported(f"step {name}: function {function}'s code is not a staged folder of "
                          f"the assembly; give its outputs with --outputs {name}=FILE")
    variables = stack.resolve(properties.get("Environment", {}).get("Variables", {}))
    try:
        with environment({key: str(value) for key, value in variables.items()}):
            result = _invoke(asset.source, str(properties["Handler"]), dict(arguments))
    except Exception as error:  # the handler's failure is the step's
        raise StepFailed(f"{type(error).__name__}: {error}") from None
    if not isinstance(result, Mapping):
        raise StepFailed(f"the function returned {type(result).__name__}, not an object of "
                         f"its outputs")
    outputs = {}
    for output in step.get("OutputParameters", []):
        key = output["OutputName"]
        if key not in result:
            raise StepFailed(f"the function returned no {key!r}")
        outputs[key] = typed(result[key], output.get("OutputType", "String"),
                             f"output {key!r}")
    return {"OutputParameters": outputs}


def _invoke(folder: Path, handler: str, event: dict[str, Any]) -> Any:
    """A handler (``module.function``, the module dotted within the folder) called as Lambda
    calls it, its folder first on the path. The assembly stays as it is: no bytecode is
    written into it, and its own modules leave ``sys.modules`` afterwards."""
    module_name, _, function = handler.rpartition(".")
    before = set(sys.modules)
    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    sys.path.insert(0, str(folder))
    sys.dont_write_bytecode = True
    try:
        module = importlib.import_module(module_name)
        return getattr(module, function)(event, None)
    finally:
        sys.path[:] = saved_path
        sys.dont_write_bytecode = saved_bytecode
        for loaded in set(sys.modules) - before:
            if str(getattr(sys.modules[loaded], "__file__", "")).startswith(str(folder)):
                del sys.modules[loaded]  # the next function's module may share the name


def _register(name: str, arguments: Mapping[str, Any], run: Run) -> dict[str, Any]:
    client = boto3.client("sagemaker")
    group = arguments.get("ModelPackageGroupName")
    if not group:
        raise Unsupported(f"step {name}: a model package outside a group is not implemented")
    try:
        client.describe_model_package_group(ModelPackageGroupName=group)
    except ClientError:
        # The stack's group, which deploying would have created.
        client.create_model_package_group(ModelPackageGroupName=group)
        run.notes.append(f"{name}: model package group {group} created in the stand-in "
                         f"registry")
    request = {key: value for key, value in arguments.items() if key != "SkipModelValidation"}
    try:
        package = client.create_model_package(**request)
    except (ClientError, ParamValidationError) as error:
        raise StepFailed(str(error)) from None
    return {"ModelPackageArn": package["ModelPackageArn"],
            "ModelApprovalStatus": arguments.get("ModelApprovalStatus")}
