"""``compiled-training run``: a synthesized pipeline, executed on this machine.

    compiled-training run [cdk.out] --pipeline ID [--param NAME=VALUE]...
                          [--data S3_URI=LOCAL_DIR]... [--set STEP.HYPERPARAMETER=VALUE]...
                          [--outputs STEP=FILE]... [--python [KIND=]PYTHON]...
                          [--processes N] [--workdir DIR] [--fresh] [--no-roles] [--json FILE]
    compiled-training run --definition FILE [--name NAME] [--lambda STEP=DIR:MODULE.FUNCTION]...

Exit 0 when the execution succeeds, 1 when it fails (naming the step and its reason), 2 on
bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from compiled_training.catalog.aws_names import s3_uri_problem
from compiled_training.definition.compile_cache import CACHE_FOLDERS
from compiled_training.definition.registration import gate_thresholds, threshold_problem
from compiled_training.local.assembly import (
    LOCAL_ACCOUNT,
    LOCAL_REGION,
    AssemblyPipeline,
    RunInputError,
    definition_file,
    json_file,
    pick,
    read_assembly,
)
from compiled_training.local.aws import (
    REGISTRY_FILE,
    SSM_FILE,
    carry,
    delete,
    dump,
    endpoint,
    ensure_bucket,
    local_aws,
    restore,
    seed,
)
from compiled_training.local.container import isolation_problem
from compiled_training.local.expressions import Unsupported, parameter_values
from compiled_training.local.images import KINDS
from compiled_training.local.roles import Roles, read_roles
from compiled_training.local.run import DEFAULT_IMAGE, Handler, Run
from compiled_training.local.runner import all_steps, check_structure, execute, refuse_early

USAGE_ERROR = 2


def parser() -> argparse.ArgumentParser:
    run = argparse.ArgumentParser(prog="compiled-training run", description=__doc__.split(
        "\n")[0].replace("``", ""))
    run.add_argument("assembly", nargs="?", default="cdk.out", type=Path,
                     help="a synthesized cloud assembly (default: cdk.out)")
    run.add_argument("--pipeline", help="pipeline name, construct path or logical id")
    run.add_argument("--definition", type=Path,
                     help="a pipeline definition JSON file instead of an assembly")
    run.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    run.add_argument("--data", action="append", default=[], metavar="S3_URI=LOCAL_DIR",
                     help="what the run's S3 holds at that URI: the folder's files")
    run.add_argument("--set", action="append", default=[], dest="overrides",
                     metavar="STEP.HYPERPARAMETER=VALUE",
                     help="a training step's hyperparameter, for this run only")
    run.add_argument("--outputs", action="append", default=[], metavar="STEP=FILE",
                     help="a step's properties (JSON) instead of running it")
    run.add_argument("--python", action="append", default=[], metavar="[KIND=]PYTHON",
                     help=f"the Python that stands in for the images (default: this one), or "
                          f"for one kind of image: {', '.join(KINDS)}")
    run.add_argument("--lambda", action="append", default=[], dest="handlers",
                     metavar="STEP=DIR:MODULE.FUNCTION",
                     help="a Lambda step's code: its folder and handler")
    run.add_argument("--name", help="the pipeline's name in a --definition run (default: the "
                                    "file's PipelineName, else its stem)")
    run.add_argument("--processes", type=int, default=1,
                     help="GPUs each training instance stands in with (default 1)")
    run.add_argument("--workdir", type=Path, help="where steps, logs and S3 go (default: a "
                                                  "new folder under the system's temp folder)")
    run.add_argument("--fresh", action="store_true",
                     help="start without the last run's S3, model registry and SSM parameters "
                          "in this --workdir (its compile caches too)")
    run.add_argument("--no-roles", action="store_true",
                     help="do not check the jobs' S3 and KMS calls against each step role's "
                          "policies and the stack's bucket and key policies (checked by "
                          "default from an assembly; a --definition run is never checked)")
    run.add_argument("--json", type=Path, dest="json_path", metavar="FILE",
                     help="also write the report here, as JSON")
    return run


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        return _run(args)
    except (RunInputError, Unsupported) as error:
        print(f"compiled-training run: {error}", file=sys.stderr)
        return USAGE_ERROR
    except (BotoCoreError, ClientError) as error:  # the stand-in AWS refused the runner itself
        print(f"compiled-training run: the stand-in AWS refused a call of the runner's: {error}",
              file=sys.stderr)
        return USAGE_ERROR


@dataclass(frozen=True)
class Request:
    """A run as the command line asks for it, every part checked."""

    definition: dict[str, Any]
    name: str
    named: str
    """Where the name came from, when not from the pipeline itself."""
    pipeline: AssemblyPipeline | None
    parameters: dict[str, Any]
    data: dict[str, Path]
    overrides: dict[str, dict[str, str]]
    outputs: dict[str, dict[str, Any]]
    pythons: dict[str, str]
    handlers: dict[str, Handler]


def _run(args: argparse.Namespace) -> int:
    request = _request(args)
    pipeline = request.pipeline
    stack = pipeline.stack if pipeline else None
    isolation = isolation_problem()
    run = Run(Path(), request.pythons, args.processes, None, stack,
              stack.account if stack else LOCAL_ACCOUNT,
              stack.region if stack else _images_region(request.definition),
              isolated=isolation is None, overrides=request.overrides, outputs=request.outputs,
              handlers=request.handlers)
    refuse_early(request.definition.get("Steps", []), run, request.outputs)
    if isolation:
        print(f"compiled-training run: jobs cannot get their own /opt/ml here ({isolation}), "
              f"so training runs through SAGEMAKER_BASE_DIR and a script that names /opt/ml "
              f"itself fails, and /tmp, /var/tmp and /dev/shm are this machine's, shared by "
              f"the jobs. Run as root, or allow unprivileged user namespaces, to lift this.",
              file=sys.stderr)
    run.workdir = workdir = _workdir(args.workdir, fresh=args.fresh)
    run.roles = read_roles(stack) if stack and not args.no_roles else None
    with local_aws(run.account, run.region) as s3, endpoint(run.roles) as url:
        run.s3, run.endpoint = s3, url
        # The last run's S3 first: this run's code and --data land over it, each --data
        # prefix holding what its folder holds now.
        objects, caches = carry(s3, workdir / EARLIER_S3, CACHE_FOLDERS)
        versions = restore(workdir)
        for bucket in stack.buckets() if stack else []:
            ensure_bucket(s3, bucket)
        seed(s3, {uri: asset.source for uri, asset in (stack.assets if stack else {}).items()
                  if asset.packaging == "file"})
        for uri, source in request.data.items():
            delete(s3, uri, whole=source.is_dir())
        seed(s3, request.data)
        if objects or versions:
            run.notes.append(_carried(objects, caches, versions))
        if pipeline is not None and pipeline.stand_ins:
            run.notes.append("the template's references, as they stand in here: " + ", ".join(
                f"{ref} = {value}" for ref, value in sorted(pipeline.stand_ins.items())))
        try:
            report = execute(request.definition, request.name, request.parameters, run,
                             lambda line: print(line, flush=True))
        finally:  # even when interrupted: the next run in the workdir carries what is there
            dump(s3, workdir)
            shutil.rmtree(workdir / EARLIER_S3, ignore_errors=True)
        report.named = request.named
    report.notes.append(f"workdir {workdir}: each job's opt_ml/ (its /opt/ml), home, temporary "
                        f"and cache folders and log under steps/, the run's S3 under s3/, its "
                        f"SSM parameters in ssm.json, its model registry in registry.json")
    report.notes.append("the jobs' and handlers' AWS calls go to the stand-in AWS, with "
                        "stand-in credentials")
    report.notes += _roles_lines(run.roles, args.no_roles)
    print()
    print(report.table())
    if args.json_path:
        args.json_path.write_text(json.dumps(report.as_json(), indent=2, default=str) + "\n")
    return 0 if report.status == "Succeeded" else 1


def _roles_lines(roles: Roles | None, turned_off: bool) -> list[str]:
    """What the report says of the roles: what was checked, and what was not."""
    if roles is None:
        return ["roles not checked: " + ("--no-roles" if turned_off else
                                         "a --definition file has no policies to check with")]
    return [f"roles checked: {roles.decided} calls decided ({len(roles.denied)} denied): each "
            f"job's S3 calls and the KMS calls S3 makes for them, as its step's role would "
            f"make them, against the stack's bucket and key policies; not the jobs' other "
            f"calls (ECR, logs, SageMaker), nor the Lambda and registration steps'",
            *roles.not_checked()]


def _request(args: argparse.Namespace) -> Request:
    """The command line checked, each problem one line (`RunInputError`); ``args.python``
    made absolute."""
    if args.processes < 1:
        raise RunInputError(f"--processes must be at least 1, got {args.processes}")
    pythons = _pythons(args.python)
    if args.definition and (args.pipeline or args.assembly != Path("cdk.out")):
        raise RunInputError("--definition runs a definition file: give it without an assembly "
                            "or --pipeline")
    if args.name and not args.definition:
        raise RunInputError("--name names a --definition run's pipeline; an assembly's "
                            "pipelines have their own names")
    if args.json_path and not args.json_path.parent.is_dir():
        raise RunInputError(f"--json {args.json_path}: its folder does not exist")
    pipeline = None if args.definition else pick(read_assembly(args.assembly), args.pipeline)
    if pipeline:
        definition, name, named = pipeline.definition, pipeline.name, ""
    else:
        definition, file_name = definition_file(args.definition)
        name = args.name or file_name or args.definition.stem
        named = "" if file_name and not args.name else "from --name" if args.name else \
            f"named after the file {args.definition.name}: --name names it"
    parameters = _parameters(definition, _pairs(args.param, "--param"))
    data = {uri: Path(folder) for uri, folder in _pairs(args.data, "--data").items()}
    for uri, folder in data.items():
        problem = s3_uri_problem(uri)
        if problem:
            raise RunInputError(f"--data {uri}={folder}: {uri!r} is not an S3 URI "
                                f"(s3://bucket/key): {problem}")
        if not folder.exists():
            raise RunInputError(f"--data {uri}={folder}: no local folder or file {folder}")
    overrides: dict[str, dict[str, str]] = {}
    for target, value in _pairs(args.overrides, "--set").items():
        step, _, key = target.partition(".")
        if not key:
            raise RunInputError(f"--set {target}={value}: write STEP.HYPERPARAMETER=VALUE")
        overrides.setdefault(step, {})[key] = _encoded(value)
    outputs = {step: _outputs(Path(path)) for step, path in _pairs(args.outputs,
                                                                   "--outputs").items()}
    handlers = {step: _handler(step, value) for step, value in
                _pairs(args.handlers, "--lambda").items()}
    _check_steps(definition, overrides, outputs, handlers)
    return Request(definition, name, named, pipeline, parameters, data, overrides, outputs,
                   pythons, handlers)


def _parameters(definition: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    """The execution's parameters; a gate's threshold held to its metric's range, as synth holds
    ``gate_threshold`` and a schedule's override."""
    parameters = parameter_values(definition.get("Parameters", []), given)
    for name, metric in sorted(gate_thresholds(definition).items()):
        if name in given and (problem := threshold_problem(
                metric, float(parameters[name]), f"--param {name}")):
            raise RunInputError(problem)
    return parameters


