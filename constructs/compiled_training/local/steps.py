"""Each step type, run here as SageMaker runs it, and what cannot run, found before anything
runs. A step returns its properties (what later steps read with ``Get``); a failure raises
`StepFailed` with the reason the console shows.

Training and Processing jobs run in their own processes (`training`, `processing`); Lambda
steps run their handler (from the assembly, or ``--lambda``) in this process, against the run's
in-process AWS (moto); ``RegisterModel`` creates a model package in its registry.
"""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError, ParamValidationError

from compiled_training.local.aws import delete, environment
from compiled_training.local.container import OPT_ML
from compiled_training.local.expressions import Context, StepFailed, Unsupported, text, typed
from compiled_training.local.images import PYTORCH_LAUNCHER, classify
from compiled_training.local.processing import process
from compiled_training.local.run import Handler, Run
from compiled_training.local.training import compiles_through_xla, train

# The step types the runner executes; any other is given with --outputs.
STEP_TYPES = ("Training", "Processing", "Lambda", "RegisterModel", "Fail", "Condition",
              "ForEach", "Cleanup")


def run_step(step: Mapping[str, Any], context: Context, run: Run) -> dict[str, Any]:
    """One step's properties, from running it."""
    name, kind = str(step["Name"]), str(step["Type"])
    arguments = context.evaluate(step.get("Arguments", {}), f"step {name}: Arguments")
    if kind == "Training":
        return train(name, arguments, run)
    if kind == "Processing":
        return process(name, step, arguments, run)
    if kind == "Lambda":
        return _lambda(name, step, arguments, run)
    if kind == "RegisterModel":
        return _register(name, arguments, run)
    if kind == "Fail":
        raise StepFailed(text(arguments.get("ErrorMessage", "")))
    if kind == "Cleanup":
        return _cleanup(name, arguments, context, run)
    raise Unsupported(f"step {name}: step type {kind!r} does not run locally")


# --- what cannot run, before anything runs ----------------------------------------------

def refusals(steps: Iterator[Mapping[str, Any]], run: Run, given: Collection[str]) -> list[str]:
    """Why each step that is not ``given`` with --outputs cannot run here, one line each."""
    found = []
    for step in steps:
        name, kind = str(step["Name"]), str(step["Type"])
        arguments = step.get("Arguments", {})
        if name in given:
            continue
        conditioned = [entry for entry in step.get("DependsOn", []) if isinstance(entry, Mapping)
                       and entry.get("Trigger", "Completed") != "Completed"]
        if conditioned:  # SDK v3's StepDependency: the step runs on another's failure
            found.append(f"step {name}: runs when {conditioned[0].get('Step')} ends "
                         f"{conditioned[0]['Trigger']} (a DependsOn run condition), which a "
                         f"local run does not emulate{_outputs_hint(name)}")
        elif kind == "Training":
            found.append(_training_refusal(name, arguments, run))
        elif kind == "Processing":
            found.append(_processing_refusal(name, arguments, run))
        elif kind == "Lambda":
            found.append(_lambda_refusal(name, step, run))
        elif kind not in STEP_TYPES:
            found.append(f"step {name}: step type {kind!r} does not run locally"
                         f"{_outputs_hint(name)}")
    return [line for line in found if line]


def _outputs_hint(name: str) -> str:
    return f"; give its properties with --outputs {name}=FILE"


