"""SageMaker Training Compiler (XLA), on its own Deep Learning Containers; frozen by AWS.

Its rules are the SageMaker SDK v2's (``training_compiler/config.py`` of the PyTorch and
Hugging Face estimators)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import DlcImage, resolve_dlc, training_compiler_releases
from compiled_training.catalog.instances import (
    EFA_INSTANCE_TYPES,
    TRAINING_COMPILER_FAMILIES,
    accelerator,
    gpus_per_instance,
    instance_family,
    is_gpu,
)
from compiled_training.compilers.base import (
    FIRST_COMPILE_MINUTES,
    Choice,
    CompileOverhead,
    CompilerKind,
    CompilerModule,
    Finding,
    Framework,
    Job,
    Notice,
    Pick,
    Prior,
    Step,
    StepRule,
    Workload,
    minor,
    option,
    value_of,
)
from compiled_training_runtime import contract

PYTORCHXLA = "pytorchxla"
SMDISTRIBUTED = "smdistributed"
TORCH_DISTRIBUTED = "torch_distributed"
ANY_GPU = "ml.g5.xlarge"
"""The GPU a version's compiler image is looked up for when the job's instance is a token."""

_NOT_SUPPORTED = {
    "nvidia": "{family} is a GPU family Training Compiler never supported",
    "amd": "{family} is an AMD GPU family, which Training Compiler does not support",
    "trainium": "AWS Trainium, which compiles with the Neuron SDK: use Compiler.neuron_xla(), "
                "or Compiler.torch_compile() on ml.trn2",
    "inferentia": "AWS Inferentia",
    "cpu": "a CPU instance",
}


# AWS, "Amazon SageMaker Training Compiler" launch (re:Invent, 2021-12): "up to 50 % faster"
# training on Hugging Face transformer models. An upper bound only: the low end is this
# library's conservative floor. AWS's tested models for PyTorch are transformers; elsewhere it
# may not help at all.
SOURCE = "AWS's Training Compiler launch, 2021-12: up to 50 % on transformers"
PRIORS = {
    "transformer": Prior((1.1, 1.5), SOURCE, True),
    "other": Prior((1.0, 1.3), "assumed no better than torch.compile on the TorchBench mix",
                   False),
}
# AWS's Training Compiler "tested models" table lists, per model and instance, the largest
# batch with and without the compiler; for its transformer entries the compiler's batch is
# larger, approximately 1.5x to 2x or more. The low end is the step to recommend.
BATCH_GROWTH = 1.5




def releases(framework: str) -> list[str]:
    """Its releases for a framework, from the SDK's support matrix."""
    prefix = "Hugging Face" if framework == "huggingface" else "PyTorch"
    return [r for r in training_compiler_releases() if r.startswith(prefix)]


def release_for(framework: str, version: str) -> str | None:
    """The release for a PyTorch version, matched on major.minor (1.13 and 1.13.0 run on
    1.13.1's image); None where it has none."""
    wanted = ".".join(version.split(".")[:2])
    return next((r for r in releases(framework)
                 if r.rpartition("PyTorch ")[2].startswith(wanted + ".")), None)


def pytorchxla_from(framework: Framework) -> tuple[int, int]:
    # The SDK's thresholds: pytorchxla from PyTorch 1.12 (Hugging Face: 1.11).
    return (1, 11) if framework.name == "huggingface" else (1, 12)


def pytorchxla_supported(framework: Framework) -> bool:
    """Whether Training Compiler's ``pytorchxla`` launcher exists for this version."""
    return minor(framework.pytorch_version or "0") >= pytorchxla_from(framework)


# --- its rule-pack rules: what a template of any origin must hold for it -----------------

def _gpu_instance(step: Step) -> bool:
    return is_gpu(step.instance_type)


def _no_smdistributed(step: Step) -> bool:
    return not (step.flag("sagemaker_distributed_dataparallel_enabled")
                or "sagemaker_mpi_enabled" in step.hyperparameters)


def _no_debugger_or_profiler(step: Step) -> bool:
    profiler_off = step.arguments.get("ProfilerConfig", {}).get("DisableProfiler") is True
    return "DebugHookConfig" not in step.arguments and profiler_off


def _pytorchxla_on_many_gpus(step: Step) -> bool:
    multi_gpu = step.instance_count > 1 or gpus_per_instance(step.instance_type) > 1
    return not multi_gpu or step.flag(contract.HP_PYTORCH_XLA_MULTI_WORKER)


