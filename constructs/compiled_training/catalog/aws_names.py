"""AWS's rules for the names and texts the library writes into a template, checked before
CloudFormation sees them: SSM parameter names, S3 URIs part by part, and the length of a text a
resource accepts.

Sources: SSM's PutParameter naming constraints; S3's bucket naming rules (general purpose
buckets) and its 1,024-byte key limit; each resource's documented description length.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

# --- SSM parameter names ---------------------------------------------------------------------

_SSM_CHARACTERS = re.compile(r"[A-Za-z0-9_.\-/]+")
_SSM_RESERVED = ("aws", "ssm")
SSM_MAX_DEPTH = 15
# SSM counts a name's length with the parameter's whole ARN (1,011 characters); the longest
# partition, region and account prefix ("arn:aws-iso-b:ssm:us-isob-east-1:123456789012:parameter")
# leaves this much for the name.
SSM_MAX_NAME = 1011 - len("arn:aws-iso-b:ssm:us-isob-east-1:123456789012:parameter")


def ssm_parameter_name_problem(name: str) -> str | None:
    """What SSM would refuse in a parameter name, or None."""
    if not name or len(name) > SSM_MAX_NAME:
        return f"must be 1 to {SSM_MAX_NAME} characters (SSM counts the parameter's ARN)"
    if not _SSM_CHARACTERS.fullmatch(name):
        return "may hold only letters, digits and _ . - /"
    if name.lstrip("/").lower().startswith(_SSM_RESERVED):
        return "must not begin with 'aws' or 'ssm' (any case): SSM reserves them"
    if "/" in name:
        if not name.startswith("/"):
            return "must begin with '/' when it has a hierarchy (such as /team/bench/decision)"
        levels = name[1:].split("/")
        if "" in levels:
            return "must not hold an empty level ('//' or a trailing '/')"
        if len(levels) > SSM_MAX_DEPTH:
            return f"must have at most {SSM_MAX_DEPTH} levels (it has {len(levels)})"
    return None


# --- S3 URIs ---------------------------------------------------------------------------------

S3_KEY_MAX_BYTES = 1024
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(bucket: str) -> str | None:
    """What S3's naming rules refuse in a general purpose bucket's name, or None."""
    if not 3 <= len(bucket) <= 63:
        return f"must be 3 to 63 characters (it has {len(bucket)})"
    if not _BUCKET.fullmatch(bucket):
        return ("may hold only lowercase letters, digits, '.' and '-', and must begin and end "
                "with a letter or digit")
    if ".." in bucket or ".-" in bucket or "-." in bucket:
        return "must not hold '..', '.-' or '-.'"
    try:
        ipaddress.IPv4Address(bucket)
        return "must not be formatted as an IP address"
    except ValueError:
        pass
    if bucket.startswith(_BUCKET_RESERVED_PREFIXES) or bucket.endswith(_BUCKET_RESERVED_SUFFIXES):
        return (f"must not begin with {', '.join(_BUCKET_RESERVED_PREFIXES)} or end with "
                f"{', '.join(_BUCKET_RESERVED_SUFFIXES)}: S3 reserves them")
    return None


def split_s3(uri: str) -> tuple[str, str]:
    """An ``s3://bucket/key`` URI's bucket and key."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def s3_uri_problem(uri: str) -> str | None:
    """What is wrong with an ``s3://bucket/key`` URI, naming the part, or None."""
    if not uri.startswith("s3://"):
        return "must begin with s3://"
    bucket, key = split_s3(uri)
    problem = bucket_name_problem(bucket)
    if problem:
        return f"its bucket name {bucket!r} {problem}"
    if len(key.encode()) > S3_KEY_MAX_BYTES:
        return f"its key must be at most {S3_KEY_MAX_BYTES} bytes, got {len(key.encode())}"
    return None


# --- texts a resource holds ------------------------------------------------------------------

LAMBDA_DESCRIPTION_MAX = 256
SECURITY_GROUP_DESCRIPTION_MAX = 255


def held_to(text: str, limit: int) -> str:
    """``text``, or when longer than ``limit``, its start and a hash of the whole: the same text
    always gives the same result, and two long texts that differ only at the end stay apart."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[:limit - len(digest) - 4]}... {digest}"


# --- partitions --------------------------------------------------------------------------------

# botocore's endpoint partitions (tests hold this to them): region prefix, partition, domain.
_PARTITIONS = (
    ("cn-", "aws-cn", "amazonaws.com.cn"),
    ("us-gov-", "aws-us-gov", "amazonaws.com"),
    ("us-isob-", "aws-iso-b", "sc2s.sgov.gov"),
    ("us-isof-", "aws-iso-f", "csp.hci.ic.gov"),
    ("us-iso-", "aws-iso", "c2s.ic.gov"),
    ("eu-isoe-", "aws-iso-e", "cloud.adc-e.uk"),
    ("eusc-", "aws-eusc", "amazonaws.eu"),
)


def partition(region: str) -> str:
    """The partition a region's ARNs name: ``aws``, ``aws-cn``, ``aws-us-gov``, ..."""
    return next((name for prefix, name, _ in _PARTITIONS if region.startswith(prefix)), "aws")


def arn_prefix(service: str, region: str, account: str) -> str:
    """``arn:<partition>:<service>:<region>:<account>``: a regional resource's ARN before its
    resource part."""
    return f"arn:{partition(region)}:{service}:{region}:{account}"


def url_suffix(region: str) -> str:
    """The domain of a region's endpoints (``AWS::URLSuffix``)."""
    return next((suffix for prefix, _, suffix in _PARTITIONS if region.startswith(prefix)),
                "amazonaws.com")
