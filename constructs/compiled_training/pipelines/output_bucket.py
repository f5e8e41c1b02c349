"""`TrainingOutputBucket`: where training jobs write models, outputs and checkpoints."""

from __future__ import annotations

from aws_cdk import Duration, Names, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from compiled_training.definition import compile_cache
from compiled_training.wiring.acknowledgements import acknowledge, skip_checkov
from compiled_training.wiring.stack_reads import child, free_id, once, stack_of
from constructs import Construct

LOG_PREFIX = "output-bucket/"


class TrainingOutputBucket(Construct):
    """An encrypted, versioned, SSL-only, private, access-logged bucket, retained on delete.

    Pipelines share it, each under its own prefix (their roles can reach no other).
    """

    def __init__(self, scope: Construct, construct_id: str, *,
                 kms_key: kms.IKey | None = None) -> None:
        """
        :param kms_key: when omitted, S3-managed encryption (SSE-S3).
        """
        free_id(scope, construct_id, "TrainingOutputBucket")
        super().__init__(scope, construct_id)
        logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
        )
        acknowledge(logs, "AwsSolutions-S1",
                    "This bucket receives the output bucket's access logs; logging it to "
                    "itself would recurse.")
        skip_checkov(logs, {
            "CKV_AWS_18": "This bucket receives the output bucket's access logs; logging it "
                          "to itself would recurse.",
            "CKV_AWS_21": "Access logs are written once and expire after a year; versions "
                          "would keep nothing a log record does not already hold.",
        })
        self.bucket = s3.Bucket(
            self,
            "Resource",
            encryption=s3.BucketEncryption.KMS if kms_key else s3.BucketEncryption.S3_MANAGED,
            encryption_key=kms_key,
            bucket_key_enabled=bool(kms_key),
            versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30)),
                s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(7)),
            ],
        )
        # Access logging through a bucket policy, not the legacy log-delivery ACL (which is
        # what server_access_logs_bucket does in apps without the matching feature flag).
        cfn_bucket = self.bucket.node.default_child
        assert isinstance(cfn_bucket, s3.CfnBucket)
        cfn_bucket.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
            destination_bucket_name=logs.bucket_name, log_file_prefix=LOG_PREFIX
        )
        logs.add_to_resource_policy(iam.PolicyStatement(
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
            actions=["s3:PutObject"],
            resources=[logs.arn_for_objects(f"{LOG_PREFIX}*")],
            conditions={
                "ArnLike": {"aws:SourceArn": self.bucket.bucket_arn},
                "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
            },
        ))

    @staticmethod
    def of_stack(scope: Construct, kms_key: kms.IKey | None = None) -> s3.IBucket:
        """The stack's shared output bucket (one per KMS key), created on first use."""
        stack = stack_of(scope)
        key_id = once(kms_key, "unique id", lambda: Names.node_unique_id(kms_key.node)) \
            if kms_key else ""
        construct_id = f"TrainingOutputs{key_id}"
        return child(stack, construct_id, TrainingOutputBucket, lambda unique_id: (
            TrainingOutputBucket(stack, unique_id, kms_key=kms_key))).bucket


def expire_compile_cache(bucket: s3.IBucket, pipeline_name: str) -> None:
    """Expires a pipeline's torch.compile cache in the stack's own bucket once no run has saved
    it for a while (a given bucket's owner sets its own lifecycle)."""
    if not isinstance(bucket, s3.Bucket):
        raise TypeError(f"only the stack's own TrainingOutputBucket takes a lifecycle rule, got "
                        f"{type(bucket).__name__}")
    folder = f"{pipeline_name}/{compile_cache.COMPILE_CACHE}"  # each run rewrites it
    bucket.add_lifecycle_rule(id=folder.replace("/", "-"), prefix=f"{folder}/",
                              expiration=Duration.days(compile_cache.EXPIRY_DAYS),
                              noncurrent_version_expiration=Duration.days(1))
