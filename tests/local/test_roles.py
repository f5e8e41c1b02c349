"""The roles a pipeline will have, decided in front of the local run's stand-in S3: the reference
platform's execution role, bucket policy and a KMS key as the synthesized template defines
them, called over HTTP with boto3 as a job calls them (its role's access key).

What stands in for AWS: moto's S3 (it checks no policy: `compiled_training.local.roles` decides
in front of it, and its words are AWS's AccessDenied). Each allowed call has a denied twin."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from compiled_training.local.assembly import read_assembly
from compiled_training.local.aws import endpoint, ensure_bucket, local_aws
from compiled_training.local.policy import ALLOW, IMPLICIT_DENY, decide
from compiled_training.local.roles import Roles, read_roles
from compiled_training.local.run import Run

DOCUMENTS = "DocumentClassification/Pipeline"
ROLE = "PipelineExecutionRoleA23949A9"
OUTPUTS = "TrainingOutputs2E2B6C5F"
KEY = "CompiledTrainingImageBuilderKey52A9A7B6"  # its policy lets the account's policies decide


@pytest.fixture(scope="module")
def pipeline(reference_assembly) -> Any:
    return next(p for p in read_assembly(Path(reference_assembly.directory))
                if p.path.startswith(DOCUMENTS))


@pytest.fixture(scope="module")
def stack(pipeline) -> Any:
    return pipeline.stack


@pytest.fixture(scope="module")
def prefix(pipeline) -> str:
    """The pipeline's own prefix of the output bucket, which its execution role may write."""
    return f"{pipeline.name}/"


def _changed(stack: Any, change: Any) -> Any:
    """The stack with ``change(template)`` applied to a copy of its template."""
    changed = copy.copy(stack)
    changed.template = copy.deepcopy(stack.template)
    change(changed.template)
    return changed


@pytest.fixture
def call(stack) -> Iterator[Any]:
    """``call(roles, role_logical_id)``: an S3 client of that role, against a stand-in S3 that
    ``roles`` guards, with the stack's output bucket in it."""
    with local_aws(stack.account, stack.region) as s3, ExitStack() as servers:
        ensure_bucket(s3, "example-document-classification-data")
        for bucket in stack.buckets():
            ensure_bucket(s3, bucket)

        def client(roles: Roles, role: str) -> Any:
            url = servers.enter_context(endpoint(roles))
            arn = f"arn:aws:iam::{stack.account}:role/{role}"
            return boto3.client("s3", endpoint_url=url, region_name=stack.region,
                                aws_access_key_id=roles.access_key(arn) or "local",
                                aws_secret_access_key="local")

        yield client


def _denied(operation: Any, **arguments: Any) -> str:
    with pytest.raises(ClientError) as raised:
        operation(**arguments)
    assert raised.value.response["Error"]["Code"] == "AccessDenied"
    return str(raised.value.response["Error"]["Message"])


def test_the_execution_role_reaches_its_prefix_and_its_data_and_nothing_else(stack, prefix,
                                                                            call):
    roles = read_roles(stack)
    s3 = call(roles, ROLE)
    bucket = stack.resolve({"Ref": OUTPUTS})
    s3.put_object(Bucket=bucket, Key=f"{prefix}model.tar.gz", Body=b"model")
    assert s3.get_object(Bucket=bucket, Key=f"{prefix}model.tar.gz")["Body"].read() == b"model"
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["KeyCount"] == 1
    # Twins: another pipeline's prefix, a list without the prefix, a delete it was not given.
    message = _denied(s3.put_object, Bucket=bucket, Key="Other-Pipeline/model.tar.gz", Body=b"")
    assert message == (f"User: arn:aws:sts::{stack.account}:assumed-role/{ROLE}/SageMaker is not "
                       f"authorized to perform: s3:PutObject on resource: \"arn:aws:s3:::{bucket}"
                       f"/Other-Pipeline/model.tar.gz\" because no identity-based policy allows "
                       f"the s3:PutObject action")
    assert "s3:ListBucket on resource: \"arn:aws:s3:::" in _denied(s3.list_objects_v2,
                                                                    Bucket=bucket)
    assert "s3:DeleteObject" in _denied(s3.delete_object, Bucket=bucket,
                                        Key=f"{prefix}model.tar.gz")
    # The data channels: read, listed under their prefixes only.
    data = "example-document-classification-data"
    assert s3.list_objects_v2(Bucket=data, Prefix="bert/train/")["KeyCount"] == 0
    assert "s3:ListBucket" in _denied(s3.list_objects_v2, Bucket=data, Prefix="bert/")
    assert "s3:PutObject" in _denied(s3.put_object, Bucket=data, Key="bert/train/x", Body=b"")
    assert roles.decided == 9 and len(roles.denied) == 5


