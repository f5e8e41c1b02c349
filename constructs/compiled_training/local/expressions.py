"""The pipeline-definition language as SageMaker Pipelines evaluates it: parameters and their
types, execution variables, step properties, ``Std:Join``, ``Std:JsonGet`` with property
files, and conditions. What it does not implement is refused, naming where it is used."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compiled_training.local.assembly import RunInputError


class Unsupported(Exception):
    """Something of the definition the runner does not implement and that shapes the run."""


class StepFailed(Exception):
    """A step ended in failure: the reason, as the console would show it."""


def parameter_values(declared: list[Mapping[str, Any]],
                     overrides: Mapping[str, str]) -> dict[str, Any]:
    """The execution's parameters: defaults, with ``--param NAME=VALUE`` overrides parsed to
    the declared type. An unknown name or a value of the wrong type is bad input."""
    types = {p["Name"]: p.get("Type", "String") for p in declared}
    values = {p["Name"]: p.get("DefaultValue") for p in declared}
    allowed = {p["Name"]: p["EnumValues"] for p in declared if p.get("EnumValues")}
    for name, text in overrides.items():
        if name not in types:
            raise RunInputError(f"--param {name}: the pipeline declares no such parameter "
                                f"(declared: {', '.join(sorted(types)) or 'none'})")
        values[name] = _parsed(name, types[name], text)
    for name, enum in sorted(allowed.items()):
        if values[name] is not None and str(values[name]) not in map(str, enum):
            given = f"--param {name}" if name in overrides else f"parameter {name}'s default"
            raise RunInputError(f"{given}: {values[name]!r} is not one of its EnumValues "
                                f"({', '.join(map(str, enum))}), which SageMaker holds a run "
                                f"to")
    missing = sorted(name for name, value in values.items() if value is None)
    if missing:
        raise RunInputError(f"parameters without a default need --param: {', '.join(missing)}")
    return values


def typed(value: Any, kind: str, what: str) -> Any:
    """A value as a Lambda step's ``OutputType`` (String, Integer, Float, Boolean) types it."""
    try:
        if kind == "Boolean":
            if isinstance(value, bool):
                return value
            return {"true": True, "false": False}[str(value).lower()]
        if kind == "Integer" and not isinstance(value, bool):
            return int(value)
        if kind == "Float" and not isinstance(value, bool):
            return float(value)
        if kind == "String":
            return text(value)
    except (ValueError, KeyError, TypeError):
        pass
    raise StepFailed(f"{what}: {value!r} is not {_article(kind)}")


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "AEIOU" else f"a {kind}"


def _parsed(name: str, kind: str, text: str) -> Any:
    try:
        if kind == "Integer":
            return int(text)
        if kind == "Float":
            number = float(text)
            if not math.isfinite(number):
                raise ValueError
            return number
        if kind == "Boolean":
            return {"true": True, "false": False}[text.lower()]
    except (ValueError, KeyError):
        raise RunInputError(f"--param {name}: {text!r} is not {_article(kind)}") from None
    return text


