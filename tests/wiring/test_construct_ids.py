"""A construct id already taken in its scope is this library's ValueError, naming the id and
the scope, for every construct it defines: never the CDK's JavaScript stack trace through jsii
(the last case the fuzzed props found: two `TrainingPipeline`s with one id)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest

import compiled_training
from compiled_training import (
    BuildMode,
    Compiler,
    CompilerBenchmark,
    Framework,
    InputChannel,
    RetrainingSchedule,
    RuntimeImage,
    TrainingOutputBucket,
    TrainingPipeline,
)
from compiled_training.pipelines.base import PipelineBase
from compiled_training.reference.platform import TeamStack
from constructs import Construct
from tests.helpers import ENV, new_stack

CHANNELS = [InputChannel("train", "s3://team-data/train/"),
            InputChannel("validation", "s3://team-data/validation/")]


def _pipeline(scope: Construct, construct_id: str, source_dir: Any) -> TrainingPipeline:
    return TrainingPipeline(scope, construct_id, framework=Framework.pytorch("2.9.0"),
                            instance_type="ml.g5.2xlarge", source_dir=source_dir,
                            entry_point="train.py", pipeline_name=f"p-{construct_id.lower()}",
                            channels=CHANNELS)


MAKERS: dict[type, Callable[[Construct, str, Any], Any]] = {
    TrainingPipeline: _pipeline,
    CompilerBenchmark: lambda scope, cid, src: CompilerBenchmark(
        scope, cid, framework=Framework.pytorch("2.9.0"), instance_type="ml.g5.2xlarge",
        compiler=Compiler.torch_compile(), source_dir=src, entry_point="train.py",
        pipeline_name=f"b-{cid.lower()}", channels=CHANNELS),
    TrainingOutputBucket: lambda scope, cid, src: TrainingOutputBucket(scope, cid),
    RetrainingSchedule: lambda scope, cid, src: RetrainingSchedule(
        scope, cid, pipeline=scope.node.try_find_child("Target")
        or PipelineBase.from_pipeline_name(scope, "Target", "made"),
        team="nlp", expression="rate(7 days)"),
    RuntimeImage: lambda scope, cid, src: RuntimeImage(
        scope, cid, framework=Framework.pytorch("2.9.0"), compiler=Compiler.torch_compile(),
        build_mode=BuildMode.LOCAL),
    TeamStack: lambda scope, cid, src: TeamStack(
        scope, cid, env=ENV, base_dir=src.parent,
        team_config={"framework": "pytorch", "framework_version": "2.9.0",
                     "instance_type": "ml.g5.2xlarge", "source_dir": src.name,
                     "entry_point": "train.py", "pipeline_name": f"t-{cid.lower()}"}),
}


def test_every_construct_the_library_exports_is_covered():
    """A construct added to the public names without a case here fails this test."""
    exported = {obj for name in compiled_training.__all__
                if inspect.isclass(obj := getattr(compiled_training, name))
                and issubclass(obj, Construct)}
    exported.add(importlib.import_module("compiled_training.reference.platform").TeamStack)
    assert exported == set(MAKERS)


@pytest.mark.parametrize("kind", list(MAKERS), ids=lambda kind: kind.__name__)
def test_a_taken_id_is_our_error_naming_the_id_and_the_scope(kind, source_dir):
    stack = new_stack()
    scope = stack if kind is not TeamStack else cdk.App.of(stack)
    MAKERS[kind](scope, "Taken", source_dir)
    with pytest.raises(ValueError, match=(
            rf"^{kind.__name__} id 'Taken' is already taken in "
            rf"{'the app' if kind is TeamStack else 'Team'} by \w+ "
            rf"{'Taken' if kind is TeamStack else 'Team/Taken'}: construct ids must be "
            rf"unique within their scope; give this {kind.__name__} another id$")):
        MAKERS[kind](scope, "Taken", source_dir)


def test_a_pipeline_id_taken_by_another_kind_names_that_kind(source_dir):
    stack = new_stack()
    TrainingOutputBucket(stack, "Bert")
    with pytest.raises(ValueError, match=r"TrainingPipeline id 'Bert' is already taken in "
                                         r"Team by TrainingOutputBucket Team/Bert"):
        _pipeline(stack, "Bert", source_dir)
    # Another scope is another namespace.
    _pipeline(Construct(stack, "Nlp"), "Bert", source_dir)
