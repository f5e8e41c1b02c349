#!/usr/bin/env python3
"""A platform team's CDK app: one learning-to-rank model, trained with torch.compile on two
4-GPU instances, retrained weekly, registered behind a quality gate.

Copy this folder, install compiled-training beside aws-cdk-lib, and run ``npx cdk synth``
(cdk.json runs ``python app.py``). Its entry point, ``training/train.py``, is plain PyTorch
that keeps the library's launch contract.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from compiled_training import (
    CompiledTrainingChecks,
    Compiler,
    Distribution,
    Framework,
    InputChannel,
    ModelRegistration,
    Parameter,
    RetrainingSchedule,
    TrainingPipeline,
)

TRAINING = Path(__file__).resolve().parent / "training"

app = cdk.App(stack_traces=False)  # warnings without a jsii kernel frame
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
stack = cdk.Stack(app, "RankingTraining",
                  env=cdk.Environment(account="111122223333", region="us-east-1"))

ranker = TrainingPipeline(
    stack, "Ranker", pipeline_name="ltr-ranker",     # the name is the S3 prefix: keep it
    framework=Framework.pytorch("2.9.0"), compiler=Compiler.torch_compile(),
    instance_type="ml.g5.12xlarge", instance_count=2,
    distribution=Distribution.TORCH_DISTRIBUTED,      # torchrun: all 8 GPUs train one model
    source_dir=str(TRAINING), entry_point="train.py",
    hyperparameters={"epochs": Parameter.integer("Epochs", 3), "batch_size": 64,
                     "learning_rate": 1e-3},
    channels=[InputChannel("train", Parameter.string("TrainDataUri", "s3://acme-ltr-data/train/")),
              InputChannel("validation", "s3://acme-ltr-data/validation/")],
    spot=True, max_runtime=cdk.Duration.hours(4),     # checkpoints to S3, resumes
    registration=ModelRegistration(
        model_package_group_name="ltr-ranker", gate_metric="validation_accuracy",
        gate_threshold=0.8,
        # AWS publishes no PyTorch inference DLC past 2.6: the team serves with its own image.
        inference_image_uri="111122223333.dkr.ecr.us-east-1.amazonaws.com/ltr/serve:2.9.0"),
)
RetrainingSchedule(stack, "Weekly", pipeline=ranker, team="ranking",
                   expression="cron(0 2 ? * MON *)", time_zone=cdk.TimeZone.EUROPE_BERLIN)

app.synth()
