"""Records a `CompilerBenchmark` verdict ("ship" or "hold") in its SSM parameter.

Pipelines invokes it as the ``RecordDecision`` Lambda step with the comparison's decision
fields; it may write one parameter only (named in ``DECISION_PARAMETER``), so whatever the
event says, nothing else changes.
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3

FIELDS = ("verdict", "arm", "speedup", "quality_drop", "global_batch_size", "learning_rate",
          "reason", "comparison", "execution")
VERDICTS = ("ship", "hold")


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    missing = [name for name in FIELDS if name not in event]
    if missing:
        raise ValueError(f"the decision lacks {', '.join(missing)}")
    if event["verdict"] not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got "
                         f"{event['verdict']!r}")
    value = json.dumps({name: event[name] for name in FIELDS}, sort_keys=True)
    response = boto3.client("ssm").put_parameter(
        Name=os.environ["DECISION_PARAMETER"], Value=value, Type="String", Overwrite=True)
    return {"version": response["Version"]}
