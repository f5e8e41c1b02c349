"""Types at the boundary: each public constructor and factory checks its arguments here,
against its own annotations, before anything reaches jsii; plain data read from JSON or YAML
(``cdk.json``'s teams, the CLI's workload files) is checked here too, by `check_entry`.

A wrong type is a ``TypeError`` naming the construct (its path) or the factory, the field,
what was given and what is wanted. Values of the right type that nothing downstream can
carry are a ``ValueError``: non-finite floats (NaN stops the jsii kernel), integers longer
than any SageMaker field, naive datetimes (their meaning depends on the synth machine's
clock), and durations in fractions of the unit that is meant (seconds, or minutes).
Python's ``bool`` is an ``int``: neither stands for the other here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Union, get_args, get_origin

# From typing_extensions: typing has Required and Unpack from Python 3.11, and its
# get_type_hints strips the backports' Required only from 3.11 (requires-python is 3.10).
from typing_extensions import Required, Unpack, get_type_hints

from compiled_training.catalog.api_shapes import api_shape, shape_problems, shown

# No SageMaker field holds more digits (a hyperparameter value holds 2,500 characters);
# printing longer integers even trips Python's own digit limit.
_MAX_INT_DIGITS = 2500
# Integer pipeline parameters travel in the template's JSON, exact up to JavaScript's 2**53.
_MAX_SAFE_INTEGER = 2**53 - 1
Problem = tuple[type[Exception], str]


def check_arguments(function: Callable[..., Any], arguments: Mapping[str, Any], *,
                    whole_minutes: Sequence[str] = (), required: Sequence[str] = ()) -> None:
    """Checks a call's arguments (the callee's ``locals()``, first thing) against the callee's
    annotations. A constructor's messages name its class and construct path; a factory's its
    qualified name. ``whole_minutes`` names the Duration props meant in minutes.

    Props taken as ``**props: Unpack[SomeProps]`` are checked against that ``TypedDict``: each
    one known, the required ones given (those it declares ``Required``, and ``required``).
    Only the props given are read: a prop's type may name a module (``aws_ec2`` for ``vpc``)
    that a call without it need not import."""
    name = function.__qualname__.removesuffix(".__init__")
    if "scope" in arguments:
        _check_construct_args(name, arguments["scope"], arguments["construct_id"])
    problems: list[Problem] = []
    checked: list[tuple[str, Any, Any]] = []
    for field, hint in _hints(function).items():
        if get_origin(hint) is Unpack:
            props, given = get_args(hint)[0], arguments[field]
            problems += _prop_problems(given, props, required)
            checked += [(prop, value, prop_type(props, prop))
                        for prop, value in given.items() if prop in prop_names(props)]
        elif field in arguments:
            checked.append((field, arguments[field], hint))
    problems += [problem for field, value, hint in checked
                 for problem in _problems(value, hint, field, field in whole_minutes)]
    if problems:  # the construct's path only now: reading it is a round trip to jsii
        _raise(_construct_subject(name, arguments["scope"], arguments["construct_id"])
               if "scope" in arguments else name, problems)


def known_keywords(function: Callable[..., Any]) -> Callable[..., Any]:
    """A factory that names its keywords when given one it does not take, where Python's own
    error names neither the options nor the factory's owner."""
    signature = inspect.signature(function)
    allowed = ", ".join(name for name, parameter in signature.parameters.items()
                        if parameter.kind is parameter.KEYWORD_ONLY) or "none"

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        unknown = [name for name in kwargs if name not in signature.parameters]
        if unknown:
            raise TypeError(f"{function.__qualname__}: {', '.join(unknown)} "
                            f"{'is not an option' if len(unknown) == 1 else 'are not options'};"
                            f" allowed: {allowed}")
        return function(*args, **kwargs)

    return checked


