"""The rules a training job is held to before CloudFormation sees it: one named function each,
in `JOB_RULES`, the order their findings are reported in. A rule yields `Finding`s: errors,
which refuse the job, and warnings, which a team acknowledges by their id. The compiler's own
rules are its module's (`compiled_training.compilers`), run by `compiler_rules`.

Limits, enums and patterns come from botocore's SageMaker service model, the API's own
description; the compiler rules from the SageMaker SDK v2's estimators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from compiled_training.catalog import neuron
from compiled_training.catalog.api_shapes import api_shape, is_token, shape_problems, shown
from compiled_training.catalog.aws_names import s3_uri_problem, split_s3
from compiled_training.catalog.instances import instance_type_problem, training_instance_types
from compiled_training.compilers.base import trainium
from compiled_training.definition import compile_cache
from compiled_training.definition.entry_point import entry_point_problems
from compiled_training.definition.launchers import idle_gpus_message, torch_distributed_problem
from compiled_training.definition.registration import metric_definition_problems
from compiled_training.definition.script_checks import WARNING_IDS as SCRIPT_WARNING_IDS
from compiled_training.definition.script_checks import script_warnings
from compiled_training.values.job import Distribution, TrainingJob

RESERVED_HYPERPARAMETER_PREFIX = "sagemaker_"
MAX_ATTEMPTS = 20
"""SageMaker Pipelines' most retries of a step."""


@dataclass(frozen=True)
class Finding:
    """What a rule found: an error (the job is refused) or a warning (acknowledgeable)."""

    rule: str
    """The rule's id; a warning is acknowledged by it."""
    message: str
    warning: bool = False
    prop: str | None = None
    """The prop the finding is about, so that the request's own check does not repeat it."""


JobRule = Callable[[TrainingJob], Iterator[Finding]]
"""A rule: the findings it makes of a job, none where the job keeps it."""
WARNING_IDS = ("ChannelPrefix", "IdleGpus", "CompileCacheCold", *SCRIPT_WARNING_IDS)
"""The warnings the job rules raise (a compiler's are its module's ``warning_ids``)."""


def check_api_string(field: str, value: str, shape_name: str) -> str | None:
    """The message for a string the API's shape rejects (length, pattern, enum), or None."""
    problem = next(shape_problems(value, api_shape(shape_name), field), None)
    return str(problem) if problem else None


def known_instance_type(instance_type: str) -> bool:
    """A literal instance type the API knows (the instance rule reports the others)."""
    return not is_token(instance_type) and instance_type in training_instance_types()


def pipeline_name(job: TrainingJob) -> Iterator[Finding]:
    if problem := check_api_string("pipeline_name", job.pipeline_name, "PipelineName"):
        yield Finding("PipelineName", problem, prop="pipeline_name")


def instance_type(job: TrainingJob) -> Iterator[Finding]:
    if not is_token(job.instance_type) and (problem := instance_type_problem(job.instance_type)):
        yield Finding("InstanceType", problem, prop="instance_type")


def counts(job: TrainingJob) -> Iterator[Finding]:
    for field, value, rule in (("instance_count", job.instance_count, "InstanceCount"),
                               ("volume_size_gib", job.volume_size_gib, "VolumeSize"),
                               ("max_runtime", job.max_runtime_seconds, "MaxRuntime"),
                               ("max_attempts", job.max_attempts, "MaxAttempts")):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            yield Finding(rule, f"{field} must be an integer of at least 1, got {shown(value)}",
                          prop=field)
    if isinstance(job.max_attempts, int) and job.max_attempts > MAX_ATTEMPTS:
        yield Finding("MaxAttempts", f"max_attempts must be at most {MAX_ATTEMPTS}, got "
                                     f"{job.max_attempts}")


def spot_wait(job: TrainingJob) -> Iterator[Finding]:
    wait = job.max_wait_seconds
    if job.spot and wait is not None and wait < job.max_runtime_seconds:
        yield Finding("SpotWait", f"max_wait ({wait} s) must be at least max_runtime "
                                  f"({job.max_runtime_seconds} s) for managed spot training")


def vpc(job: TrainingJob) -> Iterator[Finding]:
    if bool(job.subnet_ids) != bool(job.security_group_ids):
        yield Finding("Vpc", "a VPC job needs both subnets and security groups")


def reserved_hyperparameters(job: TrainingJob) -> Iterator[Finding]:
    """Names and values as sent are the request's to check (`validation.request`)."""
    for name in job.hyperparameters:
        if str(name).startswith(RESERVED_HYPERPARAMETER_PREFIX) and job.framework.runs_script:
            yield Finding("ReservedHyperparameter", f"hyperparameter {name!r} is reserved for "
                          "SageMaker's settings; use the construct's props (compiler, "
                          "distribution, entry_point) instead")


def channels(job: TrainingJob) -> Iterator[Finding]:
    seen: set[str] = set()
    for channel in job.channels:
        if channel.name in seen:
            yield Finding("ChannelNames", f"channel names must be unique, got {channel.name!r} "
                                          f"twice")
        seen.add(channel.name)
        uri = channel.default_uri
        problem = None if is_token(uri) else s3_uri_problem(uri)
        if problem:
            yield Finding("ChannelUri", f"channel {channel.name!r} URI {shown(uri)} is not an S3 "
                                        f"URI (s3://bucket/key): {problem}", prop="channels")
        elif not is_token(uri) and (prefix := open_prefix(uri)):
            yield Finding("ChannelPrefix", f"channel {channel.name!r} URI {uri!r} {prefix}",
                          warning=True)


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


