"""Records a `CompilerBenchmark` verdict ("ship" or "hold") in its SSM parameter.

Pipelines invokes it as the ``RecordDecision`` Lambda step with the comparison's decision
fields and the thresholds it was judged by; it may write one parameter only (named in
``DECISION_PARAMETER``), so whatever the event says, nothing else changes.

The thresholds are pipeline parameters, so whoever may start an execution may set them. The
range each may take was fixed when the benchmark was deployed (``THRESHOLD_RANGES``: the bar
set then, or a stricter one); a verdict judged by thresholds outside it is refused and
nothing is recorded, so no one can record "ship" by lowering the bar.
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3

# The function's asset holds this module alone, so the contract's decision fields and verdicts
# are written out here (tests/test_contract.py holds them to the contract's).
FIELDS = ("verdict", "arm", "speedup", "gain", "basis", "instance_type", "instance_count",
          "quality_drop", "global_batch_size", "learning_rate", "reason", "speedup_threshold",
          "quality_tolerance", "comparison", "execution")
VERDICTS = ("ship", "hold")


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    missing = [name for name in FIELDS if name not in event]
    if missing:
        raise ValueError(f"the decision lacks {', '.join(missing)}")
    if event["verdict"] not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got "
                         f"{event['verdict']!r}")
    ranges = json.loads(os.environ["THRESHOLD_RANGES"])
    outside = [f"{name} {event[name]!r} is outside {low:g}-{high:g}"
               for name, (low, high) in sorted(ranges.items())
               if not isinstance(event[name], (int, float)) or not low <= event[name] <= high]
    if outside:
        raise ValueError("nothing recorded: the verdict was judged by thresholds outside the "
                         "range fixed when the benchmark was deployed (an execution may raise "
                         "the bar, never lower it): " + "; ".join(outside))
    value = json.dumps({name: event[name] for name in FIELDS}, sort_keys=True)
    response = boto3.client("ssm").put_parameter(
        Name=os.environ["DECISION_PARAMETER"], Value=value, Type="String", Overwrite=True)
    return {"version": response["Version"]}