def _prop_problems(given: Mapping[str, Any], props: type,
                   required: Sequence[str]) -> list[Problem]:
    """Unknown props and missing required ones (Python's keyword checks, for ``**props``)."""
    known = prop_names(props)
    problems: list[Problem] = [
        (TypeError, f"{name} is not a prop; allowed: {', '.join(known)}")
        for name in given if name not in known]
    for name in known:
        if name not in required_keys(props) and name not in required:
            continue
        if name not in given:
            problems.append((TypeError, f"{name} is required"))
        elif given[name] is None and name in required:  # its type allows None elsewhere
            wanted = " or ".join(_describe(m) for m in get_args(prop_type(props, name))
                                 if m is not type(None))
            problems.append((TypeError, f"{name} must be {wanted}, got {_given(None)}"))
    return problems


def check_parameter(name: Any, kind: Any, default: Any, python_types: Mapping[Enum, type]
                    ) -> None:
    """A pipeline parameter: a name the API accepts, a default of its declared type ``kind``
    (``python_types``: the Python type of each parameter type)."""
    kinds = type(next(iter(python_types)))
    problems: list[Problem] = []
    if not isinstance(name, str):
        problems.append((TypeError, f"name must be a str, got {_given(name)}"))
    else:
        problems += [(ValueError, f"name {problem.message}") for problem in shape_problems(
            name, api_shape("PipelineParameterName"), "name")]
    if not isinstance(kind, kinds):
        problems.append((TypeError, f"type must be a {kinds.__name__}, got {_given(kind)}"))
    else:
        wanted = python_types[kind]
        problems += _problems(default, wanted, f"default ({kind.value})", False)
        if wanted is int and isinstance(default, int) and (
                abs(default) > _MAX_SAFE_INTEGER):
            problems.append((ValueError, f"default (Integer) must be within "
                                         f"±{_MAX_SAFE_INTEGER} (2**53 - 1, what the "
                                         f"template's JSON carries exactly), got "
                                         f"{_given(default)}"))
    _raise(f"Parameter {_shown(name)}", problems)


def check_entry(entry: Any, hints: Mapping[str, Any], subject: str, *, where: str = "",
                required: Sequence[str] = (), error: type[Exception] = ValueError,
                one_line: bool = False) -> None:
    """Checks one object of plain data (from JSON or YAML) against ``hints``, each key's type:
    every key known, the ``required`` ones given, each value of its type by the rules the
    constructors' arguments follow. ``where`` prefixes the keys of a nested object
    (``schedule.``). Problems raise ``error``, each naming its key; ``one_line`` joins them
    with semicolons, for a command line's one-line errors."""
    if not isinstance(entry, Mapping):
        raise error(f"{subject}: {where.rstrip('.') or 'the entry'} must be a mapping of keys "
                    f"to values, got {_given(entry)}")
    missing = [f"{where}{key}" for key in required if key not in entry]
    problems = [f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required"
                ] if missing else []
    for key, value in entry.items():
        if key not in hints:
            problems.append(f"{where}{key} is not a known key; allowed: {', '.join(hints)}")
        else:
            problems += [message for _, message in
                         _problems(value, hints[key], f"{where}{key}", False)]
    if problems:
        raise error(f"{subject}: {'; '.join(problems)}" if one_line else
                    _message(subject, problems))


def _raise(subject: str, problems: list[Problem]) -> None:
    """One error for all problems: a TypeError if any is a wrong type, else a ValueError."""
    if problems:
        kind = TypeError if any(k is TypeError for k, _ in problems) else ValueError
        raise kind(_message(subject, [message for _, message in problems]))


def _message(subject: str, problems: Sequence[str]) -> str:
    if len(problems) == 1:
        return f"{subject}: {problems[0]}"
    lines = "\n".join(f"  - {message}" for message in problems)
    return f"{subject} has {len(problems)} problems:\n{lines}"


def _check_construct_args(name: str, scope: Any, construct_id: Any) -> None:
    if not isinstance(construct_id, str):
        raise TypeError(f"{name}: construct_id must be a str, got {_given(construct_id)}")
    if _CONSTRUCT not in _jsii_types(scope):
        raise TypeError(f"{name} {construct_id}: scope must be a Construct, got {_given(scope)}")


