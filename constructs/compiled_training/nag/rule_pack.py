"""`CompiledTrainingChecks`: a cdk-nag 3 rule pack that stops compiler misuse at synth.

It reads every ``AWS::SageMaker::Pipeline`` in the app, built by this library or by hand:
each training step's arguments, plus the workload this library records in the resource's
metadata when a pipeline was built with ``Compiler.auto(profile)``.

    Validations.of(app).add_plugins(CompiledTrainingChecks(app))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import jsii
from aws_cdk import (
    CfnResource,
    IPolicyValidationContext,
    PolicyValidationPluginReport,
    PolicyViolation,
    Stack,
)
from aws_cdk import aws_sagemaker as sagemaker
from cdk_nag import IApplyRule, NagMessageLevel, NagPack, NagRuleCompliance

from compiled_training.advice.advisor import Verdict, WorkloadProfile, assess_workload
from compiled_training.advice.assessment import Factor
from compiled_training.catalog.dlc import training_compiler_releases
from compiled_training.catalog.instances import gpus_per_instance, is_gpu
from compiled_training.catalog.neuron import NEURON_CORES, is_trainium
from compiled_training.compilers import CompilerModule, no_compiler, recognized
from compiled_training.pipelines.base import SCHEDULES_METADATA
from compiled_training.wiring.acknowledgements import flatten
from compiled_training_runtime import contract
from constructs import IConstruct

PACK = "CompiledTraining"


@dataclass(frozen=True)
class TrainingStep:
    """One training step of a pipeline, as the rules see it."""

    arguments: dict[str, Any]
    metadata: dict[str, Any]
    precompiled: bool = False
    """Whether the step waits for a Neuron pre-compilation step (a training step with
    ``RUN_NEURON_PARALLEL_COMPILE=1`` in its environment)."""
    scheduled: bool = False
    """Whether a `RetrainingSchedule` starts the pipeline (the library's pipelines record it)."""

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return self.arguments.get("HyperParameters", {})

    def flag(self, name: str) -> bool:
        return self.hyperparameters.get(name) == "true"

    @property
    def compilers(self) -> list[CompilerModule]:
        """Every compiler the step's switches and image show: a template not the library's
        may carry more than one, and each rule asks about its own."""
        return recognized(self.hyperparameters, self.environment, self.image)

    @property
    def compiler(self) -> CompilerModule:
        """The compiler the step uses (the first of `compilers`)."""
        return next(iter(self.compilers), no_compiler())

    @property
    def torch_compile(self) -> bool:
        return any(m.inductor for m in self.compilers)

    @property
    def training_compiler(self) -> bool:
        return any(m.training_compiler_images for m in self.compilers)

    @property
    def any_compiler(self) -> bool:
        return self.training_compiler or self.torch_compile

    @property
    def instance_type(self) -> str:
        return str(self.arguments.get("ResourceConfig", {}).get("InstanceType", ""))

    @property
    def instance_count(self) -> int:
        count = self.arguments.get("ResourceConfig", {}).get("InstanceCount", 1)
        return count if isinstance(count, int) else 1

    @property
    def image(self) -> str:
        return str(self.arguments.get("AlgorithmSpecification", {}).get("TrainingImage", ""))

    @property
    def environment(self) -> dict[str, Any]:
        return dict(self.arguments.get("Environment", {}))

    @property
    def neuron_xla(self) -> bool:
        """The Neuron SDK's PyTorch/XLA path on Trainium (the native path compiles through
        torch.compile instead)."""
        return is_trainium(self.instance_type) and any(m.neuron_sdk for m in self.compilers)

    @property
    def precompiles(self) -> bool:
        """Whether this is a pre-compilation step."""
        return self.environment.get(contract.ENV_RUN_NEURON_PARALLEL_COMPILE) == "1"

    @property
    def workload(self) -> WorkloadProfile | None:
        recorded = self.metadata.get("workload")
        return WorkloadProfile(**recorded) if recorded else None


@dataclass(frozen=True)
class Rule:
    id: str
    level: NagMessageLevel
    info: str
    explanation: str
    check: Callable[[TrainingStep], bool | None]
    """True when compliant, False when not, None when the rule does not apply."""


def _debugger_or_profiler(step: TrainingStep) -> bool | None:
    if not step.training_compiler:
        return None
    profiler_off = step.arguments.get("ProfilerConfig", {}).get("DisableProfiler") is True
    return "DebugHookConfig" not in step.arguments and profiler_off


def _multi_gpu_without_xla(step: TrainingStep) -> bool | None:
    if not step.training_compiler:
        return None
    multi_gpu = step.instance_count > 1 or gpus_per_instance(step.instance_type) > 1
    return not multi_gpu or step.flag(contract.HP_PYTORCH_XLA_MULTI_WORKER)


# The switches by which the training toolkit starts a launcher (torchrun, xla_spawn, MPI,
# SageMaker's data-parallel library) instead of one `python script` per instance.
_LAUNCHERS = (contract.HP_TORCH_DISTRIBUTED, contract.HP_PYTORCH_XLA_MULTI_WORKER,
              "sagemaker_distributed_dataparallel_enabled", "sagemaker_mpi_enabled")


def _every_gpu_used(step: TrainingStep) -> bool | None:
    runs_script = "sagemaker_program" in step.hyperparameters
    if step.metadata or not runs_script or step.training_compiler or not is_gpu(
            step.instance_type):
        # The library's own pipelines warn at synth, naming the idle count (IdleGpus), and are
        # acknowledged there; a built-in algorithm parallelizes itself; CT4 speaks for the
        # compiler.
        return None
    if any(step.flag(launcher) for launcher in _LAUNCHERS):
        return True
    return step.instance_count == 1 and gpus_per_instance(step.instance_type) == 1


def _workload_rule(
    test: Callable[[WorkloadProfile], bool],
) -> Callable[[TrainingStep], bool | None]:
    def check(step: TrainingStep) -> bool | None:
        workload = step.workload
        if not step.any_compiler or workload is None:
            return None
        return test(workload)

    return check


def _supported_version(step: TrainingStep) -> bool | None:
    if not step.training_compiler or "frameworkVersion" not in step.metadata:
        return None
    name = step.metadata.get("frameworkName")
    version = step.metadata["frameworkVersion"]
    torch = step.metadata.get("pytorchVersion")
    wanted = (f"PyTorch {version}" if name == "pytorch"
              else f"Hugging Face Transformers {version} with PyTorch {torch}")
    return wanted in training_compiler_releases()


def _deep_learning(step: TrainingStep) -> bool | None:
    if not step.any_compiler:
        return None
    built_in = any(f"/{repo}:" in step.image
                   for repo in ("sagemaker-xgboost", "sagemaker-scikit-learn"))
    return not built_in and step.metadata.get("frameworkName") != "xgboost"


def _neuron_training(step: TrainingStep) -> bool:
    """A Neuron PyTorch/XLA step that trains (not its pre-compilation)."""
    return step.neuron_xla and not step.precompiles


def _compile_cache(step: TrainingStep) -> bool | None:
    if not step.neuron_xla:
        return None
    return bool(step.environment.get(contract.ENV_NEURON_COMPILE_CACHE_URL))


def _warm_start(step: TrainingStep) -> bool | None:
    """A scheduled torch.compile step of the library's own that keeps its compile cache (the
    runtime's warm start reads the URL; a script of another's may not, so only its own)."""
    if not (step.scheduled and step.torch_compile and step.metadata) or is_trainium(
            step.instance_type):
        return None
    return bool(step.environment.get(contract.ENV_COMPILE_CACHE_URL))


def _multi_node_precompiled(step: TrainingStep) -> bool | None:
    if not _neuron_training(step) or step.instance_count < 2:
        return None
    return step.precompiled


def _batch_divides(step: TrainingStep) -> bool | None:
    """NeuronX Distributed's convention: ``global_batch_size`` over the data-parallel
    replicas (the NeuronCores over tensor x pipeline parallelism) times ``micro_batch_size``."""
    cores = NEURON_CORES.get(step.instance_type)
    hyperparameters = step.hyperparameters
    try:
        global_batch = int(hyperparameters["global_batch_size"])
        micro = int(hyperparameters.get("micro_batch_size", 1))
        model_parallel = (int(hyperparameters.get("tensor_parallel_size", 1))
                          * int(hyperparameters.get("pipeline_parallel_size", 1)))
    except (KeyError, TypeError, ValueError):
        return None  # not given, or a pipeline parameter read at run time
    if not step.neuron_xla or cores is None or micro < 1 or model_parallel < 1:
        return None
    replicas = max(1, cores * step.instance_count // model_parallel)
    return global_batch % (replicas * micro) == 0


RULES: tuple[Rule, ...] = (
    Rule("CT1", NagMessageLevel.ERROR,
         "The training step enables a compiler on a CPU instance.",
         "Training Compiler compiles for GPUs (p3, p3dn, g4dn, p4d, g5); on a CPU instance the "
         "job fails or only pays the compile cost.",
         lambda s: None if not s.training_compiler else is_gpu(s.instance_type)),
    Rule("CT2", NagMessageLevel.ERROR,
         "The training step combines Training Compiler with smdistributed.",
         "SageMaker's data and model parallel libraries are not compatible with Training "
         "Compiler; use the pytorchxla distribution.",
         lambda s: None if not s.training_compiler else not (
             s.flag("sagemaker_distributed_dataparallel_enabled")
             or "sagemaker_mpi_enabled" in s.hyperparameters)),
    Rule("CT3", NagMessageLevel.WARN,
         "The training step runs Debugger or Profiler under Training Compiler.",
         "Debugger hooks and the profiler add recompilation overhead and degrade performance; "
         "omit DebugHookConfig and set ProfilerConfig.DisableProfiler for production runs.",
         _debugger_or_profiler),
    Rule("CT4", NagMessageLevel.ERROR,
         "The training step spans more than one GPU with Training Compiler but without the "
         "pytorchxla launcher.",
         "With PyTorch 1.12 and later, Training Compiler distributes only through pytorchxla "
         "(sagemaker_pytorch_xla_multi_worker_enabled); otherwise all but one GPU sit idle.",
         _multi_gpu_without_xla),
    Rule("CT5", NagMessageLevel.WARN,
         "The workload's runs are shorter than the compiler's break-even.",
         "Compilation costs 2-5 minutes a run (torch.compile's warm start: under a third of "
         "that after the first run); shorter jobs lose more to it than they save.",
         _workload_rule(lambda w: assess_workload(w).limits[Factor.DURATION] is not Verdict.SKIP)),
    Rule("CT6", NagMessageLevel.WARN,
         "The workload declares dynamic shapes.",
         "Every new input shape recompiles the graph; pad to a fixed length or bucket shapes.",
         _workload_rule(lambda w: w.static_shapes)),
    Rule("CT7", NagMessageLevel.WARN,
         "The workload trains in fp32 only.",
         "Most of the compiler's gain comes with fp16 or bf16 mixed precision.",
         _workload_rule(lambda w: w.precision != "fp32")),
    Rule("CT8", NagMessageLevel.ERROR,
         "Training Compiler is enabled for a framework version it never supported.",
         "Training Compiler DLCs exist only for its published releases; use torch.compile on "
         "PyTorch 2.x.",
         _supported_version),
    Rule("CT9", NagMessageLevel.INFO,
         "Training Compiler is frozen: AWS publishes no new releases.",
         "The last releases are PyTorch 1.12.0 and 1.13.1 and Hugging Face PyTorch 1.9-1.11; "
         "plan the move to torch.compile on a current PyTorch DLC.",
         lambda s: None if not s.training_compiler else False),
    Rule("CT10", NagMessageLevel.ERROR,
         "A compiler is enabled for a framework that builds no deep-learning graph.",
         "Built-in algorithms such as XGBoost have nothing for a deep-learning compiler to "
         "compile.",
         _deep_learning),
    Rule("CT11", NagMessageLevel.WARN,
         "A Neuron PyTorch/XLA training step has no persistent compile cache.",
         "neuronx-cc compiles every graph, often for tens of minutes; without "
         "NEURON_COMPILE_CACHE_URL (an S3 prefix the role may read and write) every run "
         "compiles again on the Trainium instances it pays for.",
         _compile_cache),
    Rule("CT12", NagMessageLevel.WARN,
         "A multi-node Neuron PyTorch/XLA training step runs without a pre-compilation step.",
         "Each node compiles the graphs on its own, on the instances it pays for; a step "
         "before it with RUN_NEURON_PARALLEL_COMPILE=1 (Compiler.neuron_xla(precompile=True)) "
         "compiles them in parallel into the shared cache first.",
         _multi_node_precompiled),
    Rule("CT13", NagMessageLevel.WARN,
         "The global batch does not divide over the data-parallel replicas.",
         "global_batch_size must be a multiple of micro_batch_size x the data-parallel "
         "replicas: the NeuronCores (32 on trn1.32xlarge and trn1n.32xlarge, 64 on "
         "trn2.48xlarge, 2 on trn1.2xlarge) x the instances, over tensor_parallel_size x "
         "pipeline_parallel_size; otherwise the job fails or trains on another batch.",
         _batch_divides),
    Rule("CT14", NagMessageLevel.WARN,
         "The training step runs its script on more than one GPU without a launcher.",
         "With no distribution SageMaker starts one process per instance, on one GPU: the "
         "other GPUs of each instance sit idle and several instances train separate models. "
         "Enable torchrun (sagemaker_torch_distributed_enabled, the torch_distributed "
         "distribution) and have the script join the process group.",
         _every_gpu_used),
    Rule("CT15", NagMessageLevel.WARN,
         "A scheduled torch.compile step compiles from nothing every run.",
         "Without its compile cache (compile_cache off, network_isolation, or PyTorch before "
         "2.4) each scheduled run pays Dynamo, AOTAutograd and Inductor again on the instances "
         "it bills; with it, a run restores what the last one compiled "
         "(docs/guides/warm-starts.md).",
         _warm_start),
)


@jsii.implements(IApplyRule)
class _AppliedRule:
    """One rule on one resource, in the shape cdk-nag's jsii interface expects."""

    def __init__(self, rule: Rule, node: CfnResource) -> None:
        self._rule = rule
        self._node = node

    @property
    def node(self) -> CfnResource:
        return self._node

    @property
    def info(self) -> str:
        return self._rule.info

    @property
    def explanation(self) -> str:
        return self._rule.explanation

    @property
    def level(self) -> NagMessageLevel:
        return self._rule.level

    @property
    def rule_suffix_override(self) -> str:
        return self._rule.id

    def rule(self, node: CfnResource) -> NagRuleCompliance:
        verdicts = [self._rule.check(step) for step in training_steps(node)]
        if False in verdicts:
            return NagRuleCompliance.NON_COMPLIANT
        if True in verdicts:
            return NagRuleCompliance.COMPLIANT
        return NagRuleCompliance.NOT_APPLICABLE


def training_steps(node: CfnResource) -> list[TrainingStep]:
    """The training steps of a pipeline resource, references flattened to placeholders."""
    if not isinstance(node, sagemaker.CfnPipeline):
        return []
    stack = Stack.of(node)
    body = stack.resolve(node.pipeline_definition).get("PipelineDefinitionBody")
    if body is None:
        return []  # a definition in S3 cannot be read at synth
    definition = json.loads(flatten(body))
    metadata = stack.resolve(node.get_metadata("compiled-training") or {})
    scheduled = bool(node.get_metadata(SCHEDULES_METADATA))
    steps = [step for step in definition.get("Steps", []) if step.get("Type") == "Training"]
    precompiling = {step.get("Name") for step in steps
                    if TrainingStep(step.get("Arguments", {}), metadata).precompiles}
    return [TrainingStep(step.get("Arguments", {}), metadata,
                         precompiled=bool(precompiling & set(step.get("DependsOn", []))),
                         scheduled=scheduled)
            for step in steps]


class CompiledTrainingChecks(NagPack):
    """Rules CT1-CT15 for pipelines that train deep-learning models, most with a compiler
    (CT11-CT13: Neuron on Trainium; CT14: GPUs a job pays for and leaves idle; CT15: a
    scheduled torch.compile job without its compile cache).

    Errors fail the synth; warnings and informational findings are reported (in the console
    and ``validation-report.json``) without failing it, as cdk-nag 2 did: cdk-nag 3's packs
    fail on any finding, which would make an informational one (CT9) a hard stop."""

    def __init__(self, scope: IConstruct | None = None, *, verbose: bool | None = None) -> None:
        super().__init__(scope, verbose=verbose)
        self._pack_name = PACK
        self._pipelines_checked = 0

    @property
    def name(self) -> str:
        return PACK

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        self._pipelines_checked = 0
        report = super().validate(context)
        # cdk-nag reports an informational rule as a warning: say what it is.
        informational = {f"{PACK}-{r.id}" for r in RULES if r.level is NagMessageLevel.INFO}
        violations = [v if v.rule_name not in informational else PolicyViolation(
            rule_name=v.rule_name, description=v.description, severity="info",
            violating_resources=v.violating_resources, fix=v.fix,
            rule_metadata=v.rule_metadata) for v in report.violations]
        if not violations:
            # CDK leaves a plugin that found nothing out of the report; this line shows it ran.
            violations.append(PolicyViolation(
                rule_name=f"{PACK}-Summary", severity="info", violating_resources=[],
                description=f"{PACK} checked {self._pipelines_checked} pipeline"
                            f"{'' if self._pipelines_checked == 1 else 's'} against "
                            f"{RULES[0].id}-{RULES[-1].id}: no findings"))
        return PolicyValidationPluginReport(
            success=all(v.severity != "error" for v in violations), violations=violations,
            metadata=report.metadata, plugin_version=report.plugin_version)

    def _check_resource(self, node: CfnResource) -> None:
        if not isinstance(node, sagemaker.CfnPipeline):
            return
        self._pipelines_checked += 1
        for rule in RULES:
            # jsii's protocol declares setters that cdk-nag never calls: read-only suffices.
            self._apply_rule(cast(IApplyRule, _AppliedRule(rule, node)))
