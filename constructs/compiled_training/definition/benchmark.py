"""The pipeline definition of a compiler A/B benchmark: a pure function of its jobs.

Training arms with no dependency on each other (so Pipelines runs them in parallel; a Neuron
arm with ``precompile`` after its own pre-compilation step), then
``Compare`` (a Processing job running ``compiled_training_runtime.compare`` on every arm's
output and timings), ``RecordDecision`` (a Lambda step writing the verdict, ship or hold, to
an SSM parameter the production side reads), and ``ShipDecision``, whose else branch is a
``Fail`` step carrying the comparison's reason.

The condition re-checks the comparison's numbers against the same threshold parameters the
comparison was given, so the pipeline's outcome and the recorded verdict cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiled_training.definition.training import (
    DEFINITION_VERSION,
    parameter_declarations,
    precompile_job,
    retry_policies,
    training_steps,
)
from compiled_training.values.job import (
    BenchmarkArm,
    HyperparameterValue,
    Parameter,
    TrainingJob,
    unique_parameters,
)
from compiled_training_runtime import contract

COMPARE_STEP = "Compare"
RECORD_STEP = "RecordDecision"
DECISION_STEP = "ShipDecision"
FAIL_STEP = "CompilerDoesNotShip"
PROPERTY_FILE = "Comparison"
COMPARISON_OUTPUT = "comparison"
PROCESSING_ROOT = "/opt/ml/processing"
# What the decision function receives besides the comparison's decision
# (contract.DECISION_FIELDS): the thresholds the comparison judged by, as it wrote them down.
THRESHOLD_FIELDS = {"speedup_threshold": "thresholds.speedup",
                    "quality_tolerance": "thresholds.quality_tolerance"}
# The comparison code travels as an archive of the runtime package; the image's own Python
# runs it (standard library only). PROCESSING_ROOT may be overridden so that a local run and
# tests run this very script against a local folder. SageMaker downloads the code input under
# its object's own name (the asset's hash, not sourcedir.tar.gz): the one file in the folder.
COMPARE_ENTRYPOINT = (  # the API allows 256 characters
    f"set -e; r=${{PROCESSING_ROOT:-{PROCESSING_ROOT}}}; c=$(mktemp -d); "
    "mkdir $c/compiled_training_runtime; "
    "tar -xzf $r/input/code/* -C $c/compiled_training_runtime; "
    'cd $c; exec python3 -m compiled_training_runtime.compare "$@"'
)


def arm_step_name(arm: str) -> str:
    """The arm's step: ``compiler-large-batch`` -> ``TrainCompilerLargeBatch``."""
    return "Train" + "".join(part.capitalize() for part in arm.split("-"))


@dataclass(frozen=True)
class ComparisonJob:
    """The comparison step and the decision after it."""

    image_uri: str
    instance_type: str
    role_arn: str
    code_s3_uri: str
    """The ``sourcedir.tar.gz`` of the runtime package."""
    output_s3_uri: Any
    """An S3 URI, or a pipeline expression that renders one (one folder per execution)."""
    quality_metric: str
    speedup_threshold: Parameter
    quality_tolerance: Parameter
    decision_function_arn: str
    prices: Mapping[str, float | None] = field(default_factory=dict)
    """USD per instance-hour of each arm's instance type, by arm; None or missing: unknown
    (arms on the baseline's instances compare by time alone)."""
    max_runtime_seconds: int = 1800
    volume_size_gib: int = 30
    kms_key_id: str | None = None
    max_attempts: int = 3
    tags: Mapping[str, str] = field(default_factory=dict)


def build_benchmark_definition(arms: Mapping[str, TrainingJob],
                               comparison: ComparisonJob) -> dict[str, Any]:
    """The definition (a dict, ready for JSON): parallel arms, comparison, decision."""
    if contract.ARM_BASELINE not in arms or len(arms) < 2:
        raise ValueError(f"a benchmark needs the {contract.ARM_BASELINE!r} arm and at least "
                         f"one other, got {sorted(arms)}")
    return {
        "Version": DEFINITION_VERSION,
        "Metadata": {},
        "Parameters": parameter_declarations(benchmark_parameters(arms, comparison)),
        "Steps": [
            # An arm on Neuron may be pre-compiled first (its own step, before its training).
            *(step for job in arms.values() for step in training_steps(job)),
            _compare_step(arms, comparison),
            _record_step(comparison),
            _decision_step(comparison),
        ],
    }


