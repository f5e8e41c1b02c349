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
from xml.sax.saxutils import escape

from compiled_training.catalog.aws_names import partition
from compiled_training.local.assembly import RunInputError, StackReader
from compiled_training.local.policy import (
    ALLOW,
    EXPLICIT_DENY,
    UnreadPolicy,
    decide,
    names_account,
)

# Query parameters that shape a request without changing its action (a listing's, a part's
# number, the SDKs' own); a presigned URL's and GetObject's response overrides go by prefix.
_NOT_SUBRESOURCES = {"prefix", "delimiter", "encoding-type", "max-keys", "marker", "list-type",
                     "continuation-token", "start-after", "fetch-owner", "x-id", "partNumber",
                     "optional-object-attributes"}


@dataclass(frozen=True)
class Call:
    """One S3 request as IAM sees it."""

    action: str
    bucket: str
    key: str | None = None
    prefix: str | None = None
    """ListBucket's ``s3:prefix``."""
    kms: tuple[str, ...] = ()
    """What S3 asks KMS for, as the caller, where the object is under a KMS key."""
    encryption: str | None = None
    """The request's own ``x-amz-server-side-encryption`` (a write's)."""
    key_id: str | None = None
    """The request's own KMS key (``x-amz-server-side-encryption-aws-kms-key-id``)."""


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
    _by_key: dict[str, str] = field(default_factory=dict, repr=False)

    def access_key(self, role: str) -> str | None:
        """The stand-in access key a job of ``role`` calls with; None for a role the stack
        does not define (it is not checked)."""
        self.used.add(role)
        return _access_key(role) if role in self.statements or role in self.unread else None

    def role_of(self, access_key: str) -> str | None:
        """The role an access key is ``access_key``'s (every request asks: a table, made once)."""
        if not self._by_key:
            self._by_key.update({_access_key(r): r for r in (*self.statements, *self.unread)})
        return self._by_key.get(access_key)

    def refusal(self, role: str, call: Call) -> str | None:
        """AWS's AccessDenied message for ``call`` by ``role``, or None where it is allowed."""
        if role in self.unread:
            return None
        resource = _arn(self.region, call.bucket, call.key)
        context = {"aws:SecureTransport": "true", "aws:PrincipalArn": role,
                   "aws:PrincipalAccount": self.account}
        if call.prefix is not None:
            context["s3:prefix"] = call.prefix
        action = call.action
        why = self._decision(role, action, resource, context,
                             self.bucket_policies.get(call.bucket, []), key=False)
        key = self._key(call)
        if key and why is None:
            for kms_action in call.kms:  # S3 asks KMS as the caller
                action, resource = kms_action, key
                why = self._decision(role, action, key, {
                    **context, "kms:ViaService": f"s3.{self.region}.amazonaws.com",
                    "kms:CallerAccount": self.account}, self.key_policies[key], key=True)
                if why:
                    break
        self.decided += 1
        if why is None:
            return None
        message = (f"User: {_session(role)} is not authorized to perform: {action} on resource: "
                   f"\"{resource}\" {why}")
        self.denied.append(message)
        return message

    def _key(self, call: Call) -> str | None:
        """The stack's KMS key S3 uses for the call: the request's own, else the bucket's
        default (none for SSE-S3, or a key the stack does not define: not checked)."""
        if call.encryption == "AES256":
            return None
        key = call.key_id if call.key_id else self.bucket_keys.get(call.bucket)
        return key if key in self.key_policies else None

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


def read_roles(stack: StackReader) -> Roles:
    """The stack's roles and resource policies, resolved as its pipelines' definitions are; a
    role whose policies cannot be read here is left unchecked, and says why."""
    roles = Roles(stack.account, stack.region)
    resources = stack.template.get("Resources", {})
    by_logical_id: dict[str, str] = {}
    for logical_id, resource in sorted(resources.items()):
        properties = resource.get("Properties", {})
        kind = resource["Type"]
        try:
            if kind == "AWS::IAM::Role":
                arn = stack.resolve({"Fn::GetAtt": [logical_id, "Arn"]})
                by_logical_id[logical_id] = arn
                roles.statements[arn] = []
                _read_role(stack, roles, arn, properties)
            elif kind == "AWS::S3::Bucket" and _bucket_key(properties):
                roles.bucket_keys[stack.resolve({"Ref": logical_id})] = \
                    _key_arn(stack, _bucket_key(properties))
            elif kind == "AWS::S3::BucketPolicy":
                roles.bucket_policies.setdefault(str(stack.resolve(properties["Bucket"])),
                                                 []).extend(_statements(
                                                     stack, properties["PolicyDocument"]))
            elif kind == "AWS::KMS::Key":
                roles.key_policies[stack.resolve({"Fn::GetAtt": [logical_id, "Arn"]})] = \
                    _statements(stack, properties.get("KeyPolicy", {}))
        except RunInputError as problem:  # an intrinsic the runner does not resolve
            if kind == "AWS::IAM::Role":
                roles.unread[by_logical_id[logical_id]] = f"its policies: {problem}"
    _attach_policies(stack, roles, by_logical_id)
    return roles