def _supported_version(step: Step) -> bool | None:
    if "frameworkVersion" not in step.metadata:
        return None
    name, version = step.metadata.get("frameworkName"), step.metadata["frameworkVersion"]
    wanted = (f"PyTorch {version}" if name == "pytorch" else
              f"Hugging Face Transformers {version} with PyTorch "
              f"{step.metadata.get('pytorchVersion')}")
    return wanted in training_compiler_releases()


STEP_RULES = (
    StepRule("CT1", "error", "The training step enables a compiler on a CPU instance.",
             "Training Compiler compiles for GPUs (p3, p3dn, g4dn, p4d, g5); on a CPU instance "
             "the job fails or only pays the compile cost.", _gpu_instance),
    StepRule("CT2", "error", "The training step combines Training Compiler with smdistributed.",
             "SageMaker's data and model parallel libraries are not compatible with Training "
             "Compiler; use the pytorchxla distribution.", _no_smdistributed),
    StepRule("CT3", "warning",
             "The training step runs Debugger or Profiler under Training Compiler.",
             "Debugger hooks and the profiler add recompilation overhead and degrade "
             "performance; omit DebugHookConfig and set ProfilerConfig.DisableProfiler for "
             "production runs.", _no_debugger_or_profiler),
    StepRule("CT4", "error",
             "The training step spans more than one GPU with Training Compiler but without the "
             "pytorchxla launcher.",
             "With PyTorch 1.12 and later, Training Compiler distributes only through pytorchxla "
             "(sagemaker_pytorch_xla_multi_worker_enabled); otherwise all but one GPU sit idle.",
             _pytorchxla_on_many_gpus),
    StepRule("CT8", "error",
             "Training Compiler is enabled for a framework version it never supported.",
             "Training Compiler DLCs exist only for its published releases; use torch.compile "
             "on PyTorch 2.x.", _supported_version),
)
FROZEN = Notice("CT9", "Training Compiler is frozen: AWS publishes no new releases.",
                "The last releases are PyTorch 1.12.0 and 1.13.1 and Hugging Face PyTorch "
                "1.9-1.11; plan the move to torch.compile on a current PyTorch DLC.")