def _images_region(definition: Mapping[str, Any]) -> str:
    """A definition file's region: its images' registry's (``<account>.dkr.ecr.<region>.``), as
    the SDK resolves them in the session's region; else the stand-in's default."""
    found = re.search(r"\.dkr\.ecr\.([a-z0-9-]+)\.", json.dumps(definition))
    return found[1] if found else LOCAL_REGION


def _pythons(given: list[str]) -> dict[str, str]:
    """``--python [KIND=]PYTHON``: the interpreter for each image kind, this one by default."""
    pythons = {DEFAULT_IMAGE: sys.executable}
    for value in given:
        kind, separator, python = value.rpartition("=")
        if separator and kind not in KINDS:
            raise RunInputError(f"--python {value}: {kind!r} is no image kind; write --python "
                                f"PYTHON or --python KIND=PYTHON with KIND one of "
                                f"{', '.join(KINDS)}")
        pythons[kind] = _interpreter(python)
    return pythons


def _handler(step: str, value: str) -> Handler:
    folder, separator, handler = value.rpartition(":")
    if not separator or "." not in handler or not Path(folder).is_dir():
        raise RunInputError(f"--lambda {step}={value}: write STEP=DIR:module.function with DIR "
                            f"an existing folder")
    return Handler(Path(folder).resolve(), handler)