def _attach_policies(stack: StackReader, roles: Roles, by_logical_id: dict[str, str]) -> None:
    """The stack's policies that name their roles (``AWS::IAM::Policy``'s ``Roles``)."""
    for resource in stack.template["Resources"].values():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            properties = resource.get("Properties", {})
            for ref in properties.get("Roles", []):
                arn = by_logical_id.get(ref.get("Ref", "")) if isinstance(ref, dict) else None
                if arn:
                    try:
                        roles.statements[arn].extend(
                            _statements(stack, properties["PolicyDocument"]))
                    except RunInputError as problem:
                        roles.unread[arn] = f"its policies: {problem}"


def _read_role(stack: StackReader, roles: Roles, arn: str, properties: dict[str, Any]) -> None:
    """A role's inline policies and the stack's managed policies it names; an AWS managed
    policy or a permissions boundary leaves it unchecked."""
    roles.statements[arn] = [s for policy in properties.get("Policies", [])
                             for s in _statements(stack, policy["PolicyDocument"])]
    resources = stack.template["Resources"]
    for managed in properties.get("ManagedPolicyArns", []):
        ref = managed.get("Ref") if isinstance(managed, dict) else None
        if ref in resources and resources[ref]["Type"] == "AWS::IAM::ManagedPolicy":
            roles.statements[arn] += _statements(
                stack, resources[ref]["Properties"]["PolicyDocument"])
        else:
            roles.unread[arn] = "it has managed policies this run cannot read"
    if properties.get("PermissionsBoundary"):
        roles.unread[arn] = "it has a permissions boundary, which this run does not read"


def _key_arn(stack: StackReader, given: Any) -> str:
    """A bucket's KMS key as the stack's key ARN (a ``Ref`` names the key by its id)."""
    resolved = str(stack.resolve(given))
    resources = stack.template["Resources"]
    if resources.get(resolved, {}).get("Type") == "AWS::KMS::Key":
        return str(stack.resolve({"Fn::GetAtt": [resolved, "Arn"]}))
    return resolved


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
    return f"arn:{partition(region)}:s3:::{bucket}" + (f"/{key}" if key is not None else "")


def s3_calls(method: str, bucket: str, key: str, query: str, headers: dict[str, str],
             body: Callable[[], bytes]) -> Iterator[Call]:
    """The checked calls one S3 request makes (none for what is not checked)."""
    if not bucket:
        return
    params = {name: values[0] for name, values in parse_qs(query, keep_blank_values=True).items()
              if not name.startswith(("X-Amz-", "response-")) and name not in _PRESIGNED_V2}
    subresources = set(params) - _NOT_SUBRESOURCES
    if not key:
        yield from _bucket_calls(method, bucket, params, subresources, body)
        return
    version = "Version" if "versionId" in subresources else ""
    subresources -= {"versionId"}
    if method in ("GET", "HEAD") and not subresources:
        yield Call(f"s3:GetObject{version}", bucket, key,
                   kms=("kms:Decrypt",) if method == "GET" else ())
    elif method == "GET" and subresources == {"uploadId"}:
        yield Call("s3:ListMultipartUploadParts", bucket, key)
    elif method in ("PUT", "POST") and subresources <= {"uploads", "uploadId"}:
        source = headers.get("x-amz-copy-source")
        if source:
            path, _, source_query = source.partition("?")
            source_bucket, _, source_key = unquote(path).lstrip("/").partition("/")
            version = "Version" if "versionId=" in source_query else ""
            yield Call(f"s3:GetObject{version}", source_bucket, source_key,
                       kms=("kms:Decrypt",))
        # A multipart upload under a KMS key needs Decrypt too (S3 reads the parts' data key).
        kms = ("kms:GenerateDataKey", "kms:Decrypt") if "uploads" in subresources else \
            ("kms:GenerateDataKey",) if not subresources else ()
        yield Call("s3:PutObject", bucket, key, kms=kms,
                   encryption=headers.get("x-amz-server-side-encryption"),
                   key_id=headers.get("x-amz-server-side-encryption-aws-kms-key-id"))
    elif method == "DELETE" and subresources == {"uploadId"}:
        yield Call("s3:AbortMultipartUpload", bucket, key)
    elif method == "DELETE" and not subresources:
        yield Call(f"s3:DeleteObject{version}", bucket, key)
    # Anything else (an object's ACL, tags, retention, attributes, ...) is not checked.