def _training_refusal(name: str, arguments: Mapping[str, Any], run: Run) -> str:
    hyperparameters = arguments.get("HyperParameters", {})
    uri = arguments.get("AlgorithmSpecification", {}).get("TrainingImage", "")
    if not isinstance(uri, str):
        return f"step {name}: its image comes from an expression the runner does not resolve " \
               f"before the run{_outputs_hint(name)}"
    entry_point = arguments.get("AlgorithmSpecification", {}).get("ContainerEntrypoint")
    image = classify(uri, script_mode="sagemaker_program" in hyperparameters or bool(entry_point))
    if image.refusal:
        return f"step {name} runs {image.refusal}{_outputs_hint(name)}"
    if entry_point and (refusal := _entry_point_refusal(name, entry_point,
                                                         run.python(image.kind), run)):
        return refusal
    for channel in arguments.get("InputDataConfig", []):
        if "S3DataSource" not in channel.get("DataSource", {}):
            return (f"step {name}: channel {channel.get('ChannelName')} reads from "
                    f"{', '.join(channel.get('DataSource', {})) or 'nothing'}, not S3; only S3 "
                    f"channels are emulated{_outputs_hint(name)}")
    instance_type = str(arguments.get("ResourceConfig", {}).get("InstanceType", ""))
    if instance_type.startswith("ml.trn"):
        return (f"step {name} trains on Trainium ({instance_type}): NeuronCores and neuronx-cc "
                f"do not exist here (the tests' stand-ins for them stay in the tests)"
                f"{_outputs_hint(name)}")
    python = run.python(image.kind)
    if compiles_through_xla(arguments) and not has(python, "torch_xla"):
        return (f"step {name} compiles through XLA and {python} has no torch_xla; pass --python "
                f"an environment that has it (make test-envs builds .venvs/py311-torch-xla2.8)")
    packages = {"sagemaker_training": "sagemaker-training"}
    if image.launcher == PYTORCH_LAUNCHER:
        packages.update({"torch": "torch", "sagemaker_pytorch_container":
                         "sagemaker-pytorch-training"})
    if entry_point:  # its own command, not the toolkit, starts the job
        packages = {}
    missing = [package for module, package in packages.items() if not has(python, module)]
    if missing:
        return (f"step {name} needs {', '.join(missing)} in {python} for its {image.kind} image "
                f"(pip install {' '.join(missing)}, or pass --python {image.kind}=PYTHON an "
                f"environment that has them)")
    return ""


def _entry_point_refusal(name: str, entry_point: list[Any], python: str, run: Run) -> str:
    """A training step whose own command replaces the image's launcher (SDK v3's ModelTrainer:
    ``/bin/bash -c .../sm_train.sh``): it names /opt/ml itself, and v3's script looks for
    python3 and pip on the PATH, where the job's Python's folder comes first."""
    if not run.isolated:
        return (f"step {name} runs its ContainerEntrypoint ({' '.join(map(str, entry_point))}), "
                f"which names /opt/ml itself, and this machine cannot lay /opt/ml over /opt for "
                f"the job{_outputs_hint(name)}")
    for tools in (("python3", "python"), ("pip3", "pip")):
        if not any((Path(python).parent / tool).exists() for tool in tools):
            return (f"step {name} runs its ContainerEntrypoint, whose script looks for "
                    f"{' or '.join(tools)} in {Path(python).parent}, which has neither; pass "
                    f"--python an environment that has them")
    return ""


def _processing_refusal(name: str, arguments: Mapping[str, Any], run: Run) -> str:
    app = arguments.get("AppSpecification", {})
    uri = app.get("ImageUri", "")
    if not isinstance(uri, str):
        return f"step {name}: its image comes from an expression the runner does not resolve " \
               f"before the run{_outputs_hint(name)}"
    image = classify(uri, script_mode=bool(app.get("ContainerEntrypoint")))
    if image.refusal:
        return f"step {name} runs {image.refusal}{_outputs_hint(name)}"
    for item in arguments.get("ProcessingInputs", []):
        if "S3Input" not in item:
            return (f"step {name}: input {item.get('InputName')} is a DatasetDefinition (Athena "
                    f"or Redshift), which does not exist here{_outputs_hint(name)}")
    if not run.isolated:
        return (f"step {name}: its container names {OPT_ML}/processing, which this machine "
                f"cannot lay over /opt for the job{_outputs_hint(name)}")
    return ""


def _lambda_refusal(name: str, step: Mapping[str, Any], run: Run) -> str:
    if name in run.handlers:
        return ""
    function = str(step.get("FunctionArn", "")).rpartition(":")[2]
    stack = run.stack
    if stack is None:
        return (f"step {name}: a Lambda step of a definition file needs its code: give "
                f"--lambda {name}=DIR:module.function, or its properties with --outputs "
                f"{name}=FILE")
    if function not in stack.template.get("Resources", {}):
        return (f"step {name}: function {step.get('FunctionArn')} is not in the assembly; give "
                f"--lambda {name}=DIR:module.function, or its properties with --outputs "
                f"{name}=FILE")
    return ""


@functools.cache  # asked once an interpreter and module, however many steps ask
def has(python: str, module: str) -> bool:
    probe = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0


