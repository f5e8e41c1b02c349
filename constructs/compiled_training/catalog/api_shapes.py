"""Requests checked against botocore's SageMaker service model, as the API will check them.

One generic walk over an input shape (`shape_problems`): types, required and unknown members,
enums, minimum and maximum (values, lengths, item counts) and full-match patterns, plus the
few limits the API documents but the model does not encode. The model's patterns are Java
regular expressions; `java_patterns` reads them and says them in words.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import math
import re
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from compiled_training.catalog.java_patterns import LINE_BREAK, java_regex, pattern_in_words
from compiled_training_runtime import contract

# Limits in the API's documentation that the model does not carry, by shape name.
DOCUMENTED_LIMITS: dict[str, dict[str, int]] = {
    # CreateTrainingJob StoppingCondition: "The maximum value is 28 days."
    "MaxRuntimeInSeconds": {"max": 28 * 24 * 3600},
}
# The Python types of the model's types (timestamps and blobs appear in no job request).
_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "structure": (dict, "an object"), "map": (dict, "an object"), "list": (list, "a list"),
    "string": (str, "a string"), "boolean": (bool, "a boolean"),
    "integer": (int, "an integer"), "long": (int, "an integer"),
    "float": ((int, float), "a number"), "double": ((int, float), "a number"),
}
# The model's "integer" is 32-bit ("long" is 64-bit), whatever its min and max say.
_INT_BOUNDS = {"integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
# The pipeline step types that send a request, and the member that names the job, which
# Pipelines sets (as a name of this length).
JOB_STEPS = {"Training": "CreateTrainingJob", "Processing": "CreateProcessingJob",
             "RegisterModel": "CreateModelPackage"}
_JOB_NAME_FIELDS = {"CreateTrainingJob": "TrainingJobName",
                    "CreateProcessingJob": "ProcessingJobName"}
_JOB_NAME = "pipelines-0123456789ab-Step-0123456789"


class RunTimeValue:
    """A value only an execution knows (a job name, an execution id): left unchecked."""

    def __repr__(self) -> str:
        return "<run-time value>"


RUN_TIME = RunTimeValue()


class ShapeProblem(NamedTuple):
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path} {self.message}"


class Shape:
    """One shape of the service model, read from its JSON as botocore's ``Shape`` reads it
    (the members this module uses: ``name``, ``type_name``, ``metadata``, ``members``,
    ``required_members``, ``member``, ``key``, ``value``, ``enum``)."""

    # botocore.model.Shape.METADATA_ATTRS: the keys of a shape that are its metadata.
    _METADATA = ("required", "min", "max", "pattern", "sensitive", "enum", "idempotencyToken",
                 "error", "exception", "endpointdiscoveryid", "retryable", "document", "union",
                 "contextParam", "clientContextParams", "requiresLength")

    def __init__(self, name: str, shapes: Mapping[str, Any],
                 traits: Mapping[str, Any] | None = None) -> None:
        self.name = name
        # A member's reference may add traits (``idempotencyToken``) to the shape it names.
        self._model = {**shapes[name], **(traits or {})}
        self.type_name: str = self._model["type"]
        self.metadata = {key: self._model[key] for key in self._METADATA if key in self._model}
        self.enum: list[str] = self.metadata.get("enum", [])
        self.required_members: list[str] = self.metadata.get("required", [])

    @functools.cached_property
    def members(self) -> dict[str, Shape]:
        return {name: _referenced(ref) for name, ref in self._model.get("members", {}).items()}

    @functools.cached_property
    def member(self) -> Shape:
        return _referenced(self._model["member"])

    @functools.cached_property
    def key(self) -> Shape:
        return _referenced(self._model["key"])

    @functools.cached_property
    def value(self) -> Shape:
        return _referenced(self._model["value"])

    def __repr__(self) -> str:
        return f"<Shape {self.name}>"


@functools.cache
def _sagemaker_model() -> dict[str, Any]:
    """botocore's SageMaker service model as ``botocore.loaders.Loader()`` loads it (the
    newest API version, ``~/.aws/models`` before botocore's own data, ``sdk`` extras
    merged; a session's ``AWS_DATA_PATH`` is not read), read as JSON without importing
    botocore's loader, whose HTTP stack costs every synth a quarter of a second; tests hold
    it equal to botocore's ``ServiceModel``."""
    paths = [Path.home() / ".aws" / "models"]
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("botocore is required for the SageMaker service model")
    paths.append(Path(next(iter(spec.submodule_search_locations))) / "data")
    versions = sorted({version.name for root in paths
                       for version in (root / "sagemaker").glob("*/")
                       if _model_file(version, "service-2")})
    if not versions:
        raise ImportError(f"botocore has no SageMaker service model under {paths[-1]}")

    def first(name: str) -> Path | None:  # botocore's load_data: the first search path wins
        return next(filter(None, (_model_file(root / "sagemaker" / versions[-1], name)
                                  for root in paths)), None)

    found = first("service-2")
    assert found is not None  # every listed version has one
    model: dict[str, Any] = _read_json(found)
    extras = first("service-2.sdk-extras")
    if extras:
        _merge(model, _read_json(extras).get("merge", {}))
    return model


