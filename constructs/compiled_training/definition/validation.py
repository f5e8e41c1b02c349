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
    EFA_INSTANCE_TYPES,
    TRAINING_COMPILER_FAMILIES,
    accelerator,
    instance_family,
    instance_type_problem,
    is_gpu,
    training_instance_types,
)
from compiled_training.definition import compile_cache
from compiled_training.definition.entry_point import entry_point_problems
from compiled_training.definition.launchers import (
    idle_gpus_message,
    major,
    pytorchxla_from,
    pytorchxla_supported,
    torch_distributed_problem,
    trainium,
)
from compiled_training.definition.registration import metric_definition_problems
from compiled_training.definition.script_checks import script_warnings
from compiled_training.definition.training import training_job_arguments
from compiled_training.spec.compiler import CompilerKind
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
    needs_dlc = not job.image_uri and not job.compiler.is_training_compiler
    native = job.compiler.kind is CompilerKind.TORCH_COMPILE and trainium(job.instance_type)
    if needs_dlc and native:
        error("Image", f"the native TorchNeuron backend has no SageMaker training image to "
                       f"resolve: {neuron.native_image_status()}; pass your TorchNeuron image as "
                       f"image=TrainingImage.from_ecr_repository(...), or use "
                       f"Compiler.neuron_xla() on the PyTorch NeuronX images")
    elif needs_dlc and known_instance_type(job.instance_type):
        try:
            resolve_dlc(job.framework, job.compiler.is_training_compiler, job.instance_type)
        except ValueError as no_image:
            error("Image", str(no_image))
    if trainium(job.instance_type):
        _checktrainium(job, error)
    elif job.compiler.kind is CompilerKind.NEURON_XLA and is_token(job.instance_type):
        warnings.append(Finding("NeuronXlaInstanceToken", "instance_type is a token, so "
                                "Compiler.neuron_xla() cannot check that it is Trainium nor set "
                                "EFA for a multi-node job (FI_PROVIDER=efa, "
                                "FI_EFA_USE_DEVICE_RDMA=1); give a literal ml.trn* type"))
    elif job.compiler.kind is CompilerKind.NEURON_XLA:
        error("NeuronXlaInstance", f"Compiler.neuron_xla() runs on AWS Trainium "
                                   f"({', '.join(neuron.NEURON_CORES)}), got "
                                   f"{job.instance_type!r}; on GPUs use Compiler.torch_compile()")
    if job.compiler.kind is CompilerKind.TRAINING_COMPILER:
        _check_training_compiler(job, error, warnings)
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
    if smdistributed and not job.compiler.is_training_compiler:
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
    if job.compiler.kind is CompilerKind.TORCH_COMPILE and framework.pytorch_version and (
        major(framework.pytorch_version) < 2
    ):
        error("TorchCompileVersion", f"torch.compile needs PyTorch 2.0 or newer, got "
                                     f"{framework.describe()}")


def _check_training_compiler(job: TrainingJob, error: Any, warnings: list[Finding]) -> None:
    framework = job.framework
    instance_type = job.instance_type
    if not is_token(instance_type):
        family = instance_family(instance_type)
        if family not in TRAINING_COMPILER_FAMILIES:
            why = {
                "nvidia": f"{family} is a GPU family Training Compiler never supported",
                "amd": f"{family} is an AMD GPU family, which Training Compiler does not support",
                "trainium": "AWS Trainium, which compiles with the Neuron SDK: use "
                            "Compiler.neuron_xla(), or Compiler.torch_compile() on ml.trn2",
                "inferentia": "AWS Inferentia",
                "cpu": "a CPU instance",
            }[accelerator(instance_type)]
            error("CompilerInstance", f"instance_type must be a GPU instance of "
                                      f"{', '.join(TRAINING_COMPILER_FAMILIES)} for Training "
                                      f"Compiler, got {instance_type!r} ({why})")
    if job.distribution is Distribution.SMDISTRIBUTED_DATA_PARALLEL:
        error("CompilerSmdistributed", "distribution 'smdistributed' (SageMaker data/model "
                                       "parallel) is not compatible with Training Compiler; "
                                       "use Distribution.PYTORCHXLA")
    if framework.runs_script:
        try:
            # Also what a given image_uri must extend: the version must have a compiler DLC.
            resolve_dlc(framework, True, _any_gpu(instance_type))
        except ValueError as unsupported:
            error("CompilerVersion", str(unsupported))
            return
    xla = pytorchxla_supported(framework)
    if job.distribution is Distribution.PYTORCHXLA and not xla:
        error("CompilerDistribution", f"distribution 'pytorchxla' needs PyTorch "
                                      f"{'.'.join(map(str, pytorchxla_from(framework)))} or "
                                      f"newer with Training Compiler, got {framework.describe()}")
    if job.distribution is Distribution.TORCH_DISTRIBUTED and xla:
        error("CompilerDistribution", f"'pytorchxla' is the only distribution Training "
                                      f"Compiler supports for {framework.describe()}, got "
                                      f"{job.distribution.value!r}")
    if job.debugger or job.profiler:
        warnings.append(Finding("DebuggerProfiler", "Debugger and Profiler add recompilation "
                                "overhead under Training Compiler; turn them off "
                                "(debugger=False, profiler=False) for production runs"))
    multi_node = job.instance_count > 1
    if (multi_node or job.distribution is Distribution.PYTORCHXLA) and (
        not is_token(instance_type) and instance_type not in EFA_INSTANCE_TYPES
    ):
        warnings.append(Finding("NonEfa", f"{instance_type} has no EFA; Training Compiler "
                                f"uses EFA for distributed training. EFA types: "
                                f"{', '.join(EFA_INSTANCE_TYPES)}"))


