"""Would AWS allow a request? IAM's policy evaluation logic for one account: an explicit Deny
in any policy wins; otherwise an Allow in the identity's policies or in the resource's policy
(naming the identity) allows; otherwise the request is implicitly denied. A KMS key's policy
must allow too, directly or by naming the account, which lets the identity's policies decide.

A statement applies when its action, its resource (IAM's wildcards: ``*`` any run of
characters, ``?`` one), its principal (resource policies) and every condition match.
Conditions: every operator and every key (its name in any case) must hold, any of a key's
values may match. A single-valued operator on a key absent from the request fails
(``...IfExists`` and the negated operators hold); ``ForAllValues:`` holds for an absent or
empty key (every value of none), ``ForAnyValue:`` does not. What this reader does not know
(an operator, ``NotAction``, ``NotPrincipal``, ``NotResource``, a policy variable) raises
`UnreadPolicy`: it must never quietly allow."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from typing import Any

ALLOW, IMPLICIT_DENY, EXPLICIT_DENY = "Allow", "ImplicitDeny", "ExplicitDeny"


class UnreadPolicy(ValueError):
    """A policy holds something this reader does not evaluate."""


def decide(statements: list[dict[str, Any]], action: str, resource: str,
           context: dict[str, Any], principal: str | None = None) -> str:
    """``action`` on ``resource`` with the request's condition keys ``context`` (a list for
    multivalued keys such as ``aws:TagKeys``). ``principal``: the caller's ARN, for a resource
    policy's statements (each names its principals); None for an identity's own policies."""
    keys = {key.lower(): value for key, value in context.items()}  # IAM ignores their case
    applying = [s for s in statements if _matches(s, action, resource, keys, principal)]
    if any(s["Effect"] == "Deny" for s in applying):
        return EXPLICIT_DENY
    return ALLOW if any(s["Effect"] == "Allow" for s in applying) else IMPLICIT_DENY


def names(statement: dict[str, Any], principal: str) -> bool:
    """Whether a resource policy's statement names ``principal`` (a role's ARN): itself, or
    everyone. An Allow naming the account alone (``:root``) delegates to its identities' own
    policies; a Deny naming it denies them all."""
    if "NotPrincipal" in statement:
        raise UnreadPolicy("NotPrincipal is not read")
    given = statement.get("Principal")
    if given == "*":
        return True
    if not isinstance(given, dict):
        return False
    if statement.get("Effect") == "Deny" and names_account(statement, principal.split(":")[4]):
        return True
    return any(p in ("*", principal) for p in _listed(given.get("AWS", [])))


def names_account(statement: dict[str, Any], account: str) -> bool:
    """Whether a key policy's statement names the account itself, which lets the account's
    identities' policies decide (the key's default policy does)."""
    given = statement.get("Principal")
    wanted = {account, f"arn:aws:iam::{account}:root", f"arn:aws-cn:iam::{account}:root",
              f"arn:aws-us-gov:iam::{account}:root"}
    return isinstance(given, dict) and any(p in wanted for p in _listed(given.get("AWS", [])))


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(statement: dict[str, Any], action: str, resource: str,
             context: dict[str, Any], principal: str | None) -> bool:
    unread = {"NotAction", "NotResource"} & set(statement)
    if unread:
        raise UnreadPolicy(f"{sorted(unread)[0]} is not read")
    if "${" in json.dumps([statement.get("Resource"), statement.get("Condition")]):
        raise UnreadPolicy("policy variables (${...}) are not read")
    return (any(fnmatch.fnmatchcase(action.lower(), a.lower())
                for a in _listed(statement["Action"]))
            and any(_like(resource, r) for r in _listed(statement.get("Resource", "*")))
            and (principal is None or names(statement, principal))
            and all(_holds(operator, key, _listed(values), context.get(key.lower()))
                    for operator, tests in statement.get("Condition", {}).items()
                    for key, values in tests.items()))


def _like(value: str, pattern: str) -> bool:
    # fnmatch would also read [...] as a character class; IAM has only * and ?.
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _bool(value: str, wanted: str) -> bool:
    return str(value).lower() == str(wanted).lower()


_COMPARE: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda value, wanted: value == wanted,
    "StringLike": _like,
    "ArnEquals": _like,  # IAM matches ARNs by their parts, wildcards included
    "ArnLike": _like,
    "Bool": _bool,
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike",
            "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}


def _holds(operator: str, key: str, wanted: list[str], value: Any) -> bool:
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    negated = base in _NEGATED
    base = _NEGATED.get(base, base)
    if base not in _COMPARE or qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise UnreadPolicy(f"condition operator {operator} is not read (key {key})")
    compare = _COMPARE[base]

    def one(v: Any) -> bool:
        found = any(compare(v, w) for w in wanted)
        return not found if negated else found

    if qualifier == "ForAllValues":
        return all(one(v) for v in _listed(value or []))
    if qualifier == "ForAnyValue":
        return any(one(v) for v in _listed(value or []))
    if isinstance(value, list):
        raise UnreadPolicy(f"{key} is multivalued: {operator} needs a set qualifier")
    if value is None:
        return if_exists or negated
    return one(value)