def _interpreter(given: str) -> str:
    """The training image's Python, absolute but not resolved: a virtualenv's python is a link
    its folder gives meaning to, and the toolkit starts the launchers (torchrun) from there."""
    python = shutil.which(given)
    if python is None:
        raise RunInputError(f"--python {given}: no such interpreter")
    probe = subprocess.run([python, "-c", "import sys; print(sys.version_info[0])"],
                           capture_output=True, text=True, check=False)
    if probe.stdout.strip() != "3":
        raise RunInputError(f"--python {given}: not a Python 3 interpreter")
    return str(Path(python).absolute())


def _check_steps(definition: Mapping[str, Any], overrides: Mapping[str, Any],
                 outputs: Mapping[str, Any], handlers: Mapping[str, Any]) -> None:
    """The steps --set, --outputs and --lambda name: the definition's, a training step's for
    --set, a Lambda step's for --lambda."""
    check_structure(definition.get("Steps", []))
    steps = {str(s["Name"]): str(s["Type"]) for s in all_steps(definition.get("Steps", []))}
    for step in handlers:
        if steps.get(step, "Lambda") != "Lambda":
            raise RunInputError(f"--lambda {step}=...: {step} is a {steps[step]} step, not a "
                                f"Lambda step")
    for step in [*overrides, *outputs, *handlers]:
        if step not in steps:
            raise RunInputError(f"step {step!r} is not in the pipeline (steps: "
                                f"{', '.join(sorted(steps))})")
    for step in overrides:
        if step in outputs:
            raise RunInputError(f"--set {step}.* and --outputs {step}: a step given by its "
                                f"outputs does not run, so nothing would be set")
        if steps[step] != "Training":
            raise RunInputError(f"--set {step}.*: {step} is a {steps[step]} step; --set "
                                f"overrides a training step's hyperparameters")


