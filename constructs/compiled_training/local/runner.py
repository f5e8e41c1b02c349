"""One execution of a pipeline definition on this machine, in dependency order, with the
report people read: a line a step as it starts and ends, then each step's outcome."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from compiled_training import tables
from compiled_training.local.assembly import RunInputError
from compiled_training.local.expressions import (
    Context,
    StepFailed,
    Unsupported,
    condition_holds,
    text,
)
from compiled_training.local.for_each import BODY_STEP, run_for_each
from compiled_training.local.images import CUSTOM, classify, shown
from compiled_training.local.run import Run
from compiled_training.local.steps import refusals, run_step

# Settings that only configure AWS around a step: listed for the steps that ran, not emulated.
NOT_EMULATED = ("DebugHookConfig", "DebugRuleConfigurations", "ProfilerConfig",
                "ProfilerRuleConfigurations", "EnableSageMakerMetricsTimeSeries", "Tags",
                "VpcConfig", "NetworkConfig", "OutputDataConfig.KmsKeyId",
                "ResourceConfig.VolumeKmsKeyId", "ProcessingResources.ClusterConfig.VolumeKmsKeyId",
                "EnableManagedSpotTraining", "EnableInterContainerTrafficEncryption",
                "EnableNetworkIsolation", "RetryPolicies", "CacheConfig")
SUCCEEDED, FAILED, SKIPPED, GIVEN, NOT_REACHED = (
    "Succeeded", "Failed", "Skipped", "Given", "Not reached")


@dataclass
class StepOutcome:
    name: str
    type: str
    status: str
    """Succeeded, Failed, Skipped (a branch not taken), Given (from --outputs) or Not reached
    (after a failure)."""
    seconds: float = 0.0
    outputs: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    image: str = ""
    """The image the job stood in for (Training and Processing)."""
    compile_cache: dict[str, Any] = field(default_factory=dict)
    """The warm start's summary (state, graphs loaded and compiled, seconds), where it ran."""


@dataclass
class Report:
    pipeline: str
    execution: str
    steps: list[StepOutcome] = field(default_factory=list)
    status: str = "Executing"
    failure: str = ""
    notes: list[str] = field(default_factory=list)
    not_emulated: list[str] = field(default_factory=list)

    named: str = ""
    """Where the pipeline's name came from, when not from the definition's own."""

    def as_json(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "named": self.named, "execution": self.execution,
                "status": self.status,
                "failure": self.failure, "notes": self.notes, "not_emulated": self.not_emulated,
                "steps": [vars(step) for step in self.steps]}

    def table(self) -> str:
        rows = [(step.name, step.type, step.status, f"{step.seconds:.1f}", step.image or "-",
                 step.reason or _summary(step.outputs)) for step in self.steps]
        lines = [tables.columns(("step", "type", "status", "seconds", "image", "outputs"), rows)]
        lines.append("")
        lines.append(f"pipeline {self.pipeline}" + (f" ({self.named})" if self.named else ""))
        lines.append(f"execution {self.execution}: {self.status}"
                     + (f": {self.failure}" if self.failure else ""))
        lines += [f"  {step.name}: compile cache {cache_line(step.compile_cache)}"
                  for step in self.steps if step.compile_cache]
        lines += [f"  note: {note}" for note in self.notes]
        if self.not_emulated:
            lines.append(f"  not emulated here (they configure AWS around a step): "
                         f"{', '.join(self.not_emulated)}")
        return "\n".join(lines)


def cache_line(summary: Mapping[str, Any]) -> str:
    """``warm: 3 graphs loaded, 0 compiled, 1.2 s compiling``, or ``off: <why>``."""
    if summary.get("state") == "off":
        return f"off: {summary.get('why', '')}"
    seconds = summary.get("compile_seconds")
    return (f"{summary.get('state')}: {summary.get('graphs_loaded', 0)} graphs loaded, "
            f"{summary.get('graphs_compiled', 0)} compiled"
            + (f", {seconds} s compiling" if seconds is not None else ""))