def _construct_subject(name: str, scope: Any, construct_id: str) -> str:
    parent = scope.node.path
    return f"{name} {parent}/{construct_id}" if parent else f"{name} {construct_id}"


def prop_names(props: type) -> tuple[str, ...]:
    """A ``TypedDict``'s keys, its bases' first, in declaration order."""
    return tuple(props.__annotations__)


@functools.cache
def required_keys(props: type) -> frozenset[str]:
    """A ``TypedDict``'s ``Required`` keys, read as written: evaluating every key's type would
    import every module the types name. (``__required_keys__`` misses them under ``from
    __future__ import annotations`` before Python 3.14: it sees strings.)"""
    def required(annotation: Any) -> bool:
        if isinstance(annotation, typing.ForwardRef):
            annotation = annotation.__forward_arg__
        if isinstance(annotation, str):
            return annotation.startswith(("Required[", "typing.Required[",
                                          "typing_extensions.Required["))
        return get_origin(annotation) is Required

    return frozenset(name for name, annotation in props.__annotations__.items()
                     if required(annotation))


@functools.cache
def prop_type(props: type, name: str) -> Any:
    """The type of one key of a ``TypedDict``, evaluated when first asked for."""
    # One key at a time, through typing's own evaluation of a class's annotations: a class
    # holding that key's annotation alone, in the module that wrote it (a TypedDict keeps
    # its bases' keys as forward references that name their module).
    annotation = props.__annotations__[name]
    module = getattr(annotation, "__forward_module__", None) or props.__module__
    one_key = types.new_class(props.__name__, exec_body=lambda namespace: namespace.update(
        __annotations__={name: annotation}, __module__=module))
    return get_type_hints(one_key, localns=_DeferredNames(module))[name]


@functools.cache
def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    """A function's parameters with their types."""
    hints = get_type_hints(function, localns=_DeferredNames(function.__module__))
    hints.pop("return", None)
    return hints


class _DeferredNames(dict[str, Any]):
    """The names a module imports for type checkers only, imported when an annotation being
    read names one. A module lists them in ``DEFERRED_IMPORTS`` (name: ``"module"`` or
    ``"module:attribute"``), beside its ``if TYPE_CHECKING:`` imports of the same: a module that
    most synths need not load (the CDK modules of optional props: aws_ec2 alone is a fifth of a
    second; the image build's). The import is the annotated module's own, in its own layer."""

    def __init__(self, module: str) -> None:
        super().__init__()
        self._imports: Mapping[str, str] = getattr(sys.modules[module], "DEFERRED_IMPORTS", {})

    def __missing__(self, name: str) -> Any:
        if name not in self._imports:
            raise KeyError(name)  # eval then looks in the annotated module's globals
        module, _, attribute = self._imports[name].partition(":")
        imported = importlib.import_module(module)
        return getattr(imported, attribute) if attribute else imported


def _problems(value: Any, hint: Any, field: str, whole_minutes: bool) -> Iterator[Problem]:
    """The wrong type, or else the unusable values, of ``value`` against ``hint``."""
    origin = get_origin(hint)
    if hint is Any:
        return
    if origin in (Union, types.UnionType):
        # The first member the value is an instance of says what is wrong inside it.
        member = next((m for m in get_args(hint) if _is_instance(value, m)), None)
        if member is None:
            yield TypeError, f"{field} must be {_describe(hint)}, got {_given(value)}"
        else:
            yield from _problems(value, member, field, whole_minutes)
        return
    if not _is_instance(value, hint):
        yield TypeError, f"{field} must be {_describe(hint)}, got {_given(value)}"
        return
    if origin is not None and issubclass(origin, Mapping):
        key_hint, value_hint = get_args(hint)
        for key, item in value.items():
            yield from _problems(key, key_hint, f"{field} key {_shown(key)}", whole_minutes)
            yield from _problems(item, value_hint, f"{field}[{_shown(key)}]", whole_minutes)
    elif origin is not None:
        (item_hint,) = get_args(hint)
        for index, item in enumerate(value):
            yield from _problems(item, item_hint, f"{field}[{index}]", whole_minutes)
    else:
        yield from _unusable(value, field, whole_minutes)


