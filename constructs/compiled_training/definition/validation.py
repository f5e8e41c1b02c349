"""What SageMaker accepts for a training job, checked before CloudFormation sees it.

The compiler rules are the SageMaker SDK v2's (``training_compiler/config.py`` of the
PyTorch and Hugging Face estimators); limits, enums and patterns come from botocore's
SageMaker service model, the API's own description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from compiled_training.catalog import neuron
from compiled_training.catalog.api_shapes import (
    api_shape,
    definition_problems,
    is_token,
    request_problems,
    shape_problems,
    shown,
)
from compiled_training.catalog.aws_names import s3_uri_problem, split_s3
from compiled_training.catalog.dlc import resolve_dlc
from compiled_training.catalog.instances import (
    instance_type_problem,
    training_instance_types,
)
from compiled_training.compilers.base import trainium
from compiled_training.definition import compile_cache
from compiled_training.definition.entry_point import entry_point_problems
from compiled_training.definition.launchers import idle_gpus_message, torch_distributed_problem
from compiled_training.definition.registration import metric_definition_problems
from compiled_training.definition.script_checks import script_warnings
from compiled_training.definition.training import training_job_arguments
from compiled_training.spec.job import Distribution, TrainingJob

RESERVED_HYPERPARAMETER_PREFIX = "sagemaker_"


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str


@dataclass(frozen=True)
class Findings:
    errors: list[Finding]
    warnings: list[Finding]

    def raise_errors(self, subject: str) -> None:
        """Raises every error in one ValueError about ``subject``; nothing when there is none."""
        if len(self.errors) == 1:
            raise ValueError(f"{subject}: {self.errors[0].message}")
        if self.errors:
            lines = "\n".join(f"  - {e.message}" for e in self.errors)
            raise ValueError(f"{subject} has {len(self.errors)} problems:\n{lines}")


# The props that members of a CreateTrainingJob request come from, for the messages.
_PROPS = (
    ("ResourceConfig.InstanceCount", "instance_count"),
    ("ResourceConfig.VolumeSizeInGB", "volume_size_gib"),
    ("ResourceConfig.InstanceType", "instance_type"),
    ("StoppingCondition.MaxRuntimeInSeconds", "max_runtime"),
    ("StoppingCondition.MaxWaitTimeInSeconds", "max_wait"),
    ("HyperParameters", "hyperparameters"),
    ("InputDataConfig", "channels"),
    ("AlgorithmSpecification.TrainingImage", "image_uri"),
    ("Tags", "pipeline_name"),  # the pipeline tag's value
)
_PIPELINE_NAMES: WeakKeyDictionary[Any, dict[tuple[str, str, str], Any]] = WeakKeyDictionary()


def check_api_string(field: str, value: str, shape_name: str) -> str | None:
    """The message for a string the API's shape rejects (length, pattern, enum), or None."""
    problem = next(shape_problems(value, api_shape(shape_name), field), None)
    return str(problem) if problem else None


def check(job: TrainingJob) -> Findings:
    """Every rule this library knows, as errors (raise) and warnings (acknowledgeable)."""
    errors: list[Finding] = []
    warnings: list[Finding] = []

    def error(rule: str, message: str | None) -> None:
        if message:
            errors.append(Finding(rule, message))

    error("pipeline_name", check_api_string("pipeline_name", job.pipeline_name, "PipelineName"))
    _check_resources(job, error)
    _check_hyperparameters(job, error)
    _check_channels(job, error, warnings)
    for problem in metric_definition_problems(job):
        error("MetricDefinitions", problem)
    _check_request(job, error, {e.rule for e in errors})
    _check_framework(job, error)
    module = job.compiler.module
    if (not job.image_uri and not module.training_compiler_images
            and not module.image_problem(job.instance_type)
            and known_instance_type(job.instance_type)):
        try:
            resolve_dlc(job.framework, False, job.instance_type)
        except ValueError as no_image:
            error("Image", str(no_image))
    compiler_errors, compiler_warnings = module.checks(job)
    for rule, message in compiler_errors:
        error(rule, message)
    warnings += [Finding(rule, message) for rule, message in compiler_warnings]
    if trainium(job.instance_type):
        _check_trainium(job, error)
    if job.distribution in module.distributions_checked:
        pass  # the compiler's own checks rule on its launchers
    elif job.distribution is Distribution.PYTORCHXLA and trainium(job.instance_type):
        pass  # _check_trainium names the Trainium launcher
    elif job.distribution is Distribution.PYTORCHXLA:
        error("XlaWithoutCompiler",
              "distribution 'pytorchxla' runs only with Training Compiler "
              "(Compiler.training_compiler()); use Distribution.TORCH_DISTRIBUTED otherwise")
    if job.distribution is Distribution.TORCH_DISTRIBUTED:
        error("TorchDistributed", torch_distributed_problem(job))
    idle = idle_gpus_message(job)
    if idle:
        warnings.append(Finding("IdleGpus", idle))
    cold = compile_cache.cold_start_reason(job)
    if cold and job.torch_compile_cache_s3_uri is not None:  # not when switched off on purpose
        warnings.append(Finding("CompileCacheCold", f"torch.compile compiles from nothing every "
                                f"run, on the instances it pays for: {cold}; acknowledge this "
                                f"warning where that is meant"))
    warnings += [Finding(rule, message) for rule, message in script_warnings(job)]
    smdistributed = job.distribution is Distribution.SMDISTRIBUTED_DATA_PARALLEL
    if smdistributed and job.distribution not in module.distributions_checked:
        error("Smdistributed",
              "distribution 'smdistributed' is not supported by compiled-training; "
              "use Distribution.TORCH_DISTRIBUTED")
    return Findings(errors, warnings)


