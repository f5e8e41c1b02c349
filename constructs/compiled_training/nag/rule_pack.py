"""`CompiledTrainingChecks`: a cdk-nag 3 rule pack that stops compiler misuse at synth.

It reads every ``AWS::SageMaker::Pipeline`` in the app, built by this library or by hand:
each training step's arguments (`step`), plus the workload this library records in the
resource's metadata when a pipeline was built with ``Compiler.auto(profile)``. The rules are
`rules`'; this module is cdk-nag's side of them.

    Validations.of(app).add_plugins(CompiledTrainingChecks(app))
"""

from __future__ import annotations

from typing import cast

import jsii
from aws_cdk import (
    CfnResource,
    IPolicyValidationContext,
    PolicyValidationPluginReport,
    PolicyViolation,
)
from aws_cdk import aws_sagemaker as sagemaker
from cdk_nag import IApplyRule, NagMessageLevel, NagPack, NagRuleCompliance

from compiled_training.compilers import StepRule
from compiled_training.nag.rules import all_rules
from compiled_training.nag.step import TrainingStep, training_steps
from constructs import IConstruct

__all__ = ["PACK", "RULES", "CompiledTrainingChecks", "TrainingStep"]

PACK = "CompiledTraining"
LEVELS = {"error": NagMessageLevel.ERROR, "warning": NagMessageLevel.WARN,
          "info": NagMessageLevel.INFO}
"""A rule's level as cdk-nag names it."""
RULES = all_rules()
"""The pack's rules: the general ones and every registered compiler's."""


@jsii.implements(IApplyRule)
class _AppliedRule:
    """One rule on one resource, in the shape cdk-nag's jsii interface expects."""

    def __init__(self, rule: StepRule[TrainingStep], node: CfnResource) -> None:
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
        return LEVELS[self._rule.level]

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
        informational = {f"{PACK}-{r.id}" for r in RULES if r.level == "info"}
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