def _bucket_calls(method: str, bucket: str, params: dict[str, str], subresources: set[str],
                  body: Callable[[], bytes]) -> Iterator[Call]:
    if method in ("GET", "HEAD") and not subresources:  # HeadBucket needs ListBucket
        yield Call("s3:ListBucket", bucket, prefix=params.get("prefix"))
    elif method == "GET" and subresources == {"versions"}:
        yield Call("s3:ListBucketVersions", bucket, prefix=params.get("prefix"))
    elif method == "GET" and subresources == {"uploads"}:
        yield Call("s3:ListBucketMultipartUploads", bucket)
    elif method == "POST" and subresources == {"delete"}:
        for name in _deleted_keys(body()):
            yield Call("s3:DeleteObject", bucket, name)
    # Anything else (creating the bucket, its location, policy, tags, ...) is not checked.


def _deleted_keys(body: bytes) -> Iterable[str]:
    """The keys a DeleteObjects body names; none where it is not XML (S3 answers that)."""
    try:
        root = ElementTree.parse(BytesIO(body)).getroot()
    except ElementTree.ParseError:
        return []
    return [element.text or "" for element in root.iter() if element.tag.endswith("Key")]


_PRESIGNED_V2 = ("AWSAccessKeyId", "Signature", "Expires")
_CREDENTIAL = re.compile(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/")
_SIGNATURE_V2 = re.compile(r"AWS ([^:\s]+):")


def caller(headers: dict[str, str], query: str) -> tuple[str, str] | None:
    """The access key and service a request is signed for: its SigV4 header or presigned
    query, or S3's SigV2 header or presigned query."""
    authorization = headers.get("authorization", "")
    found = _CREDENTIAL.search(authorization)
    if found:
        return found[1], found[2]
    found = _SIGNATURE_V2.match(authorization)
    if found:
        return found[1], "s3"
    params = parse_qs(query)
    credential = params.get("X-Amz-Credential", [""])[0].split("/")
    if len(credential) >= 4:
        return credential[0], credential[3]
    return (params["AWSAccessKeyId"][0], "s3") if "AWSAccessKeyId" in params else None


def _bucket_and_key(environ: dict[str, Any]) -> tuple[str, str]:
    """The request's bucket and key, from its path as sent (once decoded, as UTF-8), or from
    its host where it names the bucket (virtual-hosted style)."""
    raw = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or "")
    path = unquote(raw.split("?", 1)[0]) if raw.startswith("/") else \
        str(environ.get("PATH_INFO", "/")).encode("latin-1").decode("utf-8", "replace")
    host = str(environ.get("HTTP_HOST", "")).rsplit(":", 1)[0]
    hosted = re.fullmatch(r"(.+)\.(?:localhost|127\.0\.0\.1)", host)
    if hosted:
        return hosted[1], path.lstrip("/")
    bucket, _, key = path.lstrip("/").partition("/")
    return bucket, key


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
            for call in s3_calls(environ["REQUEST_METHOD"], *_bucket_and_key(environ),
                                 environ.get("QUERY_STRING", ""), headers, read):
                message = roles.refusal(role, call)
                if message:
                    return _access_denied(message, start_response)
        except UnreadPolicy as problem:
            roles.unread[role] = f"{problem}"
        return app(environ, start_response)

    return checked


def _access_denied(message: str, start_response: Callable[..., Any]) -> list[bytes]:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            f"<Message>{escape(message)}</Message></Error>").encode()
    start_response("403 Forbidden", [("Content-Type", "application/xml"),
                                     ("Content-Length", str(len(body)))])
    return [body]