class TrainingCompiler(CompilerModule):
    """SageMaker Training Compiler: its hyperparameters, its pytorchxla launcher, its images
    and the SDK's rules for them."""

    name = CompilerKind.TRAINING_COMPILER
    title = "Training Compiler"
    through_xla = True
    dockerfile = "training-compiler"
    distributions_checked = frozenset({PYTORCHXLA, SMDISTRIBUTED})
    settings = ("debug",)
    options_as_fields = True
    priors = PRIORS
    compile_overhead = CompileOverhead(
        FIRST_COMPILE_MINUTES, None,
        "Training Compiler's torch-xla 1.x keeps no compile cache between runs")
    preference = 10
    sets_own_launcher = True
    batch_growth = BATCH_GROWTH
    warning_ids = ("DebuggerProfiler", "NonEfa")
    step_rules = STEP_RULES
    notices = (FROZEN,)
    image_checked = True
    successor = CompilerKind.TORCH_COMPILE  # on PyTorch 2.x
    acknowledged_when_chosen = MappingProxyType({
        "CT9": "runs Training Compiler's last release on purpose; the move to torch.compile is "
               "decided by a CompilerBenchmark, not by this stack."})

    def choose_on_gpu(self, workload: Workload, category: str) -> Pick:
        version, family = workload.framework_version, instance_family(workload.instance_type)
        families = ", ".join(TRAINING_COMPILER_FAMILIES)
        known = ", ".join(releases(workload.framework))
        supported = family in TRAINING_COMPILER_FAMILIES
        if version is None:
            if supported and category == "transformer":
                return Pick(True, f"Training Compiler: framework_version not given, so one of "
                                  f"its releases is assumed ({known}); it has published "
                                  f"transformer gains on {family}")
            return Pick(False, f"{family} is not a Training Compiler family ({families})"
                        if not supported else
                        "Training Compiler has published gains for transformers only")
        if minor(version)[0] >= 2:
            return Pick(False, f"Training Compiler is frozen at {known}")
        release = release_for(workload.framework, version)
        if release and supported:
            return Pick(True, f"Training Compiler: its {release} release runs on {family}")
        return Pick(False, f"Training Compiler's {release} release does not run on {family} "
                           f"({families} only)" if release else
                           f"Training Compiler has no release for PyTorch {version} ({known})")

    def move_note(self, successor: CompilerModule, category: str) -> str | None:
        move = successor.prior(category)
        if move is None:
            return None
        return ("Training Compiler is frozen (AWS publishes no new releases): moving the job to "
                f"PyTorch 2.x makes {successor.title} its compiler (about "
                f"{move.speedup[0]:g}-{move.speedup[1]:g}x for {category} in PyTorch 2.0's "
                "figures) on current DLCs")

    def fields(self, **given: Any) -> dict[str, Any]:
        return {**super().fields(**given), "debug": option(given, "debug", False, bool)}

    def image(self, framework: Framework, instance_type: str) -> DlcImage:
        return resolve_dlc(framework, True, instance_type)

    def hyperparameters(self, choice: Choice) -> dict[str, bool | str]:
        return {contract.HP_TRAINING_COMPILER_ENABLED: True,
                contract.HP_TRAINING_COMPILER_DEBUG: choice.debug}

    def describe(self, choice: Choice) -> str:
        return self.title + (" (debug)" if choice.debug else "")

    def default_distribution(self, framework: Framework, instance_type: str,
                             count: int) -> str | None:
        many = count > 1 or gpus_per_instance(instance_type) > 1
        return PYTORCHXLA if pytorchxla_supported(framework) and many else None

    def launcher_hint(self, framework: Framework) -> str | None:
        if not pytorchxla_supported(framework):
            return None
        return "Distribution.PYTORCHXLA (Training Compiler's launcher, one process per GPU)"

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        return contract.plain(hyperparameters.get(contract.HP_TRAINING_COMPILER_ENABLED,
                                                  "")) == "true"

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        errors: list[Finding] = []
        warnings: list[Finding] = []
        framework, instance_type = job.framework, job.instance_type
        literal = not is_token(instance_type)
        family = instance_family(instance_type) if literal else ""
        if literal and family not in TRAINING_COMPILER_FAMILIES:
            why = _NOT_SUPPORTED[accelerator(instance_type)].format(family=family)
            errors.append(("CompilerInstance", f"instance_type must be a GPU instance of "
                                               f"{', '.join(TRAINING_COMPILER_FAMILIES)} for "
                                               f"Training Compiler, got {instance_type!r} "
                                               f"({why})"))
        if job.distribution == SMDISTRIBUTED:
            errors.append(("CompilerSmdistributed", "distribution 'smdistributed' (SageMaker "
                                                    "data/model parallel) is not compatible "
                                                    "with Training Compiler; use "
                                                    "Distribution.PYTORCHXLA"))
        if framework.runs_script:
            gpu = instance_type if literal and is_gpu(instance_type) else ANY_GPU
            try:
                # Also what a given image_uri must extend: the version must have a compiler DLC.
                resolve_dlc(framework, True, gpu)
            except ValueError as unsupported:
                return errors + [("CompilerVersion", str(unsupported))], warnings
        xla = pytorchxla_supported(framework)
        if job.distribution == PYTORCHXLA and not xla:
            since = ".".join(map(str, pytorchxla_from(framework)))
            errors.append(("CompilerDistribution", f"distribution 'pytorchxla' needs PyTorch "
                                                   f"{since} or newer with Training Compiler, "
                                                   f"got {framework.describe()}"))
        if job.distribution == TORCH_DISTRIBUTED and xla:
            errors.append(("CompilerDistribution", f"'pytorchxla' is the only distribution "
                                                   f"Training Compiler supports for "
                                                   f"{framework.describe()}, got "
                                                   f"{value_of(job.distribution)!r}"))
        if job.debugger or job.profiler:
            warnings.append(("DebuggerProfiler", "Debugger and Profiler add recompilation "
                                                 "overhead under Training Compiler; turn them "
                                                 "off (debugger=False, profiler=False) for "
                                                 "production runs"))
        distributed = job.instance_count > 1 or job.distribution == PYTORCHXLA
        if distributed and literal and instance_type not in EFA_INSTANCE_TYPES:
            warnings.append(("NonEfa", f"{instance_type} has no EFA; Training Compiler uses EFA "
                                       f"for distributed training. EFA types: "
                                       f"{', '.join(EFA_INSTANCE_TYPES)}"))
        return errors, warnings
