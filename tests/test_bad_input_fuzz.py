"""Every field a user writes, found by reading the code, given values of the wrong kind: the
props' TypedDicts and keyword arguments (`TrainingPipeline`, `CompilerBenchmark`,
`RetrainingSchedule`), `ModelRegistration`'s and `WorkloadProfile`'s fields, the ``cdk.json``
key table (a team's keys and its nested ``schedule``, ``registration`` and ``benchmark``
keys) and the workload file's fields. A new field is fuzzed without an edit here.

Each field in turn gets each bad value while the rest stay valid; the outcome must be a
ValueError or TypeError naming the field. A crash (any other exception) or a bad value taken
silently is counted, and both counts must be 0. Bad values by the field's type: numbers given
as strings and as bools (``bool`` is no number here), NaN, bools given as strings and ints,
strings given as numbers; and, by meaning, misspelt frameworks, PyTorch versions the catalog
lacks and gate thresholds out of their metric's range given as a schedule's override.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import aws_cdk as cdk
import pytest

from compiled_training import (
    Compiler,
    CompilerBenchmark,
    Framework,
    InputChannel,
    ModelRegistration,
    RetrainingSchedule,
    TrainingPipeline,
    WorkloadProfile,
)
from compiled_training.pipelines.options import CompilerBenchmarkProps, TrainingPipelineProps
from compiled_training.reference import platform
from compiled_training.tools import cli
from compiled_training.typecheck import _hints, prop_names, prop_type
from tests.helpers import ROOT, new_stack

NAN = float("nan")


def _members(hint: Any) -> set[Any]:
    if get_origin(hint) in (Union, types.UnionType):
        return set(get_args(hint)) - {type(None)}
    return {hint}


def bad_values(hint: Any) -> list[Any]:
    """Values of the wrong kind for a field of this type; [] where its type is not a scalar."""
    members = _members(hint)
    numbers = bool(members & {int, float})
    found: list[Any] = []
    if numbers:
        found += ["0.8", "3"] + ([True] if bool not in members else [])
        found += [NAN] if float in members else []
    if bool in members and not numbers:
        found += ["true", 1]
    if str in members and not numbers:
        found += [5]
    return found


_PYTHONS_OWN = ("not supported between instances", "could not convert", "has no attribute",
                "unexpected keyword argument", "object is not", "unhashable type")


class Outcomes:
    """Each (field, value) tried, and those that crashed or were taken. A clear error is one
    of ``errors`` that names the field (or, for a value such as a version, the value)."""

    def __init__(self, errors: tuple[type[Exception], ...] = (ValueError, TypeError)) -> None:
        self.errors = errors
        self.tried = 0
        self.crashed: list[str] = []
        self.taken: list[str] = []

    def attempt(self, label: str, field: str, value: Any, build: Callable[..., Any],
                *args: Any, **kwargs: Any) -> None:
        """``build(*args, **kwargs)``, which is given ``value`` for ``field``."""
        self.tried += 1
        try:
            build(*args, **kwargs)
        except self.errors as error:
            message = str(error)
            # A value such as a version may be named instead of its field; Python's own words
            # are a crash that happened to be a TypeError or ValueError.
            named = field in message or (isinstance(value, str) and len(value) > 3
                                         and repr(value)[1:-1] in message)
            if not named or any(words in message for words in _PYTHONS_OWN):
                self.crashed.append(f"{label} {field}={value!r}: not a clear error: {message}")
            return
        except Exception as error:  # noqa: BLE001 - any other exception is the defect counted
            self.crashed.append(f"{label} {field}={value!r}: {type(error).__name__}: {error}")
            return
        self.taken.append(f"{label} {field}={value!r}")

    def assert_none_slipped(self, least: int) -> None:
        assert self.crashed == [] and self.taken == [], (self.crashed, self.taken)
        assert self.tried >= least


# --- the constructs --------------------------------------------------------------------------

def _pipeline_props(source_dir: Path) -> dict[str, Any]:
    return {"framework": Framework.pytorch("2.14"), "compiler": Compiler.torch_compile(),
            "instance_type": "ml.g5.2xlarge", "source_dir": str(source_dir),
            "entry_point": "train.py",
            "channels": [InputChannel("train", "s3://fuzz-data/train/"),
                         InputChannel("validation", "s3://fuzz-data/validation/")],
            "registration": ModelRegistration("fuzz-model", inference_image_uri=(
                "111122223333.dkr.ecr.eu-west-1.amazonaws.com/serve:1"))}


def _scalar_props(props: type) -> Iterator[tuple[str, Any]]:
    for name in prop_names(props):
        for value in bad_values(prop_type(props, name)):
            yield name, value


def test_no_construct_prop_takes_a_value_of_the_wrong_kind(source_dir):
    outcomes = Outcomes()
    base = _pipeline_props(source_dir)
    for name, value in _scalar_props(TrainingPipelineProps):
        outcomes.attempt("TrainingPipeline", name, value, TrainingPipeline, new_stack(), "Fuzz",
                         **{**base, name: value})
    benchmark = {k: v for k, v in base.items() if k != "registration"}
    for name, value in _scalar_props(CompilerBenchmarkProps):
        outcomes.attempt("CompilerBenchmark", name, value, CompilerBenchmark, new_stack(),
                         "Fuzz", **{**benchmark, name: value})
    def schedule(**props: Any) -> None:
        stack = new_stack()
        pipeline = TrainingPipeline(stack, "Fuzz", **base)
        RetrainingSchedule(stack, "Weekly", pipeline=pipeline,
                           **{"team": "fuzz", "expression": "rate(7 days)", **props})

    for name, hint in _hints(RetrainingSchedule.__init__).items():
        for value in bad_values(hint):
            outcomes.attempt("RetrainingSchedule", name, value, schedule, **{name: value})
    # An override of the gate's threshold out of its metric's range.
    for value in (85, -0.5, 1.01):
        outcomes.attempt("RetrainingSchedule.parameters", "MinValidationAccuracy", value,
                         schedule, parameters={"MinValidationAccuracy": value})
    outcomes.assert_none_slipped(least=60)


def test_no_registration_or_workload_field_takes_a_value_of_the_wrong_kind():
    outcomes = Outcomes()
    for field in dataclasses.fields(ModelRegistration):
        for value in bad_values(_hints(ModelRegistration.__init__)[field.name]):
            outcomes.attempt("ModelRegistration", field.name, value, ModelRegistration,
                             **{"model_package_group_name": "fuzz", field.name: value})
    base = {"name": "w", "framework": "pytorch", "model_family": "bert",
            "instance_type": "ml.g5.2xlarge", "instance_count": 1, "hours_per_run": 2.0,
            "runs_per_week": 3.0, "static_shapes": True, "precision": "bf16",
            "framework_version": "2.14"}
    WorkloadProfile(**base)  # the baseline is valid
    for field in dataclasses.fields(WorkloadProfile):
        for value in bad_values(_hints(WorkloadProfile.__init__)[field.name]):
            outcomes.attempt("WorkloadProfile", field.name, value, WorkloadProfile,
                             **{**base, field.name: value})
    for field, value in (("framework", "pytorh"), ("framework", "jax"),
                         ("framework_version", "2.7.0"), ("framework_version", "2.12.1"),
                         ("framework_version", "2.99"), ("region", "eu-cental-1")):
        outcomes.attempt("WorkloadProfile", field, value, WorkloadProfile,
                         **{**base, field: value})
    outcomes.assert_none_slipped(least=40)


# --- the plain data: cdk.json and the workload file -------------------------------------------

@pytest.fixture(scope="module")
def team() -> dict[str, Any]:
    """The reference platform's first team, with every nested entry."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    teams = context[platform.CONTEXT_KEY]
    return dict(teams["DocumentClassification"])