def _summary(outputs: Mapping[str, Any]) -> str:
    parts = []
    for metric in outputs.get("FinalMetricDataList", {}).values():
        parts.append(f"{metric['MetricName']}={metric['Value']:g}")
    for key, value in outputs.get("OutputParameters", {}).items():
        parts.append(f"{key}={value}")
    for key in ("ModelPackageArn", "Outcome"):
        if key in outputs:
            parts.append(f"{key}={outputs[key]}")
    for name, document in outputs.get("PropertyFiles", {}).items():
        verdict = document.get("decision", {}).get("verdict") if isinstance(document, dict) \
            else None
        parts.append(f"{name}: verdict {verdict}" if verdict else f"property file {name}")
    return ", ".join(parts)


def execute(definition: Mapping[str, Any], pipeline_name: str, parameters: dict[str, Any],
            run: Run, say: Callable[[str], None]) -> Report:
    """Runs every step the definition reaches; never raises for a step's failure."""
    execution = uuid.uuid4().hex[:12]  # every execution its own, as on SageMaker
    run.execution = execution
    pipeline_arn = f"{run.arn('sagemaker')}:pipeline/{pipeline_name.lower()}"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    context = Context(parameters, {
        "PipelineExecutionId": execution, "PipelineName": pipeline_name,
        "PipelineArn": pipeline_arn, "PipelineExecutionArn": f"{pipeline_arn}/execution/"
                                                            f"{execution}",
        "StartDateTime": now, "CurrentDateTime": now}, unmatched_metrics=run.unmatched_metrics)
    report = Report(pipeline_name, execution)
    steps = list(definition.get("Steps", []))
    try:
        _run_steps(steps, context, run, report, say)
        report.status = SUCCEEDED
    except StepFailed as failure:
        report.status, report.failure = FAILED, str(failure)
    seen = {outcome.name for outcome in report.steps}
    # A ForEach body step ran as its children, <step>-<index>.
    bodies = {str(child["Name"]) for step in all_steps(steps) if step.get("Type") == "ForEach"
              for child in step["Arguments"].get("ForEachBody", [])}
    seen |= {body for body in bodies if any(re.fullmatch(rf"{re.escape(body)}-\d+", name)
                                            for name in seen)}
    report.steps += [StepOutcome(str(s["Name"]), str(s["Type"]), NOT_REACHED)
                     for s in all_steps(steps) if str(s["Name"]) not in seen]
    ran = {outcome.name for outcome in report.steps if outcome.status in (SUCCEEDED, FAILED)}
    report.not_emulated = sorted({setting for step in all_steps(steps)
                                  if str(step["Name"]) in ran for setting in _settings(step)})
    report.notes = run.notes
    return report


def _run_steps(steps: list[Mapping[str, Any]], context: Context, run: Run, report: Report,
               say: Callable[[str], None]) -> None:
    for step in _ordered(steps):
        name, kind = str(step["Name"]), str(step["Type"])
        say(f"{name} ({kind}): started")
        began = time.monotonic()
        outcome = StepOutcome(name, kind, "Executing")
        report.steps.append(outcome)
        given = run.outputs.get(name, run.outputs.get(str(step.get(BODY_STEP, ""))))
        if given is not None:  # a ForEach body step's are every iteration's
            outcome.status, outcome.outputs = GIVEN, given
            context.steps[name] = outcome.outputs
            say(f"{name} ({kind}): given with --outputs, not run")
            continue
        try:
            if kind == "ForEach":
                outcome.outputs = run_for_each(step, context, lambda children: _run_steps(
                    children, context, run, report, say), run.notes)
                context.steps[name] = outcome.outputs
            elif kind == "Condition":
                outputs, branch = _condition(step, context)
                outcome.outputs = outputs
                taken, skipped = branch
                for other in all_steps(skipped):
                    report.steps.append(StepOutcome(str(other["Name"]), str(other["Type"]),
                                                    SKIPPED, reason=f"{name} took the other "
                                                                      f"branch"))
            else:
                outcome.image = _image(step)
                outcome.outputs = run_step(step, context, run)
                outcome.compile_cache = run.compile_caches.get(name, {})
                context.steps[name] = outcome.outputs
        except Unsupported as unsupported:  # found only as the step ran: fails it, reported
            failure = StepFailed(f"not supported here: {unsupported}")
            outcome.status, outcome.reason = FAILED, str(failure)
            outcome.seconds = time.monotonic() - began
            say(f"{name} ({kind}): Failed: {failure}")
            raise StepFailed(f"step {name} failed: {failure}") from None
        except StepFailed as failure:
            outcome.status, outcome.reason = FAILED, str(failure)
            outcome.seconds = time.monotonic() - began
            say(f"{name} ({kind}): Failed after {outcome.seconds:.1f} s: {failure}")
            raise StepFailed(f"step {name} failed: {failure}") from None
        outcome.status, outcome.seconds = SUCCEEDED, time.monotonic() - began
        say(f"{name} ({kind}): Succeeded in {outcome.seconds:.1f} s")
        if kind == "Condition":
            context.steps[name] = outcome.outputs
            _run_steps(list(taken), context, run, report, say)


