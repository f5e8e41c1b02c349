"""compiled-training: CDK constructs for SageMaker training with a compiler, checked at synth.

Names load on first use, so that the command line and the synth summary start without
aws-cdk-lib (and its Node.js process) when they do not need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Compiler": "compiler",
    "CompilerKind": "compiler",
    "Framework": "framework",
    "Distribution": "job",
    "InputChannel": "job",
    "Parameter": "job",
    "ParameterType": "job",
    "TrainingOutputBucket": "output_bucket",
    "TrainingPipeline": "training_pipeline",
    "ModelRegistration": "registration",
    "CompilerBenchmark": "compiler_benchmark",
    "RetrainingSchedule": "schedule",
    "RuntimeImage": "runtime_image",
    "BuildMode": "runtime_image",
    "WorkloadProfile": "advisor",
    "Verdict": "advisor",
    "assess_workload": "advisor",
    "CompiledTrainingChecks": "checks",
}
__all__ = [
    "BuildMode",
    "CompiledTrainingChecks",
    "Compiler",
    "CompilerBenchmark",
    "CompilerKind",
    "Distribution",
    "Framework",
    "InputChannel",
    "ModelRegistration",
    "Parameter",
    "ParameterType",
    "RetrainingSchedule",
    "RuntimeImage",
    "TrainingOutputBucket",
    "TrainingPipeline",
    "Verdict",
    "WorkloadProfile",
    "assess_workload",
]

if TYPE_CHECKING:
    from .advisor import Verdict, WorkloadProfile, assess_workload
    from .checks import CompiledTrainingChecks
    from .compiler import Compiler, CompilerKind
    from .compiler_benchmark import CompilerBenchmark
    from .framework import Framework
    from .job import Distribution, InputChannel, Parameter, ParameterType
    from .output_bucket import TrainingOutputBucket
    from .registration import ModelRegistration
    from .runtime_image import BuildMode, RuntimeImage
    from .schedule import RetrainingSchedule
    from .training_pipeline import TrainingPipeline


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'compiled_training' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