def benchmark_parameters(arms: Mapping[str, TrainingJob],
                         comparison: ComparisonJob) -> list[Parameter]:
    """Every pipeline parameter: the arms' (in first-use order), then the thresholds."""
    return unique_parameters([*(p for job in arms.values() for p in job.parameters),
                              comparison.speedup_threshold, comparison.quality_tolerance])


def _compare_step(arms: Mapping[str, TrainingJob], job: ComparisonJob) -> dict[str, Any]:
    inputs = [_input(name, _run_output(arm), f"{PROCESSING_ROOT}/input/{name}")
              for name, arm in arms.items()]
    inputs.append(_input("code", job.code_s3_uri, f"{PROCESSING_ROOT}/input/code"))
    arguments: list[Any] = [
        "--input-dir", f"{PROCESSING_ROOT}/input",
        "--output-dir", f"{PROCESSING_ROOT}/output",
        "--quality-metric", job.quality_metric,
        "--speedup-threshold", _text(job.speedup_threshold.ref()),
        "--quality-tolerance", _text(job.quality_tolerance.ref()),
    ]
    for name, arm in arms.items():
        price = job.prices.get(name)
        arguments += ["--arm", _timings(name, arm.step_name),
                      "--fleet", f"{name}={arm.instance_type}:{arm.instance_count}:"
                                 f"{'unknown' if price is None else _decimal(price)}"]
        if arm.compiler.module.precompile_step_count(arm.compiler):
            # The arm's pre-compilation runs on its instances for it: its time and cost too.
            arguments += ["--precompile", _timings(name, precompile_job(arm).step_name)]
    cluster: dict[str, Any] = {"InstanceType": job.instance_type, "InstanceCount": 1,
                               "VolumeSizeInGB": job.volume_size_gib}
    output_config: dict[str, Any] = {"Outputs": [{
        "OutputName": COMPARISON_OUTPUT,
        "AppManaged": False,
        "S3Output": {"S3Uri": job.output_s3_uri, "LocalPath": f"{PROCESSING_ROOT}/output",
                     "S3UploadMode": "EndOfJob"},
    }]}
    if job.kms_key_id:
        cluster["VolumeKmsKeyId"] = job.kms_key_id
        output_config["KmsKeyId"] = job.kms_key_id
    request: dict[str, Any] = {
        "ProcessingResources": {"ClusterConfig": cluster},
        "AppSpecification": {
            "ImageUri": job.image_uri,
            "ContainerEntrypoint": ["/bin/bash", "-c", COMPARE_ENTRYPOINT, "compare"],
            "ContainerArguments": arguments,
        },
        "RoleArn": job.role_arn,
        "ProcessingInputs": inputs,
        "ProcessingOutputConfig": output_config,
        "StoppingCondition": {"MaxRuntimeInSeconds": job.max_runtime_seconds},
        # Everything it reads arrives as an input: it needs no network at all.
        "NetworkConfig": {"EnableNetworkIsolation": True},
    }
    if job.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(job.tags.items())]
    return {
        "Name": COMPARE_STEP,
        "Type": "Processing",
        "Arguments": request,
        "RetryPolicies": retry_policies(job.max_attempts),
        "PropertyFiles": [{"PropertyFileName": PROPERTY_FILE, "OutputName": COMPARISON_OUTPUT,
                           "FilePath": contract.COMPARISON_JSON}],
    }


def _record_step(job: ComparisonJob) -> dict[str, Any]:
    arguments: dict[str, Any] = {name: decision_value(name)
                                 for name in contract.DECISION_FIELDS}
    arguments.update({name: comparison_value(path) for name, path in THRESHOLD_FIELDS.items()})
    arguments["comparison"] = job.output_s3_uri
    arguments["execution"] = {"Get": "Execution.PipelineExecutionArn"}
    return {
        "Name": RECORD_STEP,
        "Type": "Lambda",
        "Arguments": arguments,
        "FunctionArn": job.decision_function_arn,
        "OutputParameters": [{"OutputName": "version", "OutputType": "Integer"}],
    }


def _decision_step(job: ComparisonJob) -> dict[str, Any]:
    return {
        "Name": DECISION_STEP,
        "Type": "Condition",
        "Arguments": {
            "Conditions": [
                {"Type": "GreaterThanOrEqualTo", "LeftValue": decision_value("gain"),
                 "RightValue": job.speedup_threshold.ref()},
                {"Type": "LessThanOrEqualTo", "LeftValue": decision_value("quality_drop"),
                 "RightValue": job.quality_tolerance.ref()},
            ],
            "IfSteps": [],
            "ElseSteps": [{
                "Name": FAIL_STEP,
                "Type": "Fail",
                "Arguments": {"ErrorMessage": {"Std:Join": {"On": "", "Values": [
                    "The compiler does not ship: ", decision_value("reason")]}}},
            }],
        },
        # The verdict is recorded either way before a hold fails the execution.
        "DependsOn": [RECORD_STEP],
    }