def _image(step: Mapping[str, Any]) -> str:
    """The image a Training or Processing job stands in for, as the report names it; the
    team's own marked so (it runs as the PyTorch images' script mode)."""
    arguments = step.get("Arguments", {})
    uri = arguments.get("AlgorithmSpecification", {}).get("TrainingImage") or \
        arguments.get("AppSpecification", {}).get("ImageUri")
    if not isinstance(uri, str):
        return ""
    return shown(uri) + (" (custom)" if classify(uri, script_mode=True).kind == CUSTOM else "")


def _condition(step: Mapping[str, Any], context: Context
               ) -> tuple[dict[str, Any], tuple[list[Any], list[Any]]]:
    name = str(step["Name"])
    arguments = step["Arguments"]
    results = [condition_holds(c, context, f"step {name}: Conditions[{i}]")
               for i, c in enumerate(arguments.get("Conditions", []))]
    outcome = all(results)
    branches = (list(arguments.get("IfSteps", [])), list(arguments.get("ElseSteps", [])))
    taken = branches if outcome else branches[::-1]
    shown = [_shown_condition(c, context, name) for c in arguments.get("Conditions", [])]
    return ({"Outcome": outcome, "Evaluated": "; ".join(shown)}, taken)


def _shown_condition(condition: Mapping[str, Any], context: Context, name: str) -> str:
    kind = condition.get("Type")
    if "LeftValue" in condition:
        left = context.evaluate(condition["LeftValue"], name)
        right = context.evaluate(condition["RightValue"], name)
        return f"{text(left)} {kind} {text(right)}"
    return str(kind)


