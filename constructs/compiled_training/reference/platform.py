"""Teams declared in ``cdk.json`` context: one stack per team, no Python to edit.

Keys are the `TrainingPipeline` prop names, read off `TrainingPipelineProps` (and a
``benchmark`` entry's off `CompilerBenchmarkProps`), so an error about a prop names the key to
fix and a new prop is a key without an edit here. Props JSON holds as they are (strings,
numbers, booleans, objects, a str-valued enum by its value) are keys as they are; the few that
JSON cannot hold (a framework, a compiler, channels, a duration, the image) are keys of their
own below; props of CDK objects (a bucket, a key, a VPC) are not keys.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from aws_cdk import Annotations, Duration, Stack, TimeZone

from compiled_training.compilers import compiler_module, compiler_names
from compiled_training.image.runtime_image import BuildMode, RuntimeImage
from compiled_training.nag.rule_pack import PACK
from compiled_training.pipelines.compiler_benchmark import CompilerBenchmark
from compiled_training.pipelines.options import (
    CompilerBenchmarkProps,
    TrainingJobOptions,
    TrainingPipelineProps,
    prop_types,
)
from compiled_training.pipelines.registration import ModelRegistration
from compiled_training.pipelines.training_image import TrainingImage
from compiled_training.pipelines.training_pipeline import TrainingPipeline
from compiled_training.schedules.retraining_schedule import RetrainingSchedule
from compiled_training.typecheck import check_entry, prop_names, required_keys
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.values.job import BenchmarkArm, InputChannel, MetricDefinition, Parameter
from compiled_training.wiring.acknowledgements import acknowledge
from compiled_training.wiring.stack_reads import free_id
from compiled_training_runtime import contract
from constructs import Construct

CONTEXT_KEY = "compiled-training:teams"
# The CDK CLI prints a warning's id as 'Annotation::<id>'; Annotations.acknowledge_warning takes
# the id alone, so cdk.json takes either.
CLI_PREFIX = "Annotation::"

def _json_type(hint: Any) -> Any:
    """The type a prop of type ``hint`` has in JSON, or None where JSON cannot hold it."""
    if get_origin(hint) in (Union, types.UnionType):
        found = [t for t in map(_json_type, get_args(hint)) if t is not None]
        return found[0] if found else None
    origin = get_origin(hint) or hint
    if hint in (str, int, bool) or (isinstance(hint, type) and issubclass(hint, Enum)
                                    and issubclass(hint, str)):
        return str if issubclass(hint, str) else hint
    if hint is float:
        return float  # an int is a float here, as in the constructors' arguments
    # A collection is JSON where its items can be.
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return dict if _json_type(get_args(hint)[1]) else None
    if isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str:
        return list if _json_type(get_args(hint)[0]) else None
    return None


def _keys(props: type, skip: set[str]) -> dict[str, Any]:
    """The props of ``props`` that JSON holds as they are, with their JSON types."""
    return {name: json for name, hint in prop_types(props).items()
            if name not in skip and (json := _json_type(hint)) is not None}


def _enums(props: type) -> dict[str, type[Enum]]:
    """The str-valued enum props, which a team gives by value."""
    found = {}
    for name, hint in prop_types(props).items():
        members = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
        for member in members:
            if isinstance(member, type) and issubclass(member, Enum):
                found[name] = member
    return found


# Props a team gives in a form of its own (and the keys that make them up).
_TRANSLATED: dict[str, Any] = {
    "framework": str,
    "framework_version": str,
    "transformers_version": str,
    "py_version": str,
    "compiler": str,
    "compiler_options": dict,  # the compiler's options by name, as Compiler.named takes them
    "torch_compile_mode": str,  # torch.compile's mode, for the team's pipeline and benchmark
    "source_dir": str,  # relative to the app's folder
    "channels": dict,  # name -> S3 URI, each a parameter
    "parameters": dict,  # hyperparameters a schedule may override
    "max_runtime_hours": float,
    "runtime_image": dict,  # the image: a RuntimeImage built for the team
    "acknowledge_warnings": dict,  # warning id -> the team's reason
    "registration": dict,
    "metric_definitions": dict,  # metric name -> the regex that captures its value
    "schedule": dict,
    "benchmark": dict,
}
_REQUIRED = (*sorted(required_keys(TrainingPipelineProps)), "framework_version")
_PIPELINE_KEYS: dict[str, Any] = dict(sorted(
    {**_keys(TrainingPipelineProps, set(_TRANSLATED)), **_TRANSLATED}.items()))
_PIPELINE_ENUMS = {k: e for k, e in _enums(TrainingPipelineProps).items() if k in _PIPELINE_KEYS}
# A ``benchmark`` entry: the compiler on trial, spot, and the benchmark's own props; the rest
# comes from the team's pipeline (same framework, instances, code, data and hyperparameters).
_BENCHMARK_KEYS: dict[str, Any] = {
    "compiler": str,
    "compiler_options": dict,
    **_keys(CompilerBenchmarkProps, set(prop_names(TrainingJobOptions))),
    "spot": bool,
    "arms": list,  # BenchmarkArm entries, below
}
# A ``benchmark.arms`` entry: a `BenchmarkArm`, its compiler by name and options, its framework
# the team's on another PyTorch version (a Neuron image's), ``precompile`` for ``neuron-xla``.
_ARM_KEYS: dict[str, Any] = {
    "name": str,
    "compiler": str,
    "compiler_options": dict,
    "instance_type": str,
    "instance_count": int,
    "framework_version": str,
    "precompile": bool,
    "hyperparameters": dict,  # over the team's, for the arm's accelerator
}
_ARM_REQUIRED = ("name", "compiler", "instance_type")
_BENCHMARK_ENUMS = {k: e for k, e in _enums(CompilerBenchmarkProps).items()
                    if k in _BENCHMARK_KEYS}
# The pipeline's props a benchmark does not take from it: it names, describes and distributes
# its arms itself and runs on demand unless told otherwise; its compiler is the one on trial.
_NOT_SHARED = {"compiler", "distribution", "description", "spot", "pipeline_name"}
# `ModelRegistration` fields a team's ``registration`` entry may set (instance types as lists).
_REGISTRATION_KEYS: dict[str, Any] = {
    "model_package_group_name": str,
    "existing_group": bool,
    "approval_status": str,
    "gate_metric": str,
    "gate_threshold": float,
    "higher_is_better": bool,
    "max_regression": float,
    "inference_image_uri": str,
    "realtime_instance_types": list,
    "transform_instance_types": list,
    "content_types": list,
    "response_types": list,
    "git_commit": str,
    "deployment_account": str,
}
_SCHEDULE_KEYS: dict[str, Any] = {
    "expression": str,
    "time_zone": str,
    "parameters": dict,
    "flexible_window_minutes": int,
    "enabled": bool,
    "notify_on_success": bool,
}
# The objects a team's entry nests, with their keys and the ones each requires.
_NESTED: dict[str, tuple[Mapping[str, Any], tuple[str, ...]]] = {
    "schedule": (_SCHEDULE_KEYS, ("expression",)),
    "benchmark": (_BENCHMARK_KEYS, ()),
    "registration": (_REGISTRATION_KEYS, ("model_package_group_name",)),
}
FRAMEWORKS = ("pytorch", "huggingface", "xgboost")


class TeamConfigError(ValueError):
    pass


def pipeline_props(team: str, config: Mapping[str, Any], *, base_dir: Path) -> dict[str, Any]:
    """`TrainingPipeline` keyword arguments from one team's ``cdk.json`` entry."""
    subject = f"cdk.json {CONTEXT_KEY}.{team}"

    def check(entry: Any, keys: Mapping[str, Any], where: str = "",
              required: Sequence[str] = ()) -> None:
        check_entry(entry, keys, subject, where=where, required=required,
                    error=TeamConfigError)

    check(config, _PIPELINE_KEYS, required=_REQUIRED)
    for key, (keys, required) in _NESTED.items():
        if key in config:
            check(config[key], keys, f"{key}.", required)
    for index, arm in enumerate(config.get("benchmark", {}).get("arms", [])):
        check(arm, _ARM_KEYS, f"benchmark.arms[{index}].", _ARM_REQUIRED)
    for warning, reason in config.get("acknowledge_warnings", {}).items():
        if not warning.removeprefix(CLI_PREFIX).startswith("compiled-training:") or \
                not isinstance(reason, str) or not reason.strip():
            raise TeamConfigError(
                f"{subject}: acknowledge_warnings.{warning} must map a compiled-training "
                f"warning id (as the warning names it, 'compiled-training:...') to the reason, "
                f"got {reason!r}")
    try:
        return _props(config, base_dir)
    except KeyError as missing:
        raise TeamConfigError(f"{subject}: {missing.args[0]} is required") from None
    except (ValueError, TypeError) as error:
        raise _prefixed(team, error) from None