@dataclass
class Context:
    """What expressions read during one execution."""

    parameters: dict[str, Any]
    execution: dict[str, str]
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each finished step's properties (``FinalMetricDataList`` by metric name,
    ``OutputParameters`` by name, ``PropertyFiles`` by name)."""
    unmatched_metrics: dict[str, dict[str, str]] = field(default_factory=dict)
    """Why a training step has no metric of a name it defines (`Run.unmatched_metrics`)."""
    current_item: Any = None
    """Inside a ForEach step's body: the item of this iteration (``ForEach.CurrentItem``)."""

    def evaluate(self, value: Any, where: str) -> Any:
        """``value`` with every expression in it evaluated; ``where`` names the step and
        field for a refusal."""
        if isinstance(value, list):
            return [self.evaluate(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Get"}:
            return self.get(value["Get"], where)
        if set(value) == {"Std:Join"}:
            join = value["Std:Join"]
            return str(join.get("On", "")).join(
                text(self.evaluate(item, where)) for item in join["Values"])
        if set(value) == {"Std:JsonGet"}:
            return self._json_get(value["Std:JsonGet"], where)
        functions = [key for key in value if key.startswith("Std:")]
        if functions:
            raise Unsupported(f"{where}: the runner does not implement {functions[0]}")
        return {key: self.evaluate(item, f"{where}.{key}") for key, item in value.items()}

    def get(self, path: str, where: str) -> Any:
        head, _, rest = path.partition(".")
        if head == "Parameters":
            if rest not in self.parameters:
                raise Unsupported(f"{where}: {path} names no declared parameter")
            return self.parameters[rest]
        if head == "Execution":
            if rest not in self.execution:
                raise Unsupported(f"{where}: execution variable {rest} is not implemented")
            return self.execution[rest]
        if head == "ForEach" and rest.startswith("CurrentItem"):
            if self.current_item is None:
                raise Unsupported(f"{where}: {path} is read outside a ForEach step's body")
            drilled = rest.removeprefix("CurrentItem")
            if not drilled:  # the item itself, as given (a JSON object stays its text)
                return self.current_item
            return walk(_json_item(self.current_item), drilled, f"{where}: {path}")
        if head == "Steps":
            step, _, properties = rest.partition(".")
            if step not in self.steps:
                raise Unsupported(f"{where}: {path} reads step {step!r}, which has not run")
            read = re.match(r"FinalMetricDataList\['([^']+)'\]", properties)
            metric = read[1] if read else ""
            if why := self.unmatched_metrics.get(step, {}).get(metric):
                raise StepFailed(f"{where}: {path}: metric {metric!r}: {why}")
            return walk(self.steps[step], properties, f"{where}: {path}")
        raise Unsupported(f"{where}: {path} is not an expression the runner implements")

    def _json_get(self, spec: Mapping[str, Any], where: str) -> Any:
        if "S3Uri" in spec:
            raise Unsupported(f"{where}: Std:JsonGet on an S3Uri is not implemented; read a "
                              f"step's property file")
        source = spec.get("PropertyFile")
        reference = source.get("Get") if isinstance(source, Mapping) else None
        match = re.fullmatch(r"Steps\.([^.]+)\.PropertyFiles\.(.+)", str(reference))
        if match is None:
            raise Unsupported(f"{where}: Std:JsonGet reads {source!r}, not a step's property "
                              f"file")
        document = self.get(f"Steps.{match[1]}.PropertyFiles.{match[2]}", where)
        path = text(self.evaluate(spec["Path"], where))
        return walk(document, path, f"{where}: Std:JsonGet {path}")


_ACCESSOR = re.compile(r"\.?([^.\[\]]+)|\[(?:'([^']*)'|\"([^\"]*)\"|(\d+))\]")


def _json_item(item: Any) -> Any:
    """A ForEach item drilled into: an item given as JSON text is read as JSON."""
    if isinstance(item, str):
        try:
            return json.loads(item)
        except ValueError:
            return item
    return item


def walk(document: Any, path: str, where: str) -> Any:
    """``FinalMetricDataList['m'].Value``-style paths, and JSON paths (``a.b[0]``,
    ``$.a.f1-score``) as ``Std:JsonGet`` reads them."""
    position, value = 0, document
    path = path.removeprefix("$").removeprefix(".") if path.startswith("$") else path
    while position < len(path):
        match = _ACCESSOR.match(path, position)
        if match is None:
            raise Unsupported(f"{where}: cannot read {path[position:]!r}")
        key: Any = next(k for k in match.groups() if k is not None)
        if match[4] is not None:
            key = int(key)
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            present = sorted(map(str, value)) if isinstance(value, Mapping) else None
            found = f" (it has: {', '.join(present) or 'nothing'})" if present is not None \
                else ""
            raise StepFailed(f"{where}: no {key!r} there{found}") from None
        position = match.end()
    return value


def text(value: Any) -> str:
    """A value as Pipelines writes it into a string (``Std:Join``, a hyperparameter)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "Equals": lambda a, b: a == b, "GreaterThan": lambda a, b: a > b,
    "GreaterThanOrEqualTo": lambda a, b: a >= b, "LessThan": lambda a, b: a < b,
    "LessThanOrEqualTo": lambda a, b: a <= b,
}


def condition_holds(condition: Mapping[str, Any], context: Context, where: str) -> bool:
    """One condition of a ``Condition`` step, as Pipelines evaluates it."""
    kind = condition.get("Type")
    if kind in _COMPARISONS:
        left = context.evaluate(condition["LeftValue"], where)
        right = context.evaluate(condition["RightValue"], where)
        _same_kind(left, right, where)
        return _COMPARISONS[str(kind)](left, right)
    if kind == "In":
        query = context.evaluate(condition["QueryValue"], where)
        values = [context.evaluate(v, where) for v in condition["Values"]]
        return any(_kind(query) == _kind(v) and query == v for v in values)
    if kind == "Not":
        return not condition_holds(condition["Condition"], context, where)
    if kind == "Or":
        return any(condition_holds(c, context, where) for c in condition["Conditions"])
    raise Unsupported(f"{where}: condition type {kind!r} is not implemented")


def _kind(value: Any) -> str:
    """What a value compares as: numbers with numbers, strings with strings, booleans alone."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


def _same_kind(left: Any, right: Any, where: str) -> None:
    if _kind(left) != _kind(right):
        raise StepFailed(f"{where}: cannot compare {_kind(left)} {left!r} with {_kind(right)} "
                         f"{right!r}")


def json_document(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise StepFailed(f"{where}: not JSON: {error}") from None
