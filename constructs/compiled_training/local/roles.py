"""The roles a pipeline will have, in a local run: each job's S3 calls (and the KMS calls S3
makes for a bucket's key) allowed or denied as AWS decides them for the step's role, from the
role's policies and the bucket's and key's policies in the synthesized template.

A job calls the stand-in S3 with an access key of its role's own (`access_key`), and so does
the runner for the transfers SageMaker makes as that role (channels, checkpoints, the model);
`guard` puts the decision in front of the stand-in AWS's HTTP server. Calls under any other
key (the runner seeding data, the Lambda handlers in this process) are not checked."""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any
from urllib.parse import parse_qs, unquote

from compiled_training.local.assembly import StackReader
from compiled_training.local.policy import (
    ALLOW,
    EXPLICIT_DENY,
    UnreadPolicy,
    decide,
    names_account,
)

CHECKED = ("s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:DeleteObject", "kms:Decrypt",
           "kms:GenerateDataKey")
"""What a local run decides; every other call (ECR, CloudWatch Logs, SageMaker, the Lambda
and registry steps) goes unchecked, and the report says so."""

# S3's object operations that only read or write under another action's name (multipart
# uploads are PutObject; HeadObject is GetObject).
_SUBRESOURCES_OF_PUT = ("uploads", "uploadId", "partNumber")


@dataclass(frozen=True)
class Call:
    """One S3 request as IAM sees it."""

    action: str
    bucket: str
    key: str | None = None
    prefix: str | None = None
    """ListBucket's ``s3:prefix``."""


@dataclass
class Roles:
    """The stack's roles, bucket policies and keys, resolved to the run's stand-in names."""

    account: str
    region: str
    statements: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Each role's identity statements, by its ARN."""
    unread: dict[str, str] = field(default_factory=dict)
    """Roles left unchecked, by ARN: why (an AWS managed policy this run cannot read)."""
    bucket_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    bucket_keys: dict[str, str] = field(default_factory=dict)
    """The customer managed KMS key of each bucket encrypted with one, by bucket name."""
    key_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    denied: list[str] = field(default_factory=list)
    """Every denial, in order, as AWS words it."""
    decided: int = 0
    """How many calls were decided."""
    used: set[str] = field(default_factory=set)
    """The roles the run's jobs ran as."""

    def access_key(self, role: str) -> str | None:
        """The stand-in access key a job of ``role`` calls with; None for a role the stack
        does not define (it is not checked)."""
        self.used.add(role)
        return _access_key(role) if role in self.statements or role in self.unread else None

    def role_of(self, access_key: str) -> str | None:
        return next((r for r in (*self.statements, *self.unread) if _access_key(r) == access_key),
                    None)

    def refusal(self, role: str, call: Call) -> str | None:
        """AWS's AccessDenied message for ``call`` by ``role``, or None where it is allowed."""
        if role in self.unread:
            return None
        self.decided += 1
        resource = _arn(self.region, call.bucket, call.key)
        context = {"aws:SecureTransport": "true", "aws:PrincipalArn": role,
                   "aws:PrincipalAccount": self.account}
        if call.prefix is not None:
            context["s3:prefix"] = call.prefix
        action = call.action
        why = self._decision(role, action, resource, context,
                             self.bucket_policies.get(call.bucket, []), key=False)
        key = self.bucket_keys.get(call.bucket)
        if why is None and key and action in _KMS_FOR:  # S3 asks KMS as the caller
            action, resource = _KMS_FOR[action], key
            why = self._decision(role, action, key, {
                **context, "kms:ViaService": f"s3.{self.region}.amazonaws.com",
                "kms:CallerAccount": self.account}, self.key_policies[key], key=True)
        if why is None:
            return None
        message = (f"User: {_session(role)} is not authorized to perform: {action} on resource: "
                   f"\"{resource}\" {why}")
        self.denied.append(message)
        return message

    def _decision(self, role: str, action: str, resource: str, context: dict[str, Any],
                  resource_policy: list[dict[str, Any]], *, key: bool) -> str | None:
        identity = decide(self.statements[role], action, resource, context)
        granted = decide(resource_policy, action, resource, context, principal=role)
        if EXPLICIT_DENY in (identity, granted):
            where = "an identity-based" if identity == EXPLICIT_DENY else "a resource-based"
            return f"with an explicit deny in {where} policy"
        if key:  # a key's policy must allow: the role itself, or the account for its policies
            delegates = any(s["Effect"] == "Allow" and names_account(s, self.account)
                            and decide([{**s, "Principal": "*"}], action, resource, context)
                            == ALLOW for s in resource_policy)
            if granted == ALLOW or (delegates and identity == ALLOW):
                return None
            if not delegates:
                return f"because no resource-based policy allows the {action} action"
        elif ALLOW in (identity, granted):
            return None
        return f"because no identity-based policy allows the {action} action"

    def not_checked(self) -> list[str]:
        """What this run leaves unchecked, for the report."""
        return [f"roles: {role} not checked (" + (
            self.unread.get(role) or "the stack does not define it, so its policies are not "
                                     "known here") + ")"
            for role in sorted(self.used) if role in self.unread or role not in self.statements]