def test_calls_as_no_role_of_the_stack_are_not_checked(stack, call):
    roles = read_roles(stack)
    s3 = call(roles, "SomeoneElsesRole")  # the runner's own key: seeding data, handlers
    s3.put_object(Bucket="example-document-classification-data", Key="anywhere", Body=b"")
    assert roles.decided == 0


def test_a_bucket_policy_deny_wins_over_the_roles_allow(stack, prefix, call):
    def deny_models(template: dict[str, Any]) -> None:
        policy = next(r for r in template["Resources"].values()
                      if r["Type"] == "AWS::S3::BucketPolicy"
                      and r["Properties"]["Bucket"] == {"Ref": OUTPUTS})
        policy["Properties"]["PolicyDocument"]["Statement"].append({
            "Effect": "Deny", "Principal": {"AWS": {"Fn::GetAtt": [ROLE, "Arn"]}},
            "Action": "s3:PutObject", "Resource": {"Fn::Join": ["", [
                {"Fn::GetAtt": [OUTPUTS, "Arn"]}, "/*/model.tar.gz"]]}})

    roles = read_roles(_changed(stack, deny_models))
    s3 = call(roles, ROLE)
    bucket = stack.resolve({"Ref": OUTPUTS})
    s3.put_object(Bucket=bucket, Key=f"{prefix}checkpoint.pt", Body=b"")
    message = _denied(s3.put_object, Bucket=bucket, Key=f"{prefix}model.tar.gz", Body=b"")
    assert message.endswith("with an explicit deny in a resource-based policy")


def _kms_bucket(template: dict[str, Any]) -> None:
    """The output bucket encrypted with a customer managed key of the stack."""
    template["Resources"][OUTPUTS]["Properties"]["BucketEncryption"] = {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [KEY, "Arn"]}}}]}


def _key_grant(template: dict[str, Any]) -> None:
    _kms_bucket(template)
    statements = template["Resources"][ROLE]["Properties"]["Policies"][0]["PolicyDocument"]
    statements["Statement"].append({"Effect": "Allow", "Action": ["kms:Decrypt",
                                                                  "kms:GenerateDataKey*"],
                                    "Resource": {"Fn::GetAtt": [KEY, "Arn"]}})


def test_a_bucket_key_the_role_may_not_use_denies_its_writes_naming_the_key(stack, prefix,
                                                                           call):
    roles = read_roles(_changed(stack, _kms_bucket))
    s3 = call(roles, ROLE)
    bucket = stack.resolve({"Ref": OUTPUTS})
    key = f"arn:aws:kms:{stack.region}:{stack.account}:key/{KEY}"
    message = _denied(s3.put_object, Bucket=bucket, Key=f"{prefix}model.tar.gz", Body=b"")
    assert message.endswith(f"kms:GenerateDataKey on resource: \"{key}\" because no "
                            f"identity-based policy allows the kms:GenerateDataKey action")
    # The twin: the role given the key, as CDK's grants give it.
    roles = read_roles(_changed(stack, _key_grant))
    s3 = call(roles, ROLE)
    s3.put_object(Bucket=bucket, Key=f"{prefix}model.tar.gz", Body=b"model")
    assert s3.get_object(Bucket=bucket, Key=f"{prefix}model.tar.gz")["Body"].read() == b"model"


def test_a_key_policy_that_does_not_let_the_account_decide_denies_even_a_granted_role(
        stack, prefix, call):
    def closed_key(template: dict[str, Any]) -> None:
        _key_grant(template)
        template["Resources"][KEY]["Properties"]["KeyPolicy"]["Statement"] = [{
            "Effect": "Allow", "Principal": {"Service": "codebuild.amazonaws.com"},
            "Action": "kms:*", "Resource": "*"}]

    s3 = call(read_roles(_changed(stack, closed_key)), ROLE)
    message = _denied(s3.put_object, Bucket=stack.resolve({"Ref": OUTPUTS}),
                      Key=f"{prefix}model.tar.gz", Body=b"")
    assert message.endswith("because no resource-based policy allows the kms:GenerateDataKey "
                            "action")