def _model_file(folder: Path, name: str) -> Path | None:
    return next((folder / f"{name}{suffix}" for suffix in (".json", ".json.gz")
                 if (folder / f"{name}{suffix}").is_file()), None)


def _read_json(path: Path) -> Any:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """botocore.utils.merge_dicts: nested objects merged, anything else replaced."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


@functools.cache
def _shape(name: str) -> Shape:
    return Shape(name, _sagemaker_model()["shapes"])


def _referenced(ref: Mapping[str, Any]) -> Shape:
    """The shape a member reference names, with the reference's own traits."""
    traits = {key: value for key, value in ref.items() if key != "shape"}
    return Shape(ref["shape"], _sagemaker_model()["shapes"], traits) if traits else _shape(
        ref["shape"])


def api_shape(name: str) -> Shape:
    """A shape of botocore's SageMaker service model, e.g. ``TrainingInstanceType``."""
    return _shape(name)


def operation_input(operation: str) -> Shape:
    """The input shape of an operation, e.g. ``CreateTrainingJob``."""
    return _shape(_sagemaker_model()["operations"][operation]["input"]["shape"])


# one branch per botocore shape type
def shape_problems(value: Any, shape: Any, path: str) -> Iterator[ShapeProblem]:  # noqa: C901
    """Everything the API would refuse in ``value`` as ``shape``; unresolved CDK tokens and
    run-time values are skipped. At most one problem per scalar (the first that applies)."""
    if value is RUN_TIME or is_token(value):
        return
    kind = shape.type_name
    limits = {**shape.metadata, **DOCUMENTED_LIMITS.get(shape.name, {})}
    if not _of_type(value, kind):
        yield ShapeProblem(path, f"must be {_TYPES[kind][1]}, got {type(value).__name__} "
                                 f"{shown(value)}")
        return
    if kind == "structure":
        for name in shape.required_members:
            if name not in value:
                yield ShapeProblem(_join(path, name), "is required")
        for name, item in value.items():
            if name not in shape.members:
                yield ShapeProblem(_join(path, name), f"is not a member of {shape.name}")
            else:
                yield from shape_problems(item, shape.members[name], _join(path, name))
    elif kind in ("list", "map"):
        yield from _bounds(path, len(value), limits, " items")
        items = value.items() if kind == "map" else enumerate(value)
        for key, item in items:
            if kind == "map":
                yield from shape_problems(key, shape.key, f"{path} key")
            yield from shape_problems(item, shape.member if kind == "list" else shape.value,
                                      f"{path}[{key!r}]")
    elif kind == "string":
        if shape.enum and value not in shape.enum:
            allowed = ", ".join(shape.enum) if len(shape.enum) <= 12 else f"{shape.name} values"
            yield ShapeProblem(path, f"must be one of {allowed}, got {shown(value)}"
                                     f"{contract.did_you_mean(value, shape.enum)}")
        elif problem := next(_bounds(path, len(value), limits, " characters", shown(value)),
                             None):
            yield problem
        elif "pattern" in limits and not java_regex(limits["pattern"],
                                                    value.isascii()).fullmatch(value):
            hint = " (a line break is not allowed)" if LINE_BREAK.search(value) else ""
            yield ShapeProblem(path, f"must {pattern_in_words(limits['pattern'])}, got "
                                     f"{shown(value)}{hint}")
    elif kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        yield from _bounds(path, value, {"min": max(limits.get("min", low), low),
                                         "max": min(limits.get("max", high), high)},
                           " seconds" if shape.name.endswith("InSeconds") else "")
    elif kind in ("float", "double") and not math.isfinite(value):
        yield ShapeProblem(path, f"must be a finite number, got {value!r}")
    elif kind in ("float", "double"):
        yield from _bounds(path, value, limits, "")


def _of_type(value: Any, kind: str) -> bool:
    python_type = _TYPES.get(kind, (object, ""))[0]
    return isinstance(value, python_type) and (kind == "boolean" or not isinstance(value, bool))


def _bounds(path: str, measure: Any, limits: Mapping[str, Any], unit: str,
            got: str | None = None) -> Iterator[ShapeProblem]:
    """A measure (a number, a length, a count) outside the shape's min and max."""
    got = got or _with_unit(measure, unit)
    if measure < limits.get("min", measure):
        yield ShapeProblem(path, f"must be at least {_with_unit(limits['min'], unit)}, got {got}")
    elif measure > limits.get("max", measure):
        yield ShapeProblem(path, f"must be at most {_with_unit(limits['max'], unit)}, got {got}")