_KMS_FOR = {"s3:GetObject": "kms:Decrypt", "s3:PutObject": "kms:GenerateDataKey"}


def read_roles(stack: StackReader) -> Roles:
    """The stack's roles and resource policies, resolved as its pipelines' definitions are."""
    roles = Roles(stack.account, stack.region)
    resources = stack.template.get("Resources", {})
    by_logical_id: dict[str, str] = {}
    for logical_id, resource in sorted(resources.items()):
        properties = resource.get("Properties", {})
        kind = resource["Type"]
        if kind == "AWS::IAM::Role":
            arn = stack.resolve({"Fn::GetAtt": [logical_id, "Arn"]})
            by_logical_id[logical_id] = arn
            roles.statements[arn] = [s for policy in properties.get("Policies", [])
                                     for s in _statements(stack, policy["PolicyDocument"])]
            if properties.get("ManagedPolicyArns"):
                roles.unread[arn] = "it has managed policies this run cannot read"
        elif kind == "AWS::S3::Bucket" and _bucket_key(properties):
            roles.bucket_keys[stack.resolve({"Ref": logical_id})] = \
                str(stack.resolve(_bucket_key(properties)))
        elif kind == "AWS::S3::BucketPolicy":
            roles.bucket_policies.setdefault(str(stack.resolve(properties["Bucket"])), []).extend(
                _statements(stack, properties["PolicyDocument"]))
        elif kind == "AWS::KMS::Key":
            roles.key_policies[stack.resolve({"Fn::GetAtt": [logical_id, "Arn"]})] = \
                _statements(stack, properties.get("KeyPolicy", {}))
    for resource in resources.values():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            properties = resource.get("Properties", {})
            for ref in properties.get("Roles", []):
                arn = by_logical_id.get(ref.get("Ref", "")) if isinstance(ref, dict) else None
                if arn:
                    roles.statements[arn].extend(
                        _statements(stack, properties["PolicyDocument"]))
    # A key named by ARN in a template is a stand-in name only where the stack defines the key.
    roles.bucket_keys = {bucket: key for bucket, key in roles.bucket_keys.items()
                         if key in roles.key_policies}
    return roles


def _bucket_key(properties: dict[str, Any]) -> Any:
    """The KMS key a bucket encrypts new objects with (its template's value), if any."""
    for rule in properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration",
                                                          []):
        default = rule.get("ServerSideEncryptionByDefault", {})
        if default.get("SSEAlgorithm", "").startswith("aws:kms"):
            return default.get("KMSMasterKeyID")
    return None


def _statements(stack: StackReader, document: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(s) for s in stack.resolve(document.get("Statement", []))]


def _access_key(role: str) -> str:
    return "AKIA" + hashlib.sha256(role.encode()).hexdigest()[:16].upper()


def _name(role: str) -> str:
    return role.rsplit("/", 1)[-1]