def decision_value(name: str) -> dict[str, Any]:
    """A field of the comparison's decision, read from the comparison step's property file."""
    return comparison_value(f"decision.{name}")


def comparison_value(path: str) -> dict[str, Any]:
    """A value of the comparison step's property file (``comparison.json``)."""
    return {"Std:JsonGet": {"PropertyFile": {"Get": f"Steps.{COMPARE_STEP}.PropertyFiles."
                                                    f"{PROPERTY_FILE}"},
                            "Path": path}}


def _run_output(arm: TrainingJob) -> dict[str, Any]:
    """Where SageMaker puts the arm's ``output.tar.gz`` (the runtime's run summary)."""
    return {"Std:Join": {"On": "/", "Values": [
        arm.output_s3_uri, {"Get": f"Steps.{arm.step_name}.TrainingJobName"},
        "output", "output.tar.gz"]}}


def _input(name: str, s3_uri: Any, local_path: str) -> dict[str, Any]:
    return {
        "InputName": name,
        "AppManaged": False,
        "S3Input": {"S3Uri": s3_uri, "LocalPath": local_path, "S3DataType": "S3Prefix",
                    "S3InputMode": "File", "S3DataDistributionType": "FullyReplicated",
                    "S3CompressionType": "None"},
    }


def _timings(arm: str, step_name: str) -> dict[str, Any]:
    """``NAME=TRAINING_SECONDS:BILLABLE_SECONDS`` of one step, read from its properties."""
    step = f"Steps.{step_name}"
    return {"Std:Join": {"On": "", "Values": [
        f"{arm}=", {"Get": f"{step}.TrainingTimeInSeconds"},
        ":", {"Get": f"{step}.BillableTimeInSeconds"}]}}


def _decimal(usd: float) -> str:
    """A price as the comparison's --fleet reads it: fixed point, never an exponent."""
    return f"{float(usd):.6f}".rstrip("0").rstrip(".")


def _text(value: Any) -> dict[str, Any]:
    """A pipeline value as the string a container argument must be."""
    return {"Std:Join": {"On": "", "Values": [value]}}


# An arm's name: words of lower-case letters and digits joined by single hyphens (its step,
# Train<Words>, is then its own), at most 41 characters (the step within the API's 64).
_ARM_NAME = re.compile(r"(?=.{1,41}$)[a-z][a-z0-9]*(-[a-z][a-z0-9]*)*")


def arm_name_problems(arms: Sequence[BenchmarkArm]) -> list[str]:
    """Each arm's name well formed, and its step's name not another arm's."""
    problems = []
    taken = [contract.ARM_BASELINE, contract.ARM_COMPILER, contract.ARM_COMPILER_LARGE_BATCH]
    steps = {arm_step_name(name): name for name in taken}
    for arm in arms:
        step = arm_step_name(arm.name)
        if not _ARM_NAME.fullmatch(arm.name):
            problems.append(f"arms: name must be 1 to 41 characters, words of lower-case letters "
                            f"and digits joined by single hyphens, starting with a letter, got "
                            f"{arm.name!r}")
        elif step in steps:
            problems.append(f"arms: name {arm.name!r} is taken (its step {step} is arm "
                            f"{steps[step]!r}'s; taken: {', '.join(taken)})")
        taken.append(arm.name)
        steps.setdefault(step, arm.name)
    return problems


def large_batch_problems(large_batch_size: int | None,
                          hyperparameters: Mapping[str, HyperparameterValue]) -> list[str]:
    """The large-batch arm scales the learning rate from an integer batch_size it exceeds."""
    if large_batch_size is None:
        return []
    problems = []
    base = hyperparameters.get(contract.HP_BATCH_SIZE)
    if not isinstance(base, int) or isinstance(base, bool):
        problems.append(f"large_batch_size needs an integer hyperparameters['batch_size'] to "
                        f"scale the learning rate from, got {base!r}")
    elif not isinstance(large_batch_size, int) or large_batch_size <= base:
        problems.append(f"large_batch_size must be an integer above batch_size {base}, got "
                        f"{large_batch_size!r}")
    if contract.HP_BASE_BATCH_SIZE in hyperparameters:
        problems.append("hyperparameters['base_batch_size'] is set by the large-batch arm; "
                        "leave it out")
    return problems
