"""The SageMaker pipeline definition of a training job: a pure function of a `TrainingJob`.

It builds what the SageMaker SDK v2 would (``Pipeline.definition()`` with a
``TrainingStep``), through the API path: the compiler is switched on by hyperparameters
(SageMaker's), the environment (the library's) and the image, so an image extended from a
Training Compiler DLC is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Literal

from compiled_training.catalog.neuron import EFA_ENVIRONMENT, is_trainium
from compiled_training.definition import compile_cache
from compiled_training.definition.compile_cache import CachePlan
from compiled_training.definition.trainer_script import trainer_hyperparameters
from compiled_training.values.job import (
    Distribution,
    HyperparameterValue,
    InputChannel,
    Parameter,
    TrainingJob,
)
from compiled_training_runtime import contract

DEFINITION_VERSION = "2020-12-01"
# What SageMaker retries itself before the step fails: service faults, throttling...
SERVICE_RETRY_EXCEPTIONS = ("Step.SERVICE_FAULT", "Step.THROTTLING")
# ...and the job failures that a later attempt can get past: no capacity (spot or on-demand),
# an internal error, an account limit that frees up.
JOB_RETRY_EXCEPTIONS = (
    "SageMaker.CAPACITY_ERROR",
    "SageMaker.JOB_INTERNAL_ERROR",
    "SageMaker.RESOURCE_LIMIT",
)
CONTAINER_LOG_LEVEL = 20  # logging.INFO, as the SDK sets it


PRECOMPILE_STEP = "Precompile"


def build_definition(job: TrainingJob) -> dict[str, Any]:
    """The pipeline definition (as a dict, ready for JSON) with one training step (after the
    Neuron pre-compilation step, where the compiler asks for one)."""
    return {
        "Version": DEFINITION_VERSION,
        "Metadata": {},
        "Parameters": parameter_declarations(job.parameters),
        "Steps": training_steps(job),
    }


def training_steps(job: TrainingJob) -> list[dict[str, Any]]:
    """The training step, preceded by `precompile_job`'s step when the compiler has one."""
    if not job.compiler.module.precompile_step_count(job.compiler):
        return [training_step(job)]
    precompile = precompile_job(job)
    return [training_step(precompile),
            {**training_step(job), "DependsOn": [precompile.step_name]}]


def precompile_job(job: TrainingJob) -> TrainingJob:
    """The same job for a few steps under ``neuron_parallel_compile`` (the toolkit's
    TorchDistributedRunner prefixes it when ``RUN_NEURON_PARALLEL_COMPILE=1``): it extracts
    the graphs and compiles them in parallel into the shared compile cache. Its outputs are
    its own, and it keeps no checkpoints: a trial run's weights must never be resumed."""
    # "Train" -> "Precompile"; a benchmark's "TrainTrainium" -> "PrecompileTrainium".
    step_name = PRECOMPILE_STEP + job.step_name.removeprefix("Train")
    return replace(
        job, step_name=step_name, checkpoint_s3_uri=None,
        output_s3_uri=f"{job.output_s3_uri}/precompile",
        hyperparameters={**job.hyperparameters,
                         contract.HP_MAX_STEPS: job.compiler.module.precompile_step_count(
                             job.compiler) or 1},
        environment={**job.environment, contract.ENV_RUN_NEURON_PARALLEL_COMPILE: "1"})


def job_environment(job: TrainingJob, cache: CachePlan | None = None) -> dict[str, str]:
    """The container's environment: the compiler's (its switches; Neuron's flags; Neuron's or
    torch.compile's compile cache in S3), EFA for a multi-node Trainium job (the toolkit sets
    it on trn1.32xlarge only), and the job's own."""
    environment = job.compiler.module.environment(job)
    environment.update((cache or compile_cache.plan(job)).environment)
    if job.instance_count > 1 and is_trainium(job.instance_type):
        environment.update(EFA_ENVIRONMENT)
    environment.update(job.environment)
    return dict(sorted(environment.items()))


def parameter_declarations(parameters: Iterable[Parameter]) -> list[dict[str, Any]]:
    return [{"Name": p.name, "Type": p.type.value, "DefaultValue": p.default} for p in parameters]