def _is_instance(value: Any, hint: Any) -> bool:
    origin = get_origin(hint) or hint
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        return isinstance(value, (int, float) if hint is float else int) and (
            not isinstance(value, bool))
    if origin in (Sequence, list, tuple):
        return isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    if _is_jsii_interface(origin):
        return _implements(value, origin)
    return isinstance(value, origin)


def _unusable(value: Any, field: str, whole_minutes: bool) -> Iterator[Problem]:
    """Values of the right type that nothing downstream can carry."""
    if isinstance(value, float) and not math.isfinite(value):
        yield ValueError, f"{field} must be a finite number, got {value!r}"
    elif isinstance(value, int) and not isinstance(value, bool) and (
            value.bit_length() * math.log10(2) > _MAX_INT_DIGITS):
        yield ValueError, (f"{field} must have at most {_MAX_INT_DIGITS} digits (no SageMaker "
                           f"field holds more), got {_shown(value)}")
    elif isinstance(value, datetime) and value.utcoffset() is None:
        yield ValueError, (f"{field} must be a timezone-aware datetime (a naive one means "
                           f"the synth machine's local time), got {value!r}; add "
                           "tzinfo=timezone.utc")
    elif _DURATION in _jsii_types(value) and not value.is_unresolved():
        unit, milliseconds = ("minutes", 60_000) if whole_minutes else ("seconds", 1000)
        if value.to_milliseconds() % milliseconds:
            yield ValueError, (f"{field} must be a whole number of {unit}, got "
                               f"{value.to_milliseconds() / 1000:g} seconds")


# CDK classes by their jsii names, as the kernel knows them: this layer imports no CDK.
_CONSTRUCT = "constructs.Construct"
_DURATION = "aws-cdk-lib.Duration"


def _jsii_types(value: Any) -> set[str]:
    """The jsii types ``value``'s class is or extends (a Python subclass of a CDK class too)."""
    return {getattr(k, "__jsii_type__", "") for k in type(value).__mro__}


def _is_jsii_interface(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "__jsii_type__") and getattr(
        hint, "_is_protocol", False)


def _implements(value: Any, interface: Any) -> bool:
    """Whether a jsii object implements a jsii interface (those are Protocols that
    ``isinstance`` refuses): its class declares it, or, for an object that jsii hands back
    as a bundle of interfaces, one of its parts does."""
    parts = vars(value).get("_delegates", [value]) if hasattr(value, "__dict__") else [value]
    for part in parts:
        declared = [*getattr(type(part), "__jsii_ifaces__", ()), *type(part).__mro__]
        if any(interface in getattr(d, "__mro__", ()) for d in declared) or getattr(
                type(part), "__jsii_type__", None) == interface.__jsii_type__:
            return True
    return False


def _describe(hint: Any) -> str:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(member) for member in get_args(hint))
    if origin is not None and issubclass(origin, Mapping):
        key_hint, value_hint = get_args(hint)
        return f"a mapping of {_describe(key_hint)} to {_describe(value_hint)}"
    if origin is not None:
        return f"a sequence of {_describe(get_args(hint)[0])}"
    names = {type(None): "None", bool: "a bool", int: "an int", float: "a float",
             str: "a str", datetime: "a datetime", list: "a list", dict: "a dict"}
    if hint in names:
        return names[hint]
    module = hint.__module__  # aws_cdk.aws_s3.IBucket reads aws_s3.IBucket
    return (f"{module.removeprefix('aws_cdk.')}.{hint.__qualname__}"
            if module.startswith("aws_cdk.") else hint.__qualname__)


def _given(value: Any) -> str:
    return f"{type(value).__name__} {_shown(value)}"


def _shown(value: Any) -> str:
    text = shown(value)
    return text if len(text) <= 100 else text[:80] + "..."
