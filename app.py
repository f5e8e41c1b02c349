#!/usr/bin/env python3
"""The reference platform: one stack per team, each team's settings in cdk.json context."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from compiled_training.nag.rule_pack import CompiledTrainingChecks
from compiled_training.reference.platform import CONTEXT_KEY, TeamStack

HERE = Path(__file__).resolve().parent


def build_app(app: cdk.App | None = None) -> cdk.App:
    # No stack traces in construct metadata: a Python app's reach only into the jsii kernel, whose
    # frame the CDK CLI would print beside every warning as its location (program.js:1:...).
    app = app or cdk.App(stack_traces=False)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), CompiledTrainingChecks(app))
    region = app.node.try_get_context("compiled-training:region")
    teams = app.node.try_get_context(CONTEXT_KEY) or {}
    for team, config in teams.items():
        TeamStack(app, team, team_config=config, base_dir=HERE,
                  env=cdk.Environment(region=region) if region else None)
    return app


if __name__ == "__main__":
    build_app().synth()