def training_step(job: TrainingJob) -> dict[str, Any]:
    return {
        "Name": job.step_name,
        "Type": "Training",
        "Arguments": training_job_arguments(job),
        "RetryPolicies": retry_policies(job.max_attempts),
    }


def retry_policies(max_attempts: int) -> list[dict[str, Any]]:
    return [
        {
            "ExceptionType": list(SERVICE_RETRY_EXCEPTIONS),
            "IntervalSeconds": 10,
            "BackoffRate": 2.0,
            "MaxAttempts": max_attempts,
        },
        {
            "ExceptionType": list(JOB_RETRY_EXCEPTIONS),
            "IntervalSeconds": 300,
            "BackoffRate": 2.0,
            "MaxAttempts": max_attempts,
        },
    ]


def training_job_arguments(job: TrainingJob) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request, less the job name that Pipelines sets: one render
    function per section, each None where the job leaves its section out, all reading one
    compile-cache plan."""
    cache = compile_cache.plan(job)
    return {section: value for section, render in REQUEST_SECTIONS
            if (value := render(job, cache)) is not None}


def render_algorithm_specification(job: TrainingJob, cache: CachePlan) -> dict[str, Any]:
    algorithm: dict[str, Any] = {"TrainingInputMode": "File", "TrainingImage": job.image_uri}
    if job.metric_definitions:
        algorithm["MetricDefinitions"] = [dict(m) for m in job.metric_definitions]
        algorithm["EnableSageMakerMetricsTimeSeries"] = True
    return algorithm


def render_output_data_config(job: TrainingJob, cache: CachePlan) -> dict[str, Any]:
    output: dict[str, Any] = {"S3OutputPath": job.output_s3_uri}
    if job.kms_key_id:
        output["KmsKeyId"] = job.kms_key_id
    return output


def render_stopping_condition(job: TrainingJob, cache: CachePlan) -> dict[str, Any]:
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": job.max_runtime_seconds}
    if job.spot:
        stopping["MaxWaitTimeInSeconds"] = job.max_wait_seconds or job.max_runtime_seconds
    return stopping


def render_resource_config(job: TrainingJob, cache: CachePlan) -> dict[str, Any]:
    resources: dict[str, Any] = {"VolumeSizeInGB": job.volume_size_gib,
                                 "InstanceCount": job.instance_count,
                                 "InstanceType": job.instance_type}
    if job.kms_key_id:
        resources["VolumeKmsKeyId"] = job.kms_key_id
    return resources


def render_input_data_config(job: TrainingJob, cache: CachePlan) -> list[dict[str, Any]] | None:
    return [_channel(c) for c in job.channels] if job.channels else None


def render_environment(job: TrainingJob, cache: CachePlan) -> dict[str, str] | None:
    return job_environment(job, cache) or None


def render_debug_hook_config(job: TrainingJob, cache: CachePlan) -> dict[str, Any] | None:
    """Debugger off means no hook config."""
    if not job.debugger:
        return None
    return {"S3OutputPath": job.output_s3_uri, "CollectionConfigurations": []}


def render_profiler_config(job: TrainingJob, cache: CachePlan) -> dict[str, Any]:
    """Profiler off is an explicit ``DisableProfiler``."""
    if job.profiler:
        return {"S3OutputPath": job.output_s3_uri, "DisableProfiler": False}
    return {"DisableProfiler": True}


def render_checkpoint_config(job: TrainingJob, cache: CachePlan) -> dict[str, Any] | None:
    if not job.checkpoint_s3_uri:
        return None
    return {"S3Uri": job.checkpoint_s3_uri, "LocalPath": contract.CHECKPOINT_LOCAL_PATH}


def render_vpc_config(job: TrainingJob, cache: CachePlan) -> dict[str, Any] | None:
    if not job.subnet_ids:
        return None
    return {"Subnets": list(job.subnet_ids), "SecurityGroupIds": list(job.security_group_ids)}


def render_tags(job: TrainingJob, cache: CachePlan) -> list[dict[str, str]] | None:
    return [{"Key": k, "Value": v} for k, v in sorted(job.tags.items())] if job.tags else None


def _only_true(value: bool) -> Literal[True] | None:
    """A switch SageMaker reads as off when absent: sent only when on."""
    return True if value else None


RenderSection = Callable[[TrainingJob, CachePlan], Any]
REQUEST_SECTIONS: tuple[tuple[str, RenderSection], ...] = (
    ("AlgorithmSpecification", render_algorithm_specification),
    ("OutputDataConfig", render_output_data_config),
    ("StoppingCondition", render_stopping_condition),
    ("ResourceConfig", render_resource_config),
    ("RoleArn", lambda job, cache: job.role_arn),
    ("InputDataConfig", render_input_data_config),
    ("HyperParameters", lambda job, cache: hyperparameters(job, cache)),
    ("Environment", render_environment),
    ("DebugHookConfig", render_debug_hook_config),
    ("ProfilerConfig", render_profiler_config),
    ("EnableManagedSpotTraining", lambda job, cache: _only_true(job.spot)),
    ("CheckpointConfig", render_checkpoint_config),
    ("VpcConfig", render_vpc_config),
    ("EnableNetworkIsolation", lambda job, cache: _only_true(job.network_isolation)),
    ("EnableInterContainerTrafficEncryption",
     lambda job, cache: _only_true(job.inter_container_encryption)),
    ("Tags", render_tags),
)
"""The request's sections in the order the template writes them (a reorder changes every
template's bytes)."""