def test_no_cdk_json_key_takes_a_value_of_the_wrong_kind(team):
    outcomes = Outcomes()

    def build(config: dict[str, Any]) -> None:
        platform.TeamStack(cdk.App(), "Fuzz", team_config=config, base_dir=ROOT,
                           env=cdk.Environment(region="eu-west-1"))

    tables = {"": platform._PIPELINE_KEYS} | {
        f"{key}.": keys for key, (keys, _) in platform._NESTED.items()}
    for where, keys in tables.items():
        for key, kind in keys.items():
            for value in bad_values(kind):
                config = copy.deepcopy(team)
                entry = config.setdefault(where.rstrip("."), {}) if where else config
                entry[key] = value
                outcomes.attempt(f"cdk.json {where}", key, value, build, config)
    for key, value in (("framework", "pytorh"), ("framework_version", "2.12.1"),
                       ("framework_version", "2.7.0")):
        outcomes.attempt("cdk.json", key, value, build, {**team, key: value})
    outcomes.assert_none_slipped(least=60)


def test_no_workload_file_field_takes_a_value_of_the_wrong_kind(tmp_path):
    import yaml

    outcomes = Outcomes((cli.InputError,))  # the command's one line and exit 2
    (entry, *_) = yaml.safe_load((ROOT / "workloads.yaml").read_text())["workloads"]
    for key, hint in cli._HINTS.items():
        for value in bad_values(hint):
            path = tmp_path / "w.yaml"
            path.write_text(yaml.safe_dump({"workloads": [{**entry, key: value}]}))
            outcomes.attempt("workload", key, value, cli.load_workloads, path)
    outcomes.assert_none_slipped(least=25)