def test_a_policy_this_run_cannot_read_leaves_the_role_unchecked_and_says_so(stack, call):
    def managed(template: dict[str, Any]) -> None:
        template["Resources"][ROLE]["Properties"]["ManagedPolicyArns"] = [
            "arn:aws:iam::aws:policy/AmazonSageMakerFullAccess"]

    roles = read_roles(_changed(stack, managed))
    s3 = call(roles, ROLE)
    s3.put_object(Bucket=stack.resolve({"Ref": OUTPUTS}), Key="Other-Pipeline/x", Body=b"")
    assert roles.decided == 0
    assert roles.not_checked() == [
        f"roles: arn:aws:iam::{stack.account}:role/{ROLE} not checked (it has managed policies "
        f"this run cannot read)"]
    assert json.dumps(roles.denied) == "[]"


JOB_CALL = """import boto3
s3 = boto3.client("s3")  # as a team's script calls it: the job's environment decides
s3.put_object(Bucket="{bucket}", Key="{prefix}from-the-job", Body=b"")
try:
    s3.put_object(Bucket="{bucket}", Key="Other-Pipeline/from-the-job", Body=b"")
except s3.exceptions.ClientError as error:
    print(error.response["Error"]["Code"], error.response["Error"]["Message"])
"""


def test_a_jobs_own_calls_are_made_as_its_steps_role(stack, prefix, tmp_path):
    """The job's process, started with the environment the runner gives it: its boto3 calls
    reach the guarded stand-in S3 with its role's key, so they are decided as that role."""
    role = f"arn:aws:iam::{stack.account}:role/{ROLE}"
    roles = read_roles(stack)
    run = Run(tmp_path, {"": sys.executable}, 1, None, stack, stack.account, stack.region,
              roles=roles)
    bucket = stack.resolve({"Ref": OUTPUTS})
    job = run.job("Train")
    job.make(())
    with local_aws(stack.account, stack.region) as s3, endpoint(roles) as url:
        ensure_bucket(s3, bucket)
        env = job.environment(python=sys.executable, region=stack.region, endpoint=url,
                              access_key=run.access_key(role), variables={})
        done = subprocess.run([sys.executable, "-c", JOB_CALL.format(bucket=bucket,
                                                                     prefix=prefix)],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"AccessDenied User: arn:aws:sts::{stack.account}:assumed-role/"
                                  f"{ROLE}/SageMaker is not authorized to perform: s3:PutObject")
    assert roles.decided == 2
    assert run.access_key("arn:aws:iam::999999999999:role/NotInTheStack") == "local"


def test_every_way_an_sdk_reads_writes_and_lists_is_decided(stack, prefix, call):
    """HEAD, v1 lists, presigned URLs, copies, batch deletes, versions, multipart uploads and
    keys beyond ASCII: each allowed under the prefix, each twin outside it denied."""
    roles = read_roles(stack)
    s3 = call(roles, ROLE)
    bucket = stack.resolve({"Ref": OUTPUTS})
    mine, other = f"{prefix}données/x.txt", "Other-Pipeline/données/x.txt"
    s3.put_object(Bucket=bucket, Key=mine, Body=b"x")
    assert s3.head_object(Bucket=bucket, Key=mine)["ContentLength"] == 1
    with pytest.raises(ClientError, match=r"\(403\)"):
        s3.head_object(Bucket=bucket, Key=other)
    assert s3.list_objects(Bucket=bucket, Prefix=prefix)["Contents"]
    assert "s3:ListBucket" in _denied(s3.list_objects, Bucket=bucket)  # v1, encoding-type=url
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": other})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url)  # noqa: S310 (the stand-in S3 on this machine)
    assert refused.value.code == 403
    s3.copy_object(Bucket=bucket, Key=f"{prefix}copy", CopySource={"Bucket": bucket,
                                                                    "Key": mine})
    assert "s3:PutObject" in _denied(s3.copy_object, Bucket=bucket, Key=other,
                                     CopySource={"Bucket": bucket, "Key": mine})
    assert "s3:GetObjectVersion" in _denied(s3.get_object, Bucket=bucket, Key=mine,
                                            VersionId="null")
    assert "s3:DeleteObject" in _denied(s3.delete_objects, Bucket=bucket,
                                        Delete={"Objects": [{"Key": other}]})
    upload = s3.create_multipart_upload(Bucket=bucket, Key=f"{prefix}big")["UploadId"]
    s3.abort_multipart_upload(Bucket=bucket, Key=f"{prefix}big", UploadId=upload)
    assert "s3:PutObject" in _denied(s3.create_multipart_upload, Bucket=bucket, Key=other)
    assert f"\"arn:aws:s3:::{bucket}/{other}\"" in _denied(s3.put_object, Bucket=bucket,
                                                          Key=other, Body=b"")


