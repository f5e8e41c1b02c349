"""Runs a synthesized pipeline on this machine: ``compiled-training run``.

It reads the cloud assembly as JSON (no CDK at run time), resolves the template's references to
named local stand-ins, and executes the pipeline definition as SageMaker Pipelines would: the
training steps through SageMaker's own training toolkit, the Lambda steps' handlers against an
in-process AWS (moto) that also holds the run's S3 and model registry, conditions, ``Fail``.
It needs the ``local`` extra (boto3, moto); nothing that synthesizes imports it.
"""