def _session(role: str) -> str:
    """The ARN a job's calls are made as: the role, assumed by SageMaker."""
    partition, account = role.split(":")[1], role.split(":")[4]
    return f"arn:{partition}:sts::{account}:assumed-role/{_name(role)}/SageMaker"


def _arn(region: str, bucket: str, key: str | None) -> str:
    partition = "aws-cn" if region.startswith("cn-") else \
        "aws-us-gov" if region.startswith("us-gov-") else "aws"
    return f"arn:{partition}:s3:::{bucket}" + (f"/{key}" if key is not None else "")


def s3_calls(method: str, path: str, query: str, headers: dict[str, str],
             body: Callable[[], bytes]) -> Iterator[Call]:
    """The checked calls one path-style S3 request makes (none for what is not checked)."""
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if not bucket:
        return
    params = parse_qs(query, keep_blank_values=True)
    if not key:
        if method in ("GET", "HEAD") and (not params or "list-type" in params or
                                          "prefix" in params or "marker" in params):
            yield Call("s3:ListBucket", bucket, prefix=params.get("prefix", [None])[0])
        elif method == "POST" and "delete" in params:
            for name in _deleted_keys(body()):
                yield Call("s3:DeleteObject", bucket, name)
        return
    if params and not set(params) <= set(_SUBRESOURCES_OF_PUT) | {"versionId", "x-id"}:
        return  # an object's ACL, tags, retention, ...: not checked
    if method in ("GET", "HEAD"):
        yield Call("s3:GetObject", bucket, key)
    elif method in ("PUT", "POST"):
        source = headers.get("x-amz-copy-source")
        if source:
            source_bucket, _, source_key = unquote(source).lstrip("/").partition("/")
            yield Call("s3:GetObject", source_bucket, source_key.split("?")[0])
        yield Call("s3:PutObject", bucket, key)
    elif method == "DELETE" and "uploadId" not in params:
        yield Call("s3:DeleteObject", bucket, key)


def _deleted_keys(body: bytes) -> Iterable[str]:
    root = ElementTree.parse(BytesIO(body)).getroot()
    return [element.text or "" for element in root.iter() if element.tag.endswith("Key")]


_CREDENTIAL = re.compile(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/")


def caller(headers: dict[str, str], query: str) -> tuple[str, str] | None:
    """The access key and service a request is signed for (its header, or a presigned URL's
    query)."""
    found = _CREDENTIAL.search(headers.get("authorization", ""))
    if found:
        return found[1], found[2]
    credential = parse_qs(query).get("X-Amz-Credential", [""])[0].split("/")
    return (credential[0], credential[3]) if len(credential) >= 4 else None


def guard(app: Callable[..., Any], roles: Roles) -> Callable[..., Any]:
    """``app`` (the stand-in AWS's WSGI application), answering a role's S3 call AWS would
    refuse with AWS's AccessDenied."""

    def checked(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        headers = {name[5:].replace("_", "-").lower(): value for name, value in environ.items()
                   if name.startswith("HTTP_")}
        signed = caller(headers, environ.get("QUERY_STRING", ""))
        role = roles.role_of(signed[0]) if signed and signed[1] == "s3" else None
        if role is None:
            return app(environ, start_response)
        body: list[bytes] = []

        def read() -> bytes:
            if not body:
                length = int(environ.get("CONTENT_LENGTH") or 0)
                body.append(environ["wsgi.input"].read(length))
                environ["wsgi.input"] = BytesIO(body[0])
            return body[0]

        try:
            for call in s3_calls(environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/"),
                                 environ.get("QUERY_STRING", ""), headers, read):
                message = roles.refusal(role, call)
                if message:
                    return _access_denied(message, start_response)
        except UnreadPolicy as problem:
            roles.unread[role] = f"{problem}"
        return app(environ, start_response)

    return checked


def _access_denied(message: str, start_response: Callable[..., Any]) -> list[bytes]:
    escaped = message.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            f"<Message>{escaped}</Message></Error>").encode()
    start_response("403 Forbidden", [("Content-Type", "application/xml"),
                                     ("Content-Length", str(len(body)))])
    return [body]
