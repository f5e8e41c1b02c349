"""Teams declared in ``cdk.json`` context: one stack per team, no Python to edit.

Keys are the `TrainingPipeline` prop names, so an error about a prop names the key to fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Duration, Stack, TimeZone

from compiled_training.image.runtime_image import BuildMode, RuntimeImage
from compiled_training.nag.acknowledgements import acknowledge
from compiled_training.nag.rule_pack import PACK
from compiled_training.pipelines.compiler import Compiler
from compiled_training.pipelines.compiler_benchmark import CompilerBenchmark
from compiled_training.pipelines.framework import Framework
from compiled_training.pipelines.job import Distribution, InputChannel, Parameter
from compiled_training.pipelines.registration import ModelRegistration
from compiled_training.pipelines.training_pipeline import TrainingPipeline
from compiled_training.schedules.retraining_schedule import RetrainingSchedule
from constructs import Construct

CONTEXT_KEY = "compiled-training:teams"

_REQUIRED = ("framework", "framework_version", "instance_type")
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "description": str,
    "transformers_version": str,
    "py_version": str,
    "compiler": str,
    "torch_compile_mode": str,
    "instance_count": int,
    "distribution": str,
    "source_dir": str,
    "entry_point": str,
    "hyperparameters": dict,
    "parameters": dict,
    "channels": dict,
    "volume_size_gib": int,
    "max_runtime_hours": (int, float),
    "spot": bool,
    "max_attempts": int,
    "debugger": bool,
    "profiler": bool,
    "schedule": dict,
    "runtime_image": dict,
    "benchmark": dict,
    "registration": dict,
}
# `CompilerBenchmark` props a team's ``benchmark`` entry may set; the rest comes from the team's
# pipeline (same framework, instances, code, data and hyperparameters).
_BENCHMARK_KEYS: dict[str, type | tuple[type, ...]] = {
    "compiler": str,
    "large_batch_size": int,
    "quality_metric": str,
    "speedup_threshold": (int, float),
    "quality_tolerance": (int, float),
    "spot": bool,
    "decision_parameter_name": str,
}
# `ModelRegistration` fields a team's ``registration`` entry may set (instance types as lists).
_REGISTRATION_KEYS: dict[str, type | tuple[type, ...]] = {
    "model_package_group_name": str,
    "existing_group": bool,
    "approval_status": str,
    "gate_metric": str,
    "gate_threshold": (int, float),
    "higher_is_better": bool,
    "max_regression": (int, float),
    "inference_image_uri": str,
    "realtime_instance_types": list,
    "transform_instance_types": list,
    "content_types": list,
    "response_types": list,
    "git_commit": str,
    "deployment_account": str,
}
_SCHEDULE_KEYS: dict[str, type | tuple[type, ...]] = {
    "expression": str,
    "time_zone": str,
    "parameters": dict,
    "flexible_window_minutes": int,
    "enabled": bool,
    "notify_on_success": bool,
}
COMPILERS = ("training-compiler", "torch-compile", "none")
FRAMEWORKS = ("pytorch", "huggingface", "xgboost")


class TeamConfigError(ValueError):
    pass


def pipeline_props(team: str, config: Mapping[str, Any], *, base_dir: Path) -> dict[str, Any]:
    """`TrainingPipeline` keyword arguments from one team's ``cdk.json`` entry."""

    def fail(key: str, message: str) -> TeamConfigError:
        return TeamConfigError(f"cdk.json {CONTEXT_KEY}.{team}.{key}: {message}")

    if not isinstance(config, Mapping):
        raise TeamConfigError(f"cdk.json {CONTEXT_KEY}.{team} must be an object, got {config!r}")
    for key in _REQUIRED:
        if key not in config:
            raise fail(key, "is required")
    _check_entry(fail, "", config, {**{k: str for k in _REQUIRED}, **_OPTIONAL},
                 allowed=", ".join(sorted([*_REQUIRED, *_OPTIONAL])))
    schedule = config.get("schedule")
    if schedule is not None:
        if "expression" not in schedule:
            raise fail("schedule.expression", "is required")
        _check_entry(fail, "schedule.", schedule, _SCHEDULE_KEYS)
    _check_entry(fail, "benchmark.", config.get("benchmark", {}), _BENCHMARK_KEYS)
    registration = config.get("registration")
    if registration is not None:
        if "model_package_group_name" not in registration:
            raise fail("registration.model_package_group_name", "is required")
        _check_entry(fail, "registration.", registration, _REGISTRATION_KEYS)
    try:
        return _props(config, base_dir)
    except KeyError as missing:
        raise fail(str(missing.args[0]), "is required") from None
    except (ValueError, TypeError) as error:
        raise _prefixed(team, error) from None


def _check_entry(fail: Callable[[str, str], TeamConfigError], where: str,
                 entry: Mapping[str, Any], types: Mapping[str, type | tuple[type, ...]],
                 allowed: str | None = None) -> None:
    """Every key known, every value of its type (a bool only where a bool is asked for:
    Python counts it as an int)."""
    for key, value in entry.items():
        expected = types.get(key)
        if expected is None:
            raise fail(f"{where}{key}", "is not a known key; allowed: "
                       + (allowed or ", ".join(types)))
        if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
            names = expected.__name__ if isinstance(expected, type) else "number"
            raise fail(f"{where}{key}", f"must be a {names}, got {value!r}")


