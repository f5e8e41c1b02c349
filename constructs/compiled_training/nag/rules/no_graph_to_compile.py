"""CT10: a compiler on a built-in algorithm, which builds no deep-learning graph."""

from __future__ import annotations

from compiled_training.compilers import StepRule
from compiled_training.nag.step import TrainingStep

BUILT_IN_ALGORITHM_REPOSITORIES = ("sagemaker-xgboost", "sagemaker-scikit-learn")


def _deep_learning(step: TrainingStep) -> bool | None:
    if not step.judged_by_workload_rules:
        return None
    built_in = any(f"/{repository}:" in step.image
                   for repository in BUILT_IN_ALGORITHM_REPOSITORIES)
    return not built_in and step.metadata.get("frameworkName") != "xgboost"


RULE = StepRule(
    "CT10", "error", "A compiler is enabled for a framework that builds no deep-learning graph.",
    "Built-in algorithms such as XGBoost have nothing for a deep-learning compiler to compile.",
    _deep_learning)