def hyperparameters(job: TrainingJob, cache: CachePlan | None = None) -> dict[str, Any]:
    """Hyperparameters as the SDK encodes them.

    Framework images (script mode) JSON-encode every value and receive the toolkit's
    ``sagemaker_*`` settings; built-in algorithms take the values as plain strings.
    """
    if not job.framework.runs_script:
        return {k: _encode(v, json_encoded=False) for k, v in job.hyperparameters.items()}
    cache = cache or compile_cache.plan(job)
    values: dict[str, HyperparameterValue] = {**trainer_hyperparameters(job, cache),
                                               **job.hyperparameters}
    values["sagemaker_submit_directory"] = job.source_s3_uri or ""
    values["sagemaker_program"] = contract.LAUNCHER if cache.launched else job.entry_point or ""
    values["sagemaker_container_log_level"] = CONTAINER_LOG_LEVEL
    values["sagemaker_region"] = job.region
    values.update(_distribution_hyperparameters(job))
    values.update(job.compiler.hyperparameters())
    return {k: _encode(v, json_encoded=True) for k, v in values.items()}


def _distribution_hyperparameters(job: TrainingJob) -> dict[str, HyperparameterValue]:
    if job.distribution is Distribution.PYTORCHXLA:
        return {contract.HP_PYTORCH_XLA_MULTI_WORKER: True}
    if job.distribution is Distribution.TORCH_DISTRIBUTED:
        return {contract.HP_TORCH_DISTRIBUTED: True, contract.HP_INSTANCE_TYPE: job.instance_type}
    return {}


def _channel(channel: InputChannel) -> dict[str, Any]:
    uri = channel.s3_uri
    entry: dict[str, Any] = {
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": uri.ref() if isinstance(uri, Parameter) else uri,
                "S3DataDistributionType": "ShardedByS3Key"
                if channel.sharded
                else "FullyReplicated",
            }
        },
        "ChannelName": channel.name,
    }
    if channel.content_type:
        entry["ContentType"] = channel.content_type
    return entry


def _encode(value: HyperparameterValue, *, json_encoded: bool) -> Any:
    if isinstance(value, Parameter):
        # Pipelines renders any parameter type into the string SageMaker expects.
        return {"Std:Join": {"On": "", "Values": [value.ref()]}}
    if json_encoded:
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def execution_scoped(uri: str) -> Any:
    """One folder per execution: retries resume, the next scheduled run starts anew."""
    return {"Std:Join": {"On": "/", "Values": [uri, {"Get": "Execution.PipelineExecutionId"}]}}
