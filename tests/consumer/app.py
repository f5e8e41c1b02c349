#!/usr/bin/env python3
"""A team's own CDK app, using compiled-training as installed from its wheels.

tests/test_packaging.py copies this folder out of the repository and synthesizes it with a
virtualenv that holds the two wheels and their dependencies only. Public API only.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from compiled_training import (
    BuildMode,
    CompiledTrainingChecks,
    Compiler,
    CompilerBenchmark,
    Framework,
    InputChannel,
    Parameter,
    RetrainingSchedule,
    RuntimeImage,
    TrainingImage,
    TrainingPipeline,
)

TRAINING = str(Path(__file__).resolve().parent / "training")
BERT = Framework.pytorch("1.13.1")
CHANNELS = [InputChannel("train", Parameter.string("TrainDataUri", "s3://nlp-data/bert/train/")),
            InputChannel("validation", "s3://nlp-data/bert/validation/")]

app = cdk.App()
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
stack = cdk.Stack(app, "NlpTraining", env=cdk.Environment(region="eu-west-1"))

# Built in the cloud (CodeBuild) on the Training Compiler DLC, and trained in.
image = RuntimeImage(stack, "BertImage", framework=BERT, compiler=Compiler.training_compiler(),
                     instance_type="ml.g5.48xlarge", repository_name="nlp/bert-trcomp")
bert = TrainingPipeline(
    stack, "BertFineTune", framework=BERT, compiler=Compiler.training_compiler(),
    instance_type="ml.g5.48xlarge", instance_count=2, source_dir=TRAINING,
    entry_point="train.py", image=TrainingImage.from_runtime_image(image), channels=CHANNELS,
    hyperparameters={"epochs": Parameter.integer("Epochs", 3), "batch_size": 32},
)
RetrainingSchedule(stack, "Retrain", pipeline=bert, team="nlp",
                   expression="cron(0 1 ? * MON,WED,FRI *)",
                   time_zone=cdk.TimeZone.EUROPE_BERLIN, parameters={"Epochs": 4})
benchmark = CompilerBenchmark(
    stack, "BertCompilerTrial", framework=BERT, compiler=Compiler.training_compiler(),
    instance_type="ml.g5.12xlarge", instance_count=2, source_dir=TRAINING,
    entry_point="train.py", channels=CHANNELS, large_batch_size=48,
    hyperparameters={"epochs": 1, "batch_size": 32},
)
# A pipeline the team's data scientists made with the SageMaker SDK, retrained nightly too.
RetrainingSchedule(stack, "RetrainChurn", team="nlp", expression="cron(0 3 * * ? *)",
                   pipeline=TrainingPipeline.from_pipeline_name(stack, "Churn", "churn-sdk"))
for pipeline in (bert, benchmark):
    cdk.Validations.of(pipeline).acknowledge(cdk.Acknowledgment(
        id="CompiledTraining::CompiledTraining-CT9",
        reason="The team runs Training Compiler's last release on purpose until its "
               "benchmark says torch.compile is as fast."))

# Built by the deploying machine's Docker, on a current PyTorch DLC for torch.compile.
RuntimeImage(stack, "TorchCompileImage", framework=Framework.pytorch("2.3.0"),
             compiler=Compiler.torch_compile(), build_mode=BuildMode.LOCAL)

app.synth()
