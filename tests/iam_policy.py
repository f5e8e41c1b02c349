"""Policies compared as IAM reads them. IAM's evaluation itself is the library's
(`compiled_training.local.policy`), which the local runner decides with."""

from __future__ import annotations

import json
from typing import Any


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
