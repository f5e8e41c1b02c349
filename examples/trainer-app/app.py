#!/usr/bin/env python3
"""A team's CDK app for its own Hugging Face Trainer script: a review classifier fine-tuned
weekly on PyTorch 2.14 with torch.compile, registered only when its F1 score passes a gate.

Copy this folder, install compiled-training beside aws-cdk-lib, and run ``npx cdk synth``
(cdk.json runs ``python app.py``). ``training/train.py`` is unchanged Trainer code: its
``HfArgumentParser`` reads the hyperparameters below and the torch.compile switches the
pipeline adds; its ``compute_metrics`` makes Trainer log ``'eval_f1'``, which the metric
definition reads for the gate.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from compiled_training import (
    CompiledTrainingChecks,
    Compiler,
    Framework,
    InputChannel,
    MetricDefinition,
    ModelRegistration,
    RetrainingSchedule,
    TrainingPipeline,
)

TRAINING = Path(__file__).resolve().parent / "training"

app = cdk.App(stack_traces=False)  # warnings without a jsii kernel frame
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
stack = cdk.Stack(app, "ReviewsTraining",
                  env=cdk.Environment(account="111122223333", region="eu-central-1"))

reviews = TrainingPipeline(
    stack, "Reviews", pipeline_name="review-classifier",  # the name is the S3 prefix: keep it
    framework=Framework.pytorch("2.14"), compiler=Compiler.torch_compile(),
    instance_type="ml.g5.2xlarge",
    source_dir=str(TRAINING), entry_point="train.py",
    # TrainingArguments' own fields, as HfArgumentParser reads them (a name it lacks is a
    # synth warning, ParserRefuses).
    hyperparameters={"num_train_epochs": 3, "per_device_train_batch_size": 16,
                     "learning_rate": 3e-3, "eval_strategy": "epoch", "save_strategy": "no",
                     "report_to": "none", "output_dir": "/opt/ml/output/data/trainer"},
    channels=[InputChannel("train", "s3://acme-reviews-data/train/"),
              InputChannel("validation", "s3://acme-reviews-data/validation/")],
    # Trainer's evaluation line: {'eval_loss': '0.4012', 'eval_f1': '0.8571', ...}
    metric_definitions=[MetricDefinition("eval_f1", r"'eval_f1': '?([0-9.]+)")],
    registration=ModelRegistration(
        model_package_group_name="review-classifier", gate_metric="eval_f1",
        gate_threshold=0.8,
        # AWS publishes no PyTorch inference DLC past 2.6: the team serves with its own image.
        inference_image_uri="111122223333.dkr.ecr.eu-central-1.amazonaws.com/reviews/serve:2.14"),
)
RetrainingSchedule(stack, "Weekly", pipeline=reviews, team="reviews",
                   expression="cron(0 3 ? * SUN *)", time_zone=cdk.TimeZone.EUROPE_BERLIN)

app.synth()