# --- Lambda and RegisterModel -----------------------------------------------------------

def _lambda(name: str, step: Mapping[str, Any], arguments: Mapping[str, Any],
            run: Run) -> dict[str, Any]:
    given = run.handlers.get(name)
    handler, variables = (given, {}) if given else _assembly_handler(name, step, run)
    try:
        with environment({key: str(value) for key, value in variables.items()}):
            result = _invoke(handler.folder, handler.handler, dict(arguments))
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


def _assembly_handler(name: str, step: Mapping[str, Any], run: Run
                      ) -> tuple[Handler, dict[str, Any]]:
    """The function's staged code in the assembly, and its environment variables resolved."""
    stack = run.stack
    assert stack is not None  # refused before the run otherwise
    function = str(step.get("FunctionArn", "")).rpartition(":")[2]
    properties = stack.resource(function)["Properties"]
    code = properties["Code"]
    location = f"s3://{stack.resolve(code.get('S3Bucket'))}/{stack.resolve(code.get('S3Key'))}"
    asset = stack.assets.get(location)
    if asset is None or not asset.source.is_dir():
        raise Unsupported(f"step {name}: function {function}'s code is not a staged folder of "
                          f"the assembly; give --lambda {name}=DIR:module.function, or its "
                          f"properties with --outputs {name}=FILE")
    variables = stack.resolve(properties.get("Environment", {}).get("Variables", {}))
    return Handler(asset.source, str(properties["Handler"])), variables


def _invoke(folder: Path, handler: str, event: dict[str, Any]) -> Any:
    """A handler (``module.function``, the module dotted within the folder) called as Lambda
    calls it, its folder first on the path. The folder stays as it is: no bytecode is
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


def _cleanup(name: str, arguments: Mapping[str, Any], context: Context,
             run: Run) -> dict[str, Any]:
    """Deletes upstream steps' S3 outputs (SDK v3's CleanupStep): a training job's, found from
    the job; or the exact objects named, each under its step's output location."""
    deleted = 0
    for source in arguments.get("Resources", {}).get("S3", []):
        step = str(source.get("StepName"))
        outputs = context.steps.get(step)
        if outputs is None:
            raise StepFailed(f"step {step}, whose outputs it cleans up, has not run")
        model = outputs.get("ModelArtifacts", {}).get("S3ModelArtifacts", "")
        written = outputs.get("ProcessingOutputConfig", {}).get("Outputs", {})
        written = written.values() if isinstance(written, Mapping) else written  # or as listed
        locations = [model.rsplit("/output/", 1)[0] + "/"] if model else [
            str(o["S3Output"]["S3Uri"]).rstrip("/") + "/" for o in written]
        uris = [text(uri) for uri in source.get("S3Uris") or []]
        if not uris and not model:
            raise StepFailed(f"step {step} is no training step: name the objects to delete "
                             f"(S3Uris)")
        for uri in uris:
            if not any(uri.startswith(location) for location in locations):
                raise StepFailed(f"{uri} is not under step {step}'s output locations "
                                 f"({', '.join(locations) or 'it has none'})")
        deleted += sum(delete(run.s3, uri, whole=not uris) for uri in uris or locations)
    run.notes.append(f"{name}: deleted {deleted} object{'s' if deleted != 1 else ''} from the "
                     f"run's S3")
    return {}


def _register(name: str, arguments: Mapping[str, Any], run: Run) -> dict[str, Any]:
    client = boto3.client("sagemaker")
    request = {key: value for key, value in arguments.items() if key != "SkipModelValidation"}
    group = arguments.get("ModelPackageGroupName")
    if group:
        try:
            client.describe_model_package_group(ModelPackageGroupName=group)
        except ClientError:
            # The stack's group, which deploying would have created.
            client.create_model_package_group(ModelPackageGroupName=group)
            run.notes.append(f"{name}: model package group {group} created in the stand-in "
                             f"registry")
    else:  # an unversioned package, named as SageMaker needs it named
        request.setdefault("ModelPackageName", run.job(name).name)
    try:
        package = client.create_model_package(**request)
    except (ClientError, ParamValidationError) as error:
        raise StepFailed(str(error)) from None
    return {"ModelPackageArn": package["ModelPackageArn"],
            "ModelApprovalStatus": arguments.get("ModelApprovalStatus")}