def metric_definitions(job: TrainingJob) -> Iterator[Finding]:
    for problem in metric_definition_problems(job):
        yield Finding("MetricDefinitions", problem)


def framework(job: TrainingJob) -> Iterator[Finding]:
    """A built-in algorithm takes no compiler, launcher or script; a framework needs one."""
    described = job.framework.describe()
    if not job.framework.runs_script:
        if job.compiler.is_enabled:
            yield Finding("NotDeepLearning", f"compiler {job.compiler.describe()!r} cannot apply "
                                             f"to {described}: it is not a deep-learning graph; "
                                             "use Compiler.none()")
        if job.distribution is not Distribution.NONE:
            yield Finding("NotDeepLearning", f"distribution {job.distribution.value!r} does not "
                                             f"apply to {described}")
        if job.entry_point:
            yield Finding("EntryPoint", f"{described} is a built-in algorithm; it takes no "
                                        f"entry_point, got {job.entry_point!r}")
    elif not job.entry_point:
        yield Finding("EntryPoint", f"{described} needs an entry_point script")
    elif not is_token(job.entry_point):
        for problem in entry_point_problems(job.entry_point, job.distribution, job.source_dir):
            yield Finding("EntryPoint", problem)


def image(job: TrainingJob) -> Iterator[Finding]:
    """A Deep Learning Container for the framework, version and instance (Training Compiler's
    own images, and an image the compiler cannot have, are the compiler's rules)."""
    module = job.compiler.module
    if (job.image_uri or module.image_checked or module.image_problem(
            job.instance_type) or not known_instance_type(job.instance_type)):
        return
    try:
        module.image(job.framework, job.instance_type)
    except ValueError as no_image:
        yield Finding("Image", str(no_image))


def compiler_rules(job: TrainingJob) -> Iterator[Finding]:
    errors, warnings = job.compiler.module.checks(job)
    yield from (Finding(rule, message) for rule, message in errors)
    yield from (Finding(rule, message, warning=True) for rule, message in warnings)


def trainium_launch(job: TrainingJob) -> Iterator[Finding]:
    """What every Trainium job needs, whichever compiler: torchrun with one process per
    NeuronCore, and EFA for more than one node."""
    if not trainium(job.instance_type):
        return
    if job.distribution is not Distribution.TORCH_DISTRIBUTED:
        hint = (" ('pytorchxla' is Training Compiler's GPU launcher; Compiler.neuron_xla() "
                "runs PyTorch/XLA under torchrun)"
                if job.distribution is Distribution.PYTORCHXLA else "")
        yield Finding("TrainiumDistribution", f"Trainium jobs launch through torchrun, one "
                                              f"process per NeuronCore: use Distribution."
                                              f"TORCH_DISTRIBUTED (the default there), got "
                                              f"{job.distribution.value!r}{hint}")
    if job.instance_count > 1 and job.instance_type in neuron.SINGLE_NODE_ONLY:
        multi_node = [t for t in neuron.NEURON_CORES if t not in neuron.SINGLE_NODE_ONLY]
        yield Finding("TrainiumInstanceCount", f"instance_count must be 1 on "
                                               f"{job.instance_type}, which has no EFA for "
                                               f"multi-node training, got {job.instance_count}; "
                                               f"for more nodes use {', '.join(multi_node)}")


def launcher(job: TrainingJob) -> Iterator[Finding]:
    """The launchers no compiler of the job's own checks: pytorchxla on a GPU without Training
    Compiler, SageMaker's data-parallel library, torchrun where it cannot run."""
    if job.distribution in job.compiler.module.distributions_checked:
        return
    if job.distribution is Distribution.PYTORCHXLA and not trainium(job.instance_type):
        yield Finding("XlaWithoutCompiler", "distribution 'pytorchxla' runs only with Training "
                                            "Compiler (Compiler.training_compiler()); use "
                                            "Distribution.TORCH_DISTRIBUTED otherwise")
    if job.distribution is Distribution.SMDISTRIBUTED_DATA_PARALLEL:
        yield Finding("Smdistributed", "distribution 'smdistributed' is not supported by "
                                       "compiled-training; use Distribution.TORCH_DISTRIBUTED")
    if job.distribution is Distribution.TORCH_DISTRIBUTED and (
            problem := torch_distributed_problem(job)):
        yield Finding("TorchDistributed", problem)


def idle_gpus(job: TrainingJob) -> Iterator[Finding]:
    if idle := idle_gpus_message(job):
        yield Finding("IdleGpus", idle, warning=True)


def compile_cache_cold(job: TrainingJob) -> Iterator[Finding]:
    cold = compile_cache.plan(job).cold_because
    if cold and job.torch_compile_cache_s3_uri is not None:  # not when switched off on purpose
        yield Finding("CompileCacheCold", f"torch.compile compiles from nothing every run, on "
                                          f"the instances it pays for: {cold}; acknowledge this "
                                          f"warning where that is meant", warning=True)


def script(job: TrainingJob) -> Iterator[Finding]:
    yield from (Finding(rule, message, warning=True) for rule, message in script_warnings(job))


PROP_RULES: tuple[JobRule, ...] = (
    pipeline_name, instance_type, counts, spot_wait, vpc, reserved_hyperparameters, channels,
    metric_definitions,
)
"""The rules on the props the request carries: the request's own check follows them, and
skips what they reported (`validation.request`)."""
JOB_RULES: tuple[JobRule, ...] = PROP_RULES + (
    framework, image, trainium_launch, compiler_rules, launcher, idle_gpus, compile_cache_cold,
    script,
)
"""Every job rule, in the order its findings are reported."""
