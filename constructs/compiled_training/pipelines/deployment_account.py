"""A deployment account's read of a pipeline's model versions: the Model Package Group's
resource policy, and the artifacts' (the output bucket's and its KMS key's)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from compiled_training.definition.registration import REPORT_FOLDER
from compiled_training.wiring.stack_reads import aws_partition, format_arn
from constructs import Construct


def group_policy(stack: Stack, group_arn: str, name: str,
                  account: str | None) -> dict[str, Any] | None:
    if account is None:
        return None
    packages = format_arn(stack, service="sagemaker", resource="model-package",
                          resource_name=f"{name.lower()}/*")
    principal = iam.AccountPrincipal(account).arn
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DeploymentAccountReadsGroup", "Effect": "Allow",
         "Principal": {"AWS": principal},
         "Action": ["sagemaker:DescribeModelPackageGroup"], "Resource": group_arn},
        {"Sid": "DeploymentAccountReadsVersions", "Effect": "Allow",
         "Principal": {"AWS": principal},
         "Action": ["sagemaker:DescribeModelPackage", "sagemaker:ListModelPackages"],
         "Resource": packages},
    ]}


def let_deployment_account_read(scope: Construct, bucket: s3.IBucket, pipeline_name: str,
                                 account: str) -> None:
    """The deployment account may read this pipeline's model archives and reports (the bucket
    policy), and decrypt them through S3 (the key policy); nothing else of the bucket."""
    principal = iam.AccountPrincipal(account)
    objects = [bucket.arn_for_objects(f"{pipeline_name}/output/*/output/model.tar.gz"),
               bucket.arn_for_objects(f"{pipeline_name}/{REPORT_FOLDER}/*")]
    added = bucket.add_to_resource_policy(iam.PolicyStatement(
        principals=[principal], actions=["s3:GetObject"],
        resources=objects)).statement_added
    key = bucket.encryption_key
    if key is not None:
        added = key.add_to_resource_policy(iam.PolicyStatement(
            principals=[principal], actions=["kms:Decrypt"], resources=["*"],
            # Only as S3 decrypts an object for it (which the bucket policy limits to these
            # objects). The bucket's own ARN cannot be named here: the bucket names this key,
            # so the key naming the bucket would be a dependency cycle.
            conditions={
                "StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"},
                "StringLike": {"kms:EncryptionContext:aws:s3:arn": f"arn:{aws_partition()}:s3:::*"},
            })).statement_added and added
    if not added:
        Annotations.of(scope).add_warning_v2(
            "compiled-training:ModelRegistration:DeploymentAccountRead",
            f"deployment_account {account} cannot read the artifacts of an imported bucket: "
            f"grant it s3:GetObject on {pipeline_name}/output/*/output/model.tar.gz and "
            f"{pipeline_name}/{REPORT_FOLDER}/* (and kms:Decrypt) there")
