"""Would IAM allow a request? An identity policy evaluated as IAM's policy evaluation logic
does, for the condition operators the library writes.

An explicit Deny wins, then any Allow; otherwise the request is implicitly denied. A
statement applies when its action, its resource (IAM's wildcards: ``*`` any run of
characters, ``?`` one) and every condition match. Conditions: every operator and every key
must hold, any of a key's values may match. A single-valued operator on a key absent from
the request fails; ``ForAllValues:`` holds for an absent or empty key (every value of none),
``ForAnyValue:`` does not. An operator this reader does not know fails the test that reads
it (it must not quietly allow)."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

ALLOW, IMPLICIT_DENY, EXPLICIT_DENY = "Allow", "ImplicitDeny", "ExplicitDeny"


def decide(statements: list[dict[str, Any]], action: str, resource: str,
           context: dict[str, Any]) -> str:
    """``action`` on ``resource`` with the request's condition keys ``context`` (a tag-key
    list for multivalued keys such as ``aws:TagKeys``)."""
    applying = [s for s in statements if _matches(s, action, resource, context)]
    if any(s["Effect"] == "Deny" for s in applying):
        return EXPLICIT_DENY
    return ALLOW if any(s["Effect"] == "Allow" for s in applying) else IMPLICIT_DENY


def as_iam_reads(statements: list[dict[str, Any]]) -> list[str]:
    """Statements as comparable text, read as IAM reads them: a statement's order in its
    policy, and the order of its actions and resources, mean nothing; one action or
    resource is a list of one."""
    def as_set(value: Any) -> list[Any]:
        return sorted(_listed(value), key=json.dumps)

    return sorted(json.dumps({**s, "Action": as_set(s["Action"]),
                              "Resource": as_set(s["Resource"])}, sort_keys=True)
                  for s in statements)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(statement: dict[str, Any], action: str, resource: str,
             context: dict[str, Any]) -> bool:
    return (any(fnmatch.fnmatchcase(action.lower(), a.lower())
                for a in _listed(statement["Action"]))
            and any(_like(resource, r) for r in _listed(statement["Resource"]))
            and all(_holds(operator, key, _listed(values), context.get(key))
                    for operator, tests in statement.get("Condition", {}).items()
                    for key, values in tests.items()))


def _like(value: str, pattern: str) -> bool:
    # fnmatch would also read [...] as a character class; IAM has only * and ?.
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


_COMPARE = {"StringEquals": lambda value, wanted: value == wanted,
            "StringLike": _like}


def _holds(operator: str, key: str, wanted: list[str], value: Any) -> bool:
    qualifier, _, base = operator.rpartition(":")
    if base not in _COMPARE or qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise AssertionError(f"condition operator {operator} is not read here (key {key})")
    compare = _COMPARE[base]
    if qualifier == "ForAllValues":
        return all(any(compare(v, w) for w in wanted) for v in _listed(value or []))
    if qualifier == "ForAnyValue":
        return any(any(compare(v, w) for w in wanted) for v in _listed(value or []))
    if isinstance(value, list):
        raise AssertionError(f"{key} is multivalued: {operator} needs a set qualifier")
    return value is not None and any(compare(value, w) for w in wanted)