def _ordered(steps: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Dependency order (data references and DependsOn), the definition's order otherwise:
    parallel branches run one after the other."""
    names = {str(s["Name"]) for s in steps}
    needs = {str(s["Name"]): (depends_on(s) | _references(s)) & names for s in steps}
    ordered: list[Mapping[str, Any]] = []
    done: set[str] = set()
    while len(ordered) < len(steps):
        ready = [s for s in steps if str(s["Name"]) not in done and needs[str(s["Name"])] <= done]
        if not ready:
            raise Unsupported("the steps depend on each other in a cycle")
        ordered.append(ready[0])
        done.add(str(ready[0]["Name"]))
    return ordered


def depends_on(step: Mapping[str, Any]) -> set[str]:
    """The steps a step's ``DependsOn`` names: a name, or SDK v3's ``{"Step": name, "Trigger":
    ...}`` (a run condition other than ``Completed`` is refused before the run,
    `steps.refusals`)."""
    return {str(entry.get("Step")) if isinstance(entry, Mapping) else str(entry)
            for entry in step.get("DependsOn", [])}


def _references(step: Mapping[str, Any]) -> set[str]:
    """The steps a step reads (``Steps.X``), and those a Cleanup step cleans up after."""
    arguments = step.get("Arguments", {})
    cleaned = {str(source.get("StepName")) for source in arguments.get("Resources", {}).get(
        "S3", [])} if step.get("Type") == "Cleanup" else set()
    return set(re.findall(r'"Steps\.([^."]+)', json.dumps(arguments))) | cleaned


def all_steps(steps: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every step, those in conditions' branches and ForEach bodies included."""
    for step in steps:
        yield step
        arguments = step.get("Arguments", {})
        if step.get("Type") == "Condition":
            yield from all_steps(list(arguments.get("IfSteps", [])) +
                                 list(arguments.get("ElseSteps", [])))
        elif step.get("Type") == "ForEach":
            yield from all_steps(list(arguments.get("ForEachBody", [])))


def check_structure(steps: list[Mapping[str, Any]]) -> None:
    """What the runner's order needs of a definition: named, typed, unique steps, and no step
    outside a condition that needs one of its branches' steps."""
    names: list[str] = []
    for step in all_steps(steps):
        if not isinstance(step, Mapping) or "Name" not in step or "Type" not in step:
            raise RunInputError(f"not a pipeline step (no Name or Type): {str(step)[:80]}")
        names.append(str(step["Name"]))
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise RunInputError(f"step names must be unique, got {', '.join(twice)} more than once")
    for step in all_steps(steps):
        missing = sorted(depends_on(step) - set(names))
        if missing:  # SageMaker refuses it at CreatePipeline, as v3's FailStep docstring says
            raise RunInputError(f"step {step['Name']} depends on {', '.join(missing)}, which the "
                                f"pipeline does not have: SageMaker refuses this definition; "
                                f"name steps it has in DependsOn")
    _check_iteration_names(steps, names)
    failing = {str(step["Name"]) for step in all_steps(steps) if step.get("Type") == "Fail"}
    for step in all_steps(steps):
        # SageMaker refuses it at CreatePipeline ("CondStep can not depends on FailStep").
        for needed in sorted(depends_on(step) & failing):
            raise RunInputError(f"step {step['Name']} depends on {needed}, a Fail step: SageMaker "
                                f"refuses this definition (a Fail step ends the execution); "
                                f"drop {needed} from its DependsOn")
    top = {str(step["Name"]) for step in steps}
    for step in steps:
        needs = (depends_on(step) | _references(step)) & set(names)
        own = {str(s["Name"]) for s in all_steps([step])}  # a ForEach body reads its own steps
        inside = sorted(needs - top - own)
        if inside and step.get("Type") != "Condition":
            raise Unsupported(f"step {step['Name']} needs {', '.join(inside)}, which runs only "
                              f"in a condition's branch: not supported locally")


def _check_iteration_names(steps: list[Mapping[str, Any]], names: list[str]) -> None:
    """No step may take the name an iteration of a ForEach body step runs under
    (``<body step>-<index>``): their properties would be one."""
    for step in all_steps(steps):
        if step.get("Type") != "ForEach":
            continue
        for body in step["Arguments"].get("ForEachBody", []):
            pattern = re.compile(rf"{re.escape(str(body['Name']))}-\d+")
            clash = sorted(name for name in names if pattern.fullmatch(name))
            if clash:
                raise RunInputError(f"step {clash[0]} has the name iteration "
                                    f"{clash[0].rsplit('-', 1)[1]} of ForEach step "
                                    f"{step['Name']}'s body step {body['Name']} runs under; "
                                    f"rename it")


def _settings(step: Mapping[str, Any]) -> list[str]:
    found = []
    for setting in NOT_EMULATED:
        *parents, key = setting.split(".")
        holder: Any = step.get("Arguments", {})
        for parent in parents:
            holder = holder.get(parent, {}) if isinstance(holder, Mapping) else {}
        if isinstance(holder, Mapping) and key in holder or not parents and key in step:
            found.append(f"{step['Name']}.{setting}")
    return found


def refuse_early(steps: list[Mapping[str, Any]], run: Run, given: Collection[str]) -> None:
    """Every step that cannot run here (and is not ``given`` with --outputs), refused in one
    line before anything runs."""
    check_structure(steps)
    found = refusals(all_steps(steps), run, given)
    if found:
        raise Unsupported("; ".join(found))