def _checktrainium(job: TrainingJob, error: Any) -> None:
    """Trainium's two paths: the Neuron SDK's PyTorch/XLA (trn1, trn1n, trn2) and native
    TorchNeuron (trn2), each launched by torchrun with one process per NeuronCore."""
    instance_type, kind = job.instance_type, job.compiler.kind
    family = instance_family(instance_type)
    if kind is CompilerKind.NONE:
        error("TrainiumCompiler", f"{instance_type} runs compiled graphs only: use "
                                  f"Compiler.neuron_xla() (trn1, trn1n, trn2) or "
                                  f"Compiler.torch_compile() (native TorchNeuron, trn2)")
    if kind is CompilerKind.TORCH_COMPILE and family not in neuron.native_families():
        error("TrainiumCompiler", f"Compiler.torch_compile() on Trainium is the native "
                                  f"TorchNeuron backend, which runs on "
                                  f"{', '.join(neuron.native_families())} only, got "
                                  f"{instance_type!r}; on {family} use Compiler.neuron_xla()")
    elif kind is CompilerKind.TORCH_COMPILE and job.compiler.mode != "default":
        error("TrainiumCompiler", f"torch.compile mode {job.compiler.mode!r} tunes CUDA "
                                  f"(CUDA graphs, Triton autotuning) and means nothing to the "
                                  f"neuron backend; use mode 'default' on {instance_type}")
    if job.distribution is not Distribution.TORCH_DISTRIBUTED:
        hint = (" ('pytorchxla' is Training Compiler's GPU launcher; Compiler.neuron_xla() "
                "runs PyTorch/XLA under torchrun)"
                if job.distribution is Distribution.PYTORCHXLA else "")
        error("TrainiumDistribution", f"Trainium jobs launch through torchrun, one process per "
                                      f"NeuronCore: use Distribution.TORCH_DISTRIBUTED (the "
                                      f"default there), got {job.distribution.value!r}{hint}")
    if kind is CompilerKind.NEURON_XLA and job.network_isolation:
        error("TrainiumNetwork", "network_isolation cuts the job off from S3, where "
                                 "Compiler.neuron_xla() keeps its compile cache "
                                 "(NEURON_COMPILE_CACHE_URL): every run would compile "
                                 "everything again; turn network_isolation off (a VPC with an "
                                 "S3 gateway endpoint keeps the traffic private)")
    if kind is CompilerKind.NEURON_XLA and job.hyperparameters.get("precision") == "fp16":
        error("TrainiumPrecision", "precision 'fp16' needs a loss scaler, which torch-xla "
                                   "2.9 (the newest Neuron images) no longer has, and Trainium "
                                   "computes in bf16 natively (Neuron's training guides "
                                   "autocast to bf16, no scaler needed): set hyperparameters"
                                   "['precision'] to 'bf16'")
    if job.instance_count > 1 and instance_type in neuron.SINGLE_NODE_ONLY:
        multi_node = [t for t in neuron.NEURON_CORES if t not in neuron.SINGLE_NODE_ONLY]
        error("TrainiumInstanceCount", f"instance_count must be 1 on {instance_type}, which "
                                       f"has no EFA for multi-node training, got "
                                       f"{job.instance_count}; for more nodes use "
                                       f"{', '.join(multi_node)}")


def _any_gpu(instance_type: str) -> str:
    return instance_type if not is_token(instance_type) and is_gpu(instance_type) \
        else "ml.g5.xlarge"


def known_instance_type(instance_type: str) -> bool:
    """A literal instance type the API knows (the instance rule reports the others)."""
    return not is_token(instance_type) and instance_type in training_instance_types()
