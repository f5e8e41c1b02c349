"""compiled-training: CDK constructs for SageMaker training with a compiler, checked at synth.

Names load on first use, so that the command line and the synth summary start without
aws-cdk-lib (and its Node.js process) when they do not need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Compiler": "values.compiler",
    "CompilerKind": "compilers.base",
    "Framework": "values.framework",
    "BenchmarkArm": "values.job",
    "Distribution": "values.job",
    "InputChannel": "values.job",
    "MetricDefinition": "values.job",
    "Parameter": "values.job",
    "TeamScope": "values.team_scope",
    "ParameterType": "values.job",
    "TrainingOutputBucket": "pipelines.output_bucket",
    "TrainingPipeline": "pipelines.training_pipeline",
    "TrainingImage": "pipelines.training_image",
    "TrainingJobOptions": "pipelines.options",
    "TrainingPipelineProps": "pipelines.options",
    "CompilerBenchmarkProps": "pipelines.options",
    "ModelRegistration": "pipelines.registration",
    "CompilerBenchmark": "pipelines.compiler_benchmark",
    "RetrainingSchedule": "schedules.retraining_schedule",
    "RuntimeImage": "image.runtime_image",
    "BuildMode": "image.runtime_image",
    "WorkloadProfile": "advice.workload",
    "Verdict": "advice.workload",
    "assess_workload": "advice.advisor",
    "CompiledTrainingChecks": "nag.rule_pack",
}
__all__ = [
    "BenchmarkArm",
    "BuildMode",
    "CompiledTrainingChecks",
    "Compiler",
    "CompilerBenchmark",
    "CompilerBenchmarkProps",
    "CompilerKind",
    "Distribution",
    "Framework",
    "InputChannel",
    "MetricDefinition",
    "ModelRegistration",
    "Parameter",
    "ParameterType",
    "RetrainingSchedule",
    "RuntimeImage",
    "TeamScope",
    "TrainingImage",
    "TrainingJobOptions",
    "TrainingOutputBucket",
    "TrainingPipeline",
    "TrainingPipelineProps",
    "Verdict",
    "WorkloadProfile",
    "assess_workload",
]

if TYPE_CHECKING:
    from compiled_training.advice.advisor import assess_workload
    from compiled_training.advice.workload import Verdict, WorkloadProfile
    from compiled_training.compilers.base import CompilerKind
    from compiled_training.image.runtime_image import BuildMode, RuntimeImage
    from compiled_training.nag.rule_pack import CompiledTrainingChecks
    from compiled_training.pipelines.compiler_benchmark import CompilerBenchmark
    from compiled_training.pipelines.options import (
        CompilerBenchmarkProps,
        TrainingJobOptions,
        TrainingPipelineProps,
    )
    from compiled_training.pipelines.output_bucket import TrainingOutputBucket
    from compiled_training.pipelines.registration import ModelRegistration
    from compiled_training.pipelines.training_image import TrainingImage
    from compiled_training.pipelines.training_pipeline import TrainingPipeline
    from compiled_training.schedules.retraining_schedule import RetrainingSchedule
    from compiled_training.values.compiler import Compiler
    from compiled_training.values.framework import Framework
    from compiled_training.values.job import (
        BenchmarkArm,
        Distribution,
        InputChannel,
        MetricDefinition,
        Parameter,
        ParameterType,
    )
    from compiled_training.values.team_scope import TeamScope


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'compiled_training' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