def _props(config: Mapping[str, Any], base_dir: Path) -> dict[str, Any]:
    name = config["framework"]
    if name not in FRAMEWORKS:
        raise ValueError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {name!r}")
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

    compiler = _compiler("compiler", config.get("compiler", "none"),
                         config.get("torch_compile_mode", "default"))

    distribution = None
    if "distribution" in config:
        allowed = [d.value for d in Distribution]
        if config["distribution"] not in allowed:
            raise ValueError(f"distribution must be one of {', '.join(allowed)}, "
                             f"got {config['distribution']!r}")
        distribution = Distribution(config["distribution"])

    hyperparameters: dict[str, Any] = dict(config.get("hyperparameters", {}))
    for key, default in config.get("parameters", {}).items():
        hyperparameters[key] = _parameter(_pascal(key), default)
    channels = [
        InputChannel(name, Parameter.string(f"{_pascal(name)}DataUri", uri),
                     content_type="text/csv" if name != "model" and not framework.runs_script
                     else None)
        for name, uri in config.get("channels", {}).items()
    ]
    props: dict[str, Any] = {
        "framework": framework,
        "compiler": compiler,
        "instance_type": config["instance_type"],
        "instance_count": config.get("instance_count"),
        "distribution": distribution,
        "description": config.get("description"),
        "entry_point": config.get("entry_point"),
        "source_dir": base_dir / config["source_dir"] if "source_dir" in config else None,
        "hyperparameters": hyperparameters,
        "channels": channels,
        "volume_size_gib": config.get("volume_size_gib"),
        "spot": config.get("spot"),
        "max_attempts": config.get("max_attempts"),
        "debugger": config.get("debugger"),
        "profiler": config.get("profiler"),
    }
    if "max_runtime_hours" in config:
        props["max_runtime"] = Duration.minutes(round(60 * config["max_runtime_hours"]))
    if "registration" in config:
        props["registration"] = ModelRegistration(**config["registration"])
    return props


def benchmark_props(benchmark: Mapping[str, Any], pipeline: Mapping[str, Any],
                    torch_compile_mode: str = "default") -> dict[str, Any]:
    """`CompilerBenchmark` keyword arguments: the team's pipeline, on trial with a compiler.

    Arms run on demand unless ``benchmark.spot`` says otherwise: spot interruptions add to
    wall-clock time and would distort the comparison.
    """
    shared = ("framework", "instance_type", "instance_count", "entry_point", "source_dir",
              "hyperparameters", "channels", "volume_size_gib", "max_runtime", "max_attempts")
    props = {key: pipeline[key] for key in shared if pipeline.get(key) is not None}
    props["compiler"] = _compiler("benchmark.compiler",
                                  benchmark.get("compiler", "training-compiler"),
                                  torch_compile_mode)
    for key in ("large_batch_size", "quality_metric", "speedup_threshold", "quality_tolerance",
                "spot", "decision_parameter_name"):
        if key in benchmark:
            props[key] = benchmark[key]
    return props


def _compiler(key: str, name: str, torch_compile_mode: str) -> Compiler:
    if name not in COMPILERS:
        raise ValueError(f"{key} must be one of {', '.join(COMPILERS)}, got {name!r}")
    if name == "training-compiler":
        return Compiler.training_compiler()
    if name == "torch-compile":
        return Compiler.torch_compile(mode=torch_compile_mode)
    return Compiler.none()


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

    def __init__(self, scope: Construct, construct_id: str, *, team_config: Mapping[str, Any],
                 base_dir: Path, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        props = pipeline_props(construct_id, team_config, base_dir=base_dir)
        try:
            self.runtime_image = None
            if "runtime_image" in team_config:
                self.runtime_image = RuntimeImage(
                    self, "RuntimeImage", framework=props["framework"],
                    compiler=props["compiler"], instance_type=props["instance_type"],
                    **_runtime_image_props(team_config["runtime_image"]))
                props["runtime_image"] = self.runtime_image
            self.pipeline = TrainingPipeline(self, "Pipeline", **props)
            self.benchmark = None
            if "benchmark" in team_config:
                self.benchmark = CompilerBenchmark(
                    self, "Benchmark", **benchmark_props(
                        team_config["benchmark"], props,
                        team_config.get("torch_compile_mode", "default")))
            for pipeline in (self.pipeline, self.benchmark):
                if pipeline is None:
                    continue
                Annotations.of(pipeline).acknowledge_warning(
                    f"compiled-training:{type(pipeline).__name__}:NamedByPath",
                    "A team's stack fixes these construct ids in code; cdk.json cannot rename "
                    "them, so the derived pipeline names stay.")
                if pipeline.compiler.is_training_compiler:
                    # cdk-nag 3 fails a synth on any unacknowledged finding, informational too.
                    acknowledge(pipeline.resource, "CompiledTraining-CT9",
                                f"Team {construct_id} runs Training Compiler's last release on "
                                "purpose; the move to torch.compile is decided by a "
                                "CompilerBenchmark, not by this stack.", pack=PACK)
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
            raise ValueError(f"runtime_image.{key} must be one of {', '.join(choices)}, "
                             f"got {value!r}")
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