MARKER = ".compiled-training-run"
EARLIER_S3 = "s3.earlier"
"""The last run's S3 in a reused workdir, kept aside until this run has written its own."""


def _carried(objects: int, caches: int, versions: int) -> str:
    what = [f"{objects} S3 object{'s' if objects != 1 else ''}"
            + (f" ({caches} of them compile-cache objects)" if caches else ""),
            f"{versions} model version{'s' if versions != 1 else ''}"]
    return (f"carried from the last run in this workdir, as AWS keeps them between executions: "
            f"{' and '.join(what)} (--fresh starts without them)")


def _workdir(given: Path | None, *, fresh: bool = False) -> Path:
    """The run's folder, emptied of an earlier run's steps (its S3, registry and SSM
    parameters are carried into this run, unless ``fresh``): a new folder, or one an
    earlier run made (its marker file says so); never a folder of the user's own."""
    workdir = (given or Path(tempfile.mkdtemp(prefix="compiled-training-run-"))).resolve()
    if workdir.is_relative_to("/opt"):
        raise RunInputError(f"--workdir {workdir}: jobs see /opt through an overlay of their "
                            f"own; give a folder outside /opt")
    if workdir.exists() and any(workdir.iterdir()) and not (workdir / MARKER).is_file():
        raise RunInputError(f"--workdir {workdir} holds files of its own; give an empty or new "
                            f"folder (the runner clears the steps it wrote there before)")
    # The last run's S3 stays aside until this run has written its own (a run stopped before
    # that leaves the one before it aside, carried next time).
    if (workdir / "s3").is_dir():
        shutil.rmtree(workdir / EARLIER_S3, ignore_errors=True)
        (workdir / "s3").rename(workdir / EARLIER_S3)
    shutil.rmtree(workdir / "steps", ignore_errors=True)
    if fresh:
        shutil.rmtree(workdir / EARLIER_S3, ignore_errors=True)
        for name in (REGISTRY_FILE, SSM_FILE):
            (workdir / name).unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("a compiled-training run's folder: steps/, s3/, ssm.json, "
                                  "registry.json\n")
    return workdir


_FORMS = {"--param": "NAME=VALUE", "--data": "S3_URI=LOCAL_DIR",
          "--set": "STEP.HYPERPARAMETER=VALUE", "--outputs": "STEP=FILE",
          "--lambda": "STEP=DIR:module.function"}


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, separator, rest = value.partition("=")
        if not separator or not name:
            raise RunInputError(f"{flag} {value!r}: write {_FORMS[flag]}")
        pairs[name] = rest
    return pairs


def _encoded(value: str) -> str:
    """A hyperparameter as SageMaker carries it: JSON (a bare word becomes a JSON string)."""
    try:
        json.loads(value)
        return value
    except json.JSONDecodeError:
        return json.dumps(value)


def _outputs(path: Path) -> dict[str, Any]:
    document = json_file(path, "--outputs")
    if not isinstance(document, dict):
        raise RunInputError(f"--outputs {path}: expected a JSON object of the step's "
                            f"properties, such as {{\"FinalMetricDataList\": ...}}")
    if "FinalMetricDataList" in document:
        document["FinalMetricDataList"] = _metrics(path, document["FinalMetricDataList"])
    return document


def _metrics(path: Path, given: Any) -> dict[str, dict[str, Any]]:
    """A training step's final metrics as DescribeTrainingJob lists them
    (``[{"MetricName": m, "Value": v}]``) or by name (``{m: {"Value": v}}``, ``{m: v}``), by
    name as the runner's steps read them."""
    entries = given if isinstance(given, list) else [
        {"MetricName": name, **(value if isinstance(value, dict) else {"Value": value})}
        for name, value in (given.items() if isinstance(given, dict) else [])]
    metrics = {}
    for entry in entries:
        try:
            name, value = str(entry["MetricName"]), float(entry["Value"])
        except (KeyError, TypeError, ValueError):
            raise RunInputError(f"--outputs {path}: FinalMetricDataList entries need a "
                                f"MetricName and a numeric Value, got {entry!r}") from None
        metrics[name] = {"MetricName": name, "Value": value}
    if not metrics and given:
        raise RunInputError(f"--outputs {path}: FinalMetricDataList must be a list or an "
                            f"object of metrics, got {given!r}")
    return metrics


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