def _props(config: Mapping[str, Any], base_dir: Path) -> dict[str, Any]:
    name = config["framework"]
    if name not in FRAMEWORKS:
        raise ValueError(contract.not_one_of("framework", name, FRAMEWORKS))
    version = config["framework_version"]
    if name == "pytorch":
        framework = Framework.pytorch(version, py_version=config.get("py_version"))
    elif name == "huggingface":
        framework = Framework.huggingface(
            config["transformers_version"], pytorch_version=version,
            py_version=config.get("py_version"),
        )
    else:
        framework = Framework.xgboost(version)

    compiler = _compiler("", config.get("compiler", "none"), config)

    hyperparameters: dict[str, Any] = dict(config.get("hyperparameters", {}))
    for key, default in config.get("parameters", {}).items():
        hyperparameters[key] = _parameter(_pascal(key), default)
    channels = [
        InputChannel(name, Parameter.string(f"{_pascal(name)}DataUri", uri),
                     content_type="text/csv" if name != "model" and not framework.runs_script
                     else None)
        for name, uri in config.get("channels", {}).items()
    ]
    props: dict[str, Any] = {key: config[key] for key in _PIPELINE_KEYS
                             if key in config and key not in _TRANSLATED}
    props.update(_enum_values(config, _PIPELINE_ENUMS))
    props.update(framework=framework, compiler=compiler, hyperparameters=hyperparameters,
                 channels=channels)
    if "source_dir" in config:
        props["source_dir"] = base_dir / config["source_dir"]
    if "max_runtime_hours" in config:
        props["max_runtime"] = Duration.minutes(round(60 * config["max_runtime_hours"]))
    if "registration" in config:
        props["registration"] = ModelRegistration(**config["registration"])
    if "metric_definitions" in config:
        props["metric_definitions"] = [MetricDefinition(name, regex) for name, regex
                                       in config["metric_definitions"].items()]
    return props