def _check_resources(job: TrainingJob, error: Any) -> None:
    instance_type = job.instance_type
    if not is_token(instance_type):
        error("instance_type", instance_type_problem(instance_type))
    for field, value, minimum in (
        ("instance_count", job.instance_count, 1),
        ("volume_size_gib", job.volume_size_gib, 1),
        ("max_runtime", job.max_runtime_seconds, 1),
        ("max_attempts", job.max_attempts, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            error(field, f"{field} must be an integer of at least {minimum}, got {shown(value)}")
    if job.max_attempts > 20:
        error("Range", f"max_attempts must be at most 20, got {job.max_attempts}")
    if job.spot and job.max_wait_seconds is not None and (
        job.max_wait_seconds < job.max_runtime_seconds
    ):
        error("SpotWait", f"max_wait ({job.max_wait_seconds} s) must be at least max_runtime "
                          f"({job.max_runtime_seconds} s) for managed spot training")
    if bool(job.subnet_ids) != bool(job.security_group_ids):
        error("Vpc", "a VPC job needs both subnets and security groups")


def _check_hyperparameters(job: TrainingJob, error: Any) -> None:
    """Names and values as sent are the request's to check (`_check_request`)."""
    for name in job.hyperparameters:
        if str(name).startswith(RESERVED_HYPERPARAMETER_PREFIX) and job.framework.runs_script:
            error("Hyperparameters", f"hyperparameter {name!r} is reserved for SageMaker's "
                                     "settings; use the construct's props (compiler, "
                                     "distribution, entry_point) instead")


def _check_channels(job: TrainingJob, error: Any, warnings: list[Finding]) -> None:
    seen: set[str] = set()
    for channel in job.channels:
        if channel.name in seen:
            error("Channels", f"channel names must be unique, got {channel.name!r} twice")
        seen.add(channel.name)
        uri = channel.default_uri
        problem = None if is_token(uri) else s3_uri_problem(uri)
        if problem:
            error("channels", f"channel {channel.name!r} URI {shown(uri)} is not an S3 URI "
                              f"(s3://bucket/key): {problem}")
        elif not is_token(uri) and (prefix := open_prefix(uri)):
            warnings.append(Finding("ChannelPrefix", f"channel {channel.name!r} URI {uri!r} "
                                    f"{prefix}"))


def open_prefix(uri: str) -> str | None:
    """What SageMaker reads for an S3 URI whose last segment looks like a folder but has no
    trailing '/', or None (a folder with its '/', an object with an extension, a bucket)."""
    bucket, key = split_s3(uri)
    last = key.rpartition("/")[2]
    if not last or "." in last:
        return None
    return (f"ends without '/': SageMaker reads every key that begins with {key!r} "
            f"({key}-2025-11/ and {key}_old.csv included) and the execution role may read "
            f"s3://{bucket}/{key}*; end it with '/' (s3://{bucket}/{key}/) to mean that folder")


def _check_request(job: TrainingJob, error: Any, reported: set[str]) -> None:
    """The job's CreateTrainingJob request as SageMaker receives it: the generated
    ``sagemaker_*`` hyperparameters included, values encoded, parameters at their defaults.
    A prop whose rule already failed is not reported twice."""
    try:
        defaults = {p.name: p.default for p in job.parameters}
    except ValueError as conflict:
        error("Parameters", str(conflict))
        return
    # The role is created after these checks (its ARN is a token); a missing image is
    # reported by the image rules.
    pending = {"RoleArn": not job.role_arn,
               "AlgorithmSpecification.TrainingImage": not job.image_uri}
    encoded = " (as sent: with the sagemaker_* entries compiled-training adds, values " \
              "JSON-encoded)" if job.framework.runs_script else ""
    for problem in request_problems("CreateTrainingJob", training_job_arguments(job), defaults):
        prop = next((p for prefix, p in _PROPS if problem.path.startswith(prefix)), None)
        if pending.get(problem.path) or prop in reported:
            continue
        if prop is None:
            error("Request", f"CreateTrainingJob {problem}")
        else:
            error(prop, f"{prop}: {problem}{encoded if prop == 'hyperparameters' else ''}")


def check_pipeline(definition: Mapping[str, Any], description: str, pipeline_name: str,
                   taken_by: str | None) -> Findings:
    """The pipeline as SageMaker receives it: every job step's request (the benchmark's
    comparison too), its description, and its name, which ``taken_by`` (a construct path)
    may already use in the same app (see `pipeline_names`)."""
    errors = [Finding("Request", problem) for problem in definition_problems(definition)]
    errors.append(Finding("Description", check_api_string("description", description,
                                                          "PipelineDescription") or ""))
    errors += [Finding("Template", problem) for problem in _unprintable(
        {"description": description, "definition": definition}, "")]
    if taken_by:
        errors.append(Finding("PipelineName", f"pipeline_name {pipeline_name!r} is already used "
                                              f"by {taken_by} in this app (same account and "
                                              "region); pipeline names must be unique"))
    return Findings([e for e in errors if e.message], [])


# What JSON.stringify leaves unescaped in a template but YAML readers refuse (cfn-lint does):
# DEL, the C1 controls but NEL, and the noncharacters U+FFFE and U+FFFF.
_UNPRINTABLE = re.compile("[\x7f-\x84\x86-\x9f\ufffe\uffff]")


def _unprintable(value: Any, path: str) -> list[str]:
    """Strings (a definition's included) with a character a template cannot carry."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _unprintable(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _unprintable(item, f"{path}[{i}]")]
    found = _UNPRINTABLE.search(value) if isinstance(value, str) else None
    return [f"{path.lstrip('.')} must not contain the control character "
            f"U+{ord(found[0]):04X}, which a template cannot carry; got {shown(value)}"
            ] if found else []


def pipeline_names(app: Any) -> dict[tuple[str, str, str], Any]:
    """The pipeline names taken in an app, (account, region, lowercased name) -> the pipeline
    construct: SageMaker's ARNs are lowercase, so names differing in case collide."""
    return _PIPELINE_NAMES.setdefault(app, {})


def _check_framework(job: TrainingJob, error: Any) -> None:
    framework = job.framework
    if not framework.runs_script:
        if job.compiler.is_enabled:
            error("NotDeepLearning", f"compiler {job.compiler.describe()!r} cannot apply to "
                                     f"{framework.describe()}: it is not a deep-learning graph; "
                                     "use Compiler.none()")
        if job.distribution is not Distribution.NONE:
            error("NotDeepLearning", f"distribution {job.distribution.value!r} does not apply "
                                     f"to {framework.describe()}")
        if job.entry_point:
            error("EntryPoint", f"{framework.describe()} is a built-in algorithm; it takes no "
                                f"entry_point, got {job.entry_point!r}")
    elif not job.entry_point:
        error("EntryPoint", f"{framework.describe()} needs an entry_point script")
    elif not is_token(job.entry_point):
        for problem in entry_point_problems(job.entry_point, job.distribution, job.source_dir):
            error("EntryPoint", problem)


def _check_trainium(job: TrainingJob, error: Any) -> None:
    """What every Trainium job needs, whichever compiler: torchrun with one process per
    NeuronCore, and EFA for more than one node (the compilers check their own paths)."""
    instance_type = job.instance_type
    if job.distribution is not Distribution.TORCH_DISTRIBUTED:
        hint = (" ('pytorchxla' is Training Compiler's GPU launcher; Compiler.neuron_xla() "
                "runs PyTorch/XLA under torchrun)"
                if job.distribution is Distribution.PYTORCHXLA else "")
        error("TrainiumDistribution", f"Trainium jobs launch through torchrun, one process per "
                                      f"NeuronCore: use Distribution.TORCH_DISTRIBUTED (the "
                                      f"default there), got {job.distribution.value!r}{hint}")
    if job.instance_count > 1 and instance_type in neuron.SINGLE_NODE_ONLY:
        multi_node = [t for t in neuron.NEURON_CORES if t not in neuron.SINGLE_NODE_ONLY]
        error("TrainiumInstanceCount", f"instance_count must be 1 on {instance_type}, which "
                                       f"has no EFA for multi-node training, got "
                                       f"{job.instance_count}; for more nodes use "
                                       f"{', '.join(multi_node)}")


def known_instance_type(instance_type: str) -> bool:
    """A literal instance type the API knows (the instance rule reports the others)."""
    return not is_token(instance_type) and instance_type in training_instance_types()