def test_a_multipart_upload_under_a_key_needs_decrypt_too(stack, prefix, call):
    def write_only(template: dict[str, Any]) -> None:
        _kms_bucket(template)
        template["Resources"][ROLE]["Properties"]["Policies"][0]["PolicyDocument"][
            "Statement"].append({"Effect": "Allow", "Action": "kms:GenerateDataKey*",
                                 "Resource": {"Fn::GetAtt": [KEY, "Arn"]}})

    s3 = call(read_roles(_changed(stack, write_only)), ROLE)
    bucket = stack.resolve({"Ref": OUTPUTS})
    s3.put_object(Bucket=bucket, Key=f"{prefix}small", Body=b"")
    assert "kms:Decrypt on resource" in _denied(s3.create_multipart_upload, Bucket=bucket,
                                                Key=f"{prefix}big")
    # SSE-S3 asked for by the request itself needs no key.
    s3.put_object(Bucket=bucket, Key=f"{prefix}plain", Body=b"", ServerSideEncryption="AES256")


def test_a_deny_naming_the_account_denies_its_roles(stack, prefix, call):
    def deny_account(template: dict[str, Any]) -> None:
        policy = next(r for r in template["Resources"].values()
                      if r["Type"] == "AWS::S3::BucketPolicy"
                      and r["Properties"]["Bucket"] == {"Ref": OUTPUTS})
        policy["Properties"]["PolicyDocument"]["Statement"].append({
            "Effect": "Deny", "Principal": {"AWS": {"Ref": "AWS::AccountId"}},
            "Action": "s3:GetObject", "Resource": "*"})

    s3 = call(read_roles(_changed(stack, deny_account)), ROLE)
    bucket = stack.resolve({"Ref": OUTPUTS})
    s3.put_object(Bucket=bucket, Key=f"{prefix}x", Body=b"")
    assert _denied(s3.get_object, Bucket=bucket, Key=f"{prefix}x").endswith(
        "with an explicit deny in a resource-based policy")


def test_a_malformed_batch_delete_is_answered_by_s3_not_the_check(stack, call):
    """A body that is no XML names no key to decide: the stand-in S3 answers it as it answers
    a caller the run does not check."""
    bucket = stack.resolve({"Ref": OUTPUTS})
    roles = read_roles(stack)
    url = call(roles, ROLE).meta.endpoint_url
    codes = []
    for key in (roles.access_key(_role(stack)), "local"):
        request = urllib.request.Request(
            f"{url}/{bucket}?delete", data=b"not xml", method="POST",
            headers={"Authorization": f"AWS4-HMAC-SHA256 Credential={key}/20260101/us-east-1/"
                                      f"s3/aws4_request, SignedHeaders=host, Signature=x"})
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(request)  # noqa: S310 (the stand-in S3 on this machine)
        codes.append(answered.value.code)
    assert codes[0] == codes[1] and roles.decided == 0


def test_a_permissions_boundary_or_a_policy_variable_leaves_the_role_unchecked(stack, call):
    def bounded(template: dict[str, Any]) -> None:
        template["Resources"][ROLE]["Properties"]["PermissionsBoundary"] = \
            "arn:aws:iam::aws:policy/PowerUserAccess"

    roles = read_roles(_changed(stack, bounded))
    assert "permissions boundary" in roles.unread[_role(stack)]

    def variable(template: dict[str, Any]) -> None:
        template["Resources"][ROLE]["Properties"]["Policies"][0]["PolicyDocument"][
            "Statement"].insert(0, {"Effect": "Allow", "Action": "s3:PutObject",
                                    "Resource": "arn:aws:s3:::x/${aws:username}/*"})

    roles = read_roles(_changed(stack, variable))
    s3 = call(roles, ROLE)
    s3.put_object(Bucket=stack.resolve({"Ref": OUTPUTS}), Key="Other-Pipeline/x", Body=b"")
    assert "policy variables" in roles.unread[_role(stack)]
    assert roles.decided == 0


def test_condition_keys_are_read_in_any_case():
    statement = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*",
                 "Condition": {"StringLike": {"S3:Prefix": ["team/*"]}}}
    assert decide([statement], "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "team/x"}) == \
        ALLOW
    assert decide([statement], "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "other/"}) == \
        IMPLICIT_DENY


def _role(stack: Any) -> str:
    return f"arn:aws:iam::{stack.account}:role/{ROLE}"