def benchmark_props(benchmark: Mapping[str, Any], pipeline: Mapping[str, Any],
                    team: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`CompilerBenchmark` keyword arguments: the team's pipeline, on trial with a compiler.

    Arms run on demand unless ``benchmark.spot`` says otherwise: spot interruptions add to
    wall-clock time and would distort the comparison. A compiler's own keys the ``team``
    entry gives (``torch_compile_mode``) hold for the benchmark's compilers too.
    """
    team = team or {}
    props = {key: value for key, value in pipeline.items()
             if key in prop_names(TrainingJobOptions) and key not in _NOT_SHARED
             and value is not None}
    if "compiler" in benchmark:  # else CompilerBenchmark's own default
        props["compiler"] = _compiler("benchmark.", benchmark["compiler"], benchmark, team)
    props.update({key: value for key, value in benchmark.items()
                  if key not in ("compiler", "compiler_options", "arms")})
    props.update(_enum_values(benchmark, _BENCHMARK_ENUMS, "benchmark."))
    if "arms" in benchmark:
        props["arms"] = [_arm(f"benchmark.arms[{index}]", arm, pipeline["framework"], team)
                         for index, arm in enumerate(benchmark["arms"])]
    return props


def _arm(where: str, arm: Mapping[str, Any], framework: Framework,
         team: Mapping[str, Any]) -> BenchmarkArm:
    compiler = _compiler(f"{where}.", arm["compiler"], arm, team)
    version = arm.get("framework_version")
    return BenchmarkArm(arm["name"], compiler, arm["instance_type"],
                        arm.get("instance_count", 1),
                        Framework.pytorch(version) if version else framework,
                        hyperparameters=arm.get("hyperparameters"))


def _enum_values(config: Mapping[str, Any], enums: Mapping[str, type[Enum]],
                 where: str = "") -> dict[str, Enum]:
    """The enum props a team gives by value, as their enums."""
    values = {}
    for key, enum in enums.items():
        if key in config:
            allowed = [member.value for member in enum]
            if config[key] not in allowed:
                raise ValueError(contract.not_one_of(f"{where}{key}", config[key], allowed))
            values[key] = enum(config[key])
    return values


def _compiler(where: str, name: str, entry: Mapping[str, Any],
              team: Mapping[str, Any] | None = None) -> Compiler:
    """The compiler an entry names (``where`` prefixes its keys), with the options its
    ``compiler_options`` gives and its compiler's own keys (``torch_compile_mode``), from the
    entry or the ``team`` entry. A compiler's own key set on the entry for another fails."""
    module = compiler_module(name, f"{where}compiler")
    for key, value in entry.items():
        takers = [repr(other) for other in compiler_names()
                  if key in compiler_module(other).config_keys]
        if team is not None and value and takers and key not in module.config_keys:
            raise ValueError(f"{where}{key} is for compiler {' or '.join(takers)}, got {name!r}")
    options = {option: scope[key] for scope in (team or {}, entry)
               for key, option in module.config_keys.items() if key in scope}
    options.update(entry.get("compiler_options", {}))
    try:
        return Compiler.named(name, **options)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}compiler_options: {error}") from None


