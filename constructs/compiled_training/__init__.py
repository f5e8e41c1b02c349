"""compiled-training: CDK constructs for SageMaker training with a compiler, checked at synth."""

from .compiler import Compiler, CompilerKind
from .framework import Framework
from .job import Distribution, InputChannel, Parameter, ParameterType
from .output_bucket import TrainingOutputBucket
from .schedule import RetrainingSchedule
from .training_pipeline import TrainingPipeline

__all__ = [
    "Compiler",
    "CompilerKind",
    "Distribution",
    "Framework",
    "InputChannel",
    "Parameter",
    "ParameterType",
    "RetrainingSchedule",
    "TrainingOutputBucket",
    "TrainingPipeline",
]