def _with_unit(number: Any, unit: str) -> str:
    text = f"{shown(number)}{unit.removesuffix('s') if number == 1 else unit}"
    if unit == " seconds" and isinstance(number, int) and number and number % 86400 == 0:
        text += f" ({number // 86400} days)"
    return text


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def shown(value: Any) -> str:
    """A value as a message shows it: long strings cut, huge integers by their size (printing
    one past Python's digit limit would raise)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:40]!r}... ({len(value)} characters)"
    return repr(value)


# What ``Token.is_unresolved`` tests a string for (aws-cdk-lib core/lib/private/encoding.ts:
# "Token[" anywhere, then a string token marker or a number token rendered into the string).
_TOKEN_MARKER = "Token["
STRING_TOKEN = re.compile(r"\$\{Token\[[a-zA-Z0-9:._-]+\]\}")
"""A token as CDK encodes it inside a string."""
_STRING_TOKEN = re.compile(STRING_TOKEN.pattern + r"|-1\.[0-9]{10,16}e\+289")


# A number token is a double whose top 16 bits are 0xFBFF (encoding.ts: DOUBLE_TOKEN_MARKER_BITS,
# extractTokenDouble), a negative number near -1.888e289.
_NUMBER_TOKEN_BITS = 0xFBFF


def is_token(value: Any) -> bool:
    """An unresolved CDK token, as ``Token.is_unresolved`` says of a string or a number, read
    as CDK encodes them, without a round trip to the jsii kernel (and without the CDK: the
    layers below the constructs import none of it)."""
    if isinstance(value, str):
        return _TOKEN_MARKER in value and _STRING_TOKEN.search(value) is not None
    if isinstance(value, float):
        return struct.unpack("<Q", struct.pack("<d", value))[0] >> 48 == _NUMBER_TOKEN_BITS
    return False


# --- pipeline definitions ------------------------------------------------------------------

def substitute_expressions(value: Any, parameters: Mapping[str, Any],
                           run_time: Any = RUN_TIME) -> Any:
    """Pipeline expressions replaced by what they evaluate to: parameters by their values (a
    step property too, where ``parameters`` names it), anything only an execution knows by
    ``run_time``, or by ``run_time(path)`` where it is a function (a join with RUN_TIME is
    RUN_TIME)."""
    if isinstance(value, dict):
        if set(value) == {"Get"}:
            path = value["Get"]
            if path.startswith("Parameters."):
                return parameters[path.split(".", 1)[1]]
            if path in parameters:
                return parameters[path]
            return run_time(path) if callable(run_time) else run_time
        if set(value) == {"Std:Join"}:
            join = value["Std:Join"]
            parts = [substitute_expressions(v, parameters, run_time) for v in join["Values"]]
            if any(part is RUN_TIME for part in parts):
                return RUN_TIME
            return join["On"].join(rendered(part) for part in parts)
        return {k: substitute_expressions(v, parameters, run_time) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_expressions(v, parameters, run_time) for v in value]
    return value


def rendered(value: Any) -> str:
    """A value joined into a string, as Pipelines renders it (booleans in lowercase)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def job_request(operation: str, arguments: Mapping[str, Any], parameters: Mapping[str, Any],
                run_time: Any = RUN_TIME) -> dict[str, Any]:
    """A job step's arguments as SageMaker receives them, sent as ``operation`` with the
    parameters at the given values; Pipelines names the job itself."""
    request = substitute_expressions(arguments, parameters, run_time)
    if operation in _JOB_NAME_FIELDS:
        request = {_JOB_NAME_FIELDS[operation]: _JOB_NAME, **request}
    return dict(request)


def request_problems(operation: str, arguments: Mapping[str, Any],
                     parameters: Mapping[str, Any]) -> list[ShapeProblem]:
    """Everything the API would refuse in a job step's arguments (see `job_request`)."""
    request = job_request(operation, arguments, parameters)
    return list(shape_problems(request, operation_input(operation), ""))


def job_requests(definition: Mapping[str, Any], run_time: Any = RUN_TIME
                 ) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(step name, operation, request) of each job step, the parameters at their defaults."""
    defaults = {p["Name"]: p.get("DefaultValue") for p in definition.get("Parameters", [])}
    steps = list(definition["Steps"])
    for step in definition["Steps"]:
        if step["Type"] == "Condition":  # the steps of its branches run too
            steps += step["Arguments"].get("IfSteps", []) + step["Arguments"].get("ElseSteps", [])
    for step in steps:
        if step["Type"] in JOB_STEPS:
            operation = JOB_STEPS[step["Type"]]
            yield step["Name"], operation, job_request(operation, step["Arguments"], defaults,
                                                       run_time)


def definition_problems(definition: Mapping[str, Any], run_time: Any = RUN_TIME) -> list[str]:
    """Every problem of every job step's request, each as ``step NAME: path message``."""
    return [f"step {name}: {problem}"
            for name, operation, request in job_requests(definition, run_time)
            for problem in shape_problems(request, operation_input(operation), "")]