def schedule_props(schedule: Mapping[str, Any]) -> dict[str, Any]:
    """`RetrainingSchedule` keyword arguments from a team's ``schedule`` entry."""
    time_zone = schedule.get("time_zone")
    window = schedule.get("flexible_window_minutes")
    return {
        "expression": schedule["expression"],
        "time_zone": TimeZone.of(time_zone) if time_zone else None,
        "parameters": schedule.get("parameters"),
        "flexible_window": Duration.minutes(window) if window else None,
        "enabled": schedule.get("enabled"),
        "notify_on_success": schedule.get("notify_on_success"),
    }


class TeamStack(Stack):
    """One team's stack: its training pipeline (and, with a ``benchmark`` entry, a
    `CompilerBenchmark` of it), from its ``cdk.json`` entry."""

    runtime_image: RuntimeImage | None
    """The team's image, with a ``runtime_image`` entry."""
    pipeline: TrainingPipeline
    benchmark: CompilerBenchmark | None
    """With a ``benchmark`` entry."""
    schedule: RetrainingSchedule | None
    """With a ``schedule`` entry."""

    def __init__(self, scope: Construct, construct_id: str, *, team_config: Mapping[str, Any],
                 base_dir: Path, **kwargs: Any) -> None:
        free_id(scope, construct_id, "TeamStack")
        super().__init__(scope, construct_id, **kwargs)
        props = pipeline_props(construct_id, team_config, base_dir=base_dir)
        try:
            self.runtime_image = None
            if "runtime_image" in team_config:
                self.runtime_image = RuntimeImage(
                    self, "RuntimeImage", framework=props["framework"],
                    compiler=props["compiler"], instance_type=props["instance_type"],
                    **_runtime_image_props(team_config["runtime_image"]))
                props["image"] = TrainingImage.from_runtime_image(self.runtime_image)
            self.pipeline = TrainingPipeline(self, "Pipeline", **props)
            self.benchmark = None
            if "benchmark" in team_config:
                self.benchmark = CompilerBenchmark(
                    self, "Benchmark", **benchmark_props(team_config["benchmark"], props,
                                                         team_config))
            for pipeline in (self.pipeline, self.benchmark):
                if pipeline is None:
                    continue
                Annotations.of(pipeline).acknowledge_warning(
                    f"compiled-training:{type(pipeline).__name__}:NamedByPath",
                    "A team's stack fixes these construct ids in code; cdk.json cannot rename "
                    "them, so the derived pipeline names stay.")
                # cdk-nag 3 fails a synth on any unacknowledged finding, informational too.
                for rule, reason in pipeline.compiler.module.acknowledged_when_chosen.items():
                    acknowledge(pipeline.resource, f"{PACK}-{rule}",
                                f"Team {construct_id} {reason}", pack=PACK)
            for warning, reason in team_config.get("acknowledge_warnings", {}).items():
                Annotations.of(self).acknowledge_warning(warning.removeprefix(CLI_PREFIX), reason)
            self.schedule = None
            if "schedule" in team_config:
                self.schedule = RetrainingSchedule(
                    self, "Schedule", pipeline=self.pipeline, team=construct_id,
                    **schedule_props(team_config["schedule"]))
        except (ValueError, TypeError) as error:
            raise _prefixed(construct_id, error) from None


def _prefixed(team: str, error: ValueError | TypeError) -> Exception:
    """The error with the team's cdk.json entry named first; a wrong type stays a TypeError."""
    message = f"cdk.json {CONTEXT_KEY}.{team}: {error}"
    return TypeError(message) if isinstance(error, TypeError) else TeamConfigError(message)


def _runtime_image_props(config: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"build_mode": [m.value for m in BuildMode], "repository_name": None}
    for key, value in config.items():
        if key not in allowed:
            raise ValueError(f"runtime_image.{key} is not a known key; allowed: "
                             f"{', '.join(allowed)}")
        choices = allowed[key]
        if choices is not None and value not in choices:
            raise ValueError(contract.not_one_of(f"runtime_image.{key}", value, choices))
    props: dict[str, Any] = {"repository_name": config.get("repository_name")}
    if "build_mode" in config:
        props["build_mode"] = BuildMode(config["build_mode"])
    return props


def _parameter(name: str, default: Any) -> Parameter:
    if isinstance(default, bool):
        return Parameter.boolean(name, default)
    if isinstance(default, int):
        return Parameter.integer(name, default)
    if isinstance(default, float):
        return Parameter.float(name, default)
    return Parameter.string(name, str(default))


def _pascal(key: str) -> str:
    return "".join(part.capitalize() for part in key.replace("-", "_").split("_"))
