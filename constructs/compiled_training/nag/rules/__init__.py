"""The rule pack's rules: one module per general rule, named for what it checks, each with its
``CTn`` id (`GENERAL`), and every registered compiler's own (its module's `step_rules`, asked
only of its steps, and its `notices`, reported wherever it is used).

May import: the compilers, the advisor, the catalog and the rule pack's `step`; no construct.
"""

from __future__ import annotations

from compiled_training.compilers import (
    CompilerModule,
    Notice,
    Step,
    StepRule,
    all_compilers,
    value_of,
)
from compiled_training.nag.rules import (
    dynamic_shapes,
    fp32_only,
    idle_gpus,
    no_graph_to_compile,
    short_runs,
)
from compiled_training.nag.step import TrainingStep

GENERAL: tuple[StepRule[TrainingStep], ...] = (short_runs.RULE, dynamic_shapes.RULE, fp32_only.RULE,
                                 no_graph_to_compile.RULE, idle_gpus.RULE)
"""The rules of every training step, whatever compiles it."""


def all_rules() -> tuple[StepRule[TrainingStep], ...]:
    """The general rules and every registered compiler's, each id once, in id order."""
    owners = {rule.id: "the rule pack" for rule in GENERAL}
    rules = list(GENERAL)
    for module in all_compilers():
        for rule in (*module.step_rules, *(_noticed(notice) for notice in module.notices)):
            owner = f"compiler {value_of(module.name)!r}"
            if rule.id in owners:
                raise ValueError(f"{owner}: rule id {rule.id} is taken by {owners[rule.id]}; "
                                 f"give its StepRule an id of its own")
            owners[rule.id] = owner
            rules.append(_its_steps_only(module, rule))
    return tuple(sorted(rules, key=_order))


def _noticed(notice: Notice) -> StepRule[Step]:
    """A notice as cdk-nag reports one: an informational finding on each step of its compiler,
    which a team acknowledges by its id."""
    return StepRule(notice.id, "info", notice.info, notice.explanation, lambda step: False)


def _its_steps_only(module: CompilerModule, rule: StepRule[Step]) -> StepRule[TrainingStep]:
    """A compiler's own rule, asked only of the steps that carry that compiler."""
    def check(step: TrainingStep) -> bool | None:
        return rule.check(step) if module in step.compilers else None

    return StepRule(rule.id, rule.level, rule.info, rule.explanation, check)


def _order(rule: StepRule[TrainingStep]) -> tuple[bool, str, int]:
    """CT1, CT2, ... then a package's rules by theirs."""
    prefix = rule.id.rstrip("0123456789")
    return prefix != "CT", prefix, int(rule.id[len(prefix):] or 0)
