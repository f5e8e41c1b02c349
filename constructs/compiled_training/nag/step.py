"""What a rule reads: a pipeline's training steps (`TrainingStep`), from a template the library
may not have built, with the workload and schedule the library's own pipelines record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training.advice.advisor import WorkloadProfile
from compiled_training.compilers import CompilerModule, no_compiler, recognized
from compiled_training.pipelines.base import SCHEDULES_METADATA
from compiled_training.wiring.acknowledgements import flatten
from compiled_training_runtime import contract


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
