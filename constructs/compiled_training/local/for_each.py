"""A ``ForEach`` step (SDK v3's ``ForEachStep``): its body run once an item, each body step's
child named ``<body step>-<index>`` as SageMaker names it, the items one after the other
whatever ``MaxConcurrency`` allows; then its properties: ``IterationOutputs``, ``Selected`` (the
selector's pick) and the counts. A child that fails fails the step."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from compiled_training.local.expressions import Context, StepFailed, walk

RunSteps = Callable[[list[Mapping[str, Any]]], None]
BODY_STEP = "ForEachBodyStep"
"""An iteration's step names the body step it runs (``--outputs`` gives that step's to each)."""
_ITERATION_OUTPUT = re.compile(r"IterationOutput\.([^.\[]+)\.?(.*)")


def items(step: Mapping[str, Any], context: Context) -> list[Any]:
    """The items, a list in the definition or a JSON list a reference resolves to."""
    name = step["Name"]
    given = context.evaluate(step["Arguments"].get("IterableItems"), f"step {name}: IterableItems")
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            raise StepFailed(f"step {name}: IterableItems resolved to {given[:80]!r}, not a "
                             f"JSON list") from None
    if not isinstance(given, list) or not given:
        raise StepFailed(f"step {name}: IterableItems must be a non-empty list, got "
                         f"{str(given)[:80]!r}")
    return given


def run_for_each(step: Mapping[str, Any], context: Context, run_steps: RunSteps,
                 notes: list[str]) -> dict[str, Any]:
    """Runs the body once an item (``run_steps`` runs and reports a list of steps) and
    returns the step's properties."""
    name, arguments = str(step["Name"]), step["Arguments"]
    body = list(arguments.get("ForEachBody", []))
    outputs: list[dict[str, Any]] = []
    listed = items(step, context)
    names = [str(child["Name"]) for child in body]
    for index, item in enumerate(listed):
        context.current_item = item
        children = [_child(child, names, index) for child in body]
        try:
            run_steps(children)
        finally:
            context.current_item = None
        outputs.append({str(child["Name"]): context.steps[f"{child['Name']}-{index}"]
                        for child in body})
    if int(arguments.get("MaxConcurrency", 1)) > 1:
        notes.append(f"{name}: its {len(listed)} items ran one after the other (MaxConcurrency "
                     f"{arguments['MaxConcurrency']} is not emulated)")
    properties: dict[str, Any] = {
        "Status": "Succeeded", "InputItemCount": len(listed),
        "TotalStepCount": len(listed) * len(body),
        "SucceededStepCount": len(listed) * len(body), "FailedStepCount": 0,
        "StoppedStepCount": 0, "IterationOutputs": outputs}
    if arguments.get("Selector"):
        properties["Selected"] = _selected(name, arguments["Selector"], outputs)
    return properties


def _selected(name: str, selector: Mapping[str, Any], outputs: list[dict[str, Any]]
              ) -> dict[str, Any]:
    """The picked iteration's output of the body step the selector's field names."""
    field = selector.get("Field", {})
    match = _ITERATION_OUTPUT.fullmatch(str(field.get("Get", "")) if isinstance(
        field, Mapping) else "")
    if match is None:
        raise StepFailed(f"step {name}: Selector.Field must read IterationOutput.<body step>."
                         f"<member>, got {field!r}")
    body_step, path = match[1], match[2]
    values = [float(walk(output[body_step], path, f"step {name}: Selector"))
              for output in outputs]
    pick = {"MaxBy": max, "MinBy": min}.get(str(selector.get("Pick")))
    if pick is None:
        raise StepFailed(f"step {name}: Selector.Pick must be MaxBy or MinBy, got "
                         f"{selector.get('Pick')!r}")
    best = values.index(pick(values))
    return dict(outputs[best][body_step])


def _child(step: Mapping[str, Any], body: list[str], index: int) -> Mapping[str, Any]:
    """A body step as one iteration runs it: ``<step>-<index>``, its references to the other
    body steps (``Steps.<step>``, ``DependsOn``) made references to this iteration's."""
    text = json.dumps({key: value for key, value in step.items() if key != "Name"})
    for name in body:
        text = re.sub(rf'"Steps\.{re.escape(name)}(?=[."\[])', f'"Steps.{name}-{index}', text)
    child = json.loads(text)
    child["DependsOn"] = [f"{entry}-{index}" if entry in body else entry
                          for entry in child.get("DependsOn", [])]
    return {"Name": f"{step['Name']}-{index}", BODY_STEP: step["Name"], **child}
