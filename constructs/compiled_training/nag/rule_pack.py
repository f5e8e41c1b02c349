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
from compiled_training.catalog.instances import gpus_per_instance, is_gpu
from compiled_training.compilers import (
    CompilerModule,
    StepRule,
    all_compilers,
    no_compiler,
    recognized,
    value_of,
)
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
        """A toolkit switch, on as SageMaker reads it: ``true``, quoted or a JSON boolean."""
        return contract.plain(self.hyperparameters.get(name, "")) == "true"

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
    def judged_by_workload_rules(self) -> bool:
        """Whether a compiler the workload and framework rules judge compiles it."""
        return any(m.workload_rules_apply() for m in self.compilers)

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


# The switches by which the training toolkit starts a launcher (torchrun, xla_spawn, MPI,
# SageMaker's data-parallel library) instead of one `python script` per instance.
_LAUNCHERS = (contract.HP_TORCH_DISTRIBUTED, contract.HP_PYTORCH_XLA_MULTI_WORKER,
              "sagemaker_distributed_dataparallel_enabled", "sagemaker_mpi_enabled")


def _every_gpu_used(step: TrainingStep) -> bool | None:
    runs_script = "sagemaker_program" in step.hyperparameters
    if step.metadata or not runs_script or any(m.sets_own_launcher for m in step.compilers) \
            or not is_gpu(step.instance_type):
        # The library's own pipelines warn at synth, naming the idle count (IdleGpus), and are
        # acknowledged there; a built-in algorithm parallelizes itself; a compiler with its own
        # launcher speaks for it (Training Compiler's CT4).
        return None
    if any(step.flag(launcher) for launcher in _LAUNCHERS):
        return True
    return step.instance_count == 1 and gpus_per_instance(step.instance_type) == 1


def _workload_rule(
    test: Callable[[WorkloadProfile], bool],
) -> Callable[[TrainingStep], bool | None]:
    def check(step: TrainingStep) -> bool | None:
        workload = step.workload
        if not step.judged_by_workload_rules or workload is None:
            return None
        return test(workload)

    return check


def _deep_learning(step: TrainingStep) -> bool | None:
    if not step.judged_by_workload_rules:
        return None
    built_in = any(f"/{repo}:" in step.image
                   for repo in ("sagemaker-xgboost", "sagemaker-scikit-learn"))
    return not built_in and step.metadata.get("frameworkName") != "xgboost"


_GENERAL: tuple[Rule, ...] = (
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
    Rule("CT10", NagMessageLevel.ERROR,
         "A compiler is enabled for a framework that builds no deep-learning graph.",
         "Built-in algorithms such as XGBoost have nothing for a deep-learning compiler to "
         "compile.",
         _deep_learning),
    Rule("CT14", NagMessageLevel.WARN,
         "The training step runs its script on more than one GPU without a launcher.",
         "With no distribution SageMaker starts one process per instance, on one GPU: the "
         "other GPUs of each instance sit idle and several instances train separate models. "
         "Enable torchrun (sagemaker_torch_distributed_enabled, the torch_distributed "
         "distribution) and have the script join the process group.",
         _every_gpu_used),
)

_LEVELS = {"error": NagMessageLevel.ERROR, "warning": NagMessageLevel.WARN,
           "info": NagMessageLevel.INFO}


def _compilers_rule(module: CompilerModule, rule: StepRule) -> Rule:
    """A compiler's own rule, asked only of the steps that carry that compiler."""
    def check(step: TrainingStep) -> bool | None:
        return rule.check(step) if module in step.compilers else None

    return Rule(rule.id, _LEVELS[rule.level], rule.info, rule.explanation, check)


def _order(rule: Rule) -> tuple[bool, str, int]:
    """CT1, CT2, ... CT15, then a package's rules by theirs."""
    prefix = rule.id.rstrip("0123456789")
    return prefix != "CT", prefix, int(rule.id[len(prefix):] or 0)


def _rules() -> tuple[Rule, ...]:
    """The general rules and every registered compiler's (`step_rules`), each id once."""
    owners = {rule.id: "the rule pack" for rule in _GENERAL}
    rules = list(_GENERAL)
    for module in all_compilers():
        for rule in module.step_rules:
            owner = f"compiler {value_of(module.name)!r}"
            if rule.id in owners:
                raise ValueError(f"{owner}: rule id {rule.id} is taken by {owners[rule.id]}; "
                                 f"give its StepRule an id of its own")
            owners[rule.id] = owner
            rules.append(_compilers_rule(module, rule))
    return tuple(sorted(rules, key=_order))


RULES = _rules()
"""The pack's rules: the general ones and every registered compiler's (`step_rules`)."""

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
    scheduled torch.compile job without its compile cache), and a registered compiler's own
    (its module's `step_rules`).

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
