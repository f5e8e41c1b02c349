"""The comparison step of a `CompilerBenchmark`: reads each arm's run, compares, decides.

It runs as a SageMaker Processing job (``python3 -m compiled_training_runtime.compare``) in
a PyTorch CPU image, with network isolation: everything it reads comes in as inputs, and
it needs nothing but the standard library (the image's Python may be 3.8).

Each arm's input folder holds what SageMaker uploaded from its training job: the
``output.tar.gz`` with the runtime's run summary (``metrics.json``). The timings SageMaker
measured (training and billable seconds) arrive as arguments, read from the training
steps' properties. It writes ``comparison.json`` (the pipeline's condition reads it) and
``comparison.md`` (for people).

The decision: an arm ships when it is at least ``speedup_threshold`` faster in wall-clock
training time than the baseline and loses at most ``quality_tolerance`` of the quality
metric. Of the arms that ship, the fastest is chosen; when none does, the reason names the
closest one and what it missed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import contract

_ARM_ARGUMENT = re.compile(r"^(?P<name>[a-z][a-z-]*)=(?P<training>[0-9.]+):(?P<billable>[0-9.]+)$")


class ComparisonError(Exception):
    """An arm's output is missing or unreadable; the message says which and why."""


@dataclass(frozen=True)
class Thresholds:
    speedup: float = contract.DEFAULT_SPEEDUP_THRESHOLD
    """Least wall-clock speedup to ship, as a fraction: 0.2 means 20 % faster."""
    quality_tolerance: float = contract.DEFAULT_QUALITY_TOLERANCE
    """Most quality an arm may lose, in the metric's report units (points for accuracy)."""
    quality_metric: str = contract.DEFAULT_QUALITY_METRIC

    def __post_init__(self) -> None:
        if self.quality_metric not in contract.QUALITY_METRICS:
            raise ValueError(f"quality_metric must be one of "
                             f"{', '.join(contract.QUALITY_METRICS)}, got {self.quality_metric!r}")
        if self.speedup < 0 or self.quality_tolerance < 0:
            raise ValueError(f"thresholds must not be negative, got speedup {self.speedup} "
                             f"and quality tolerance {self.quality_tolerance}")


@dataclass(frozen=True)
class ArmRun:
    """One arm: what its run reported and what SageMaker measured."""

    name: str
    compiler: str
    """One of `contract.COMPILERS`."""
    global_batch_size: int
    learning_rate: float
    samples_per_second: float
    quality: float
    training_seconds: float
    billable_seconds: float


def read_summary(folder: Path) -> dict[str, Any]:
    """The run summary in an arm's input folder: loose, or inside SageMaker's output.tar.gz."""
    loose = folder / contract.RUN_SUMMARY_FILE
    if loose.is_file():
        return dict(json.loads(loose.read_text()))
    archives = sorted(folder.glob("*.tar.gz"))
    for archive in archives:
        try:
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    if member.isfile() and Path(member.name).name == contract.RUN_SUMMARY_FILE:
                        extracted = tar.extractfile(member)
                        assert extracted is not None
                        return dict(json.loads(extracted.read()))
        except (tarfile.TarError, OSError) as error:
            raise ComparisonError(f"{archive} is not a readable tar.gz archive ({error})"
                                  ) from None
    found = ", ".join(p.name for p in sorted(folder.iterdir())) if folder.is_dir() else "nothing"
    raise ComparisonError(f"no {contract.RUN_SUMMARY_FILE} in {folder} (found: {found}); "
                          "did the arm's training job run the compiled-training runtime?")


def arm_run(name: str, summary: dict[str, Any], *, training_seconds: float,
            billable_seconds: float, quality_metric: str) -> ArmRun:
    missing = [key for key in (contract.SUMMARY_COMPILER, contract.SUMMARY_GLOBAL_BATCH_SIZE,
                               contract.SUMMARY_LEARNING_RATE, "samples_per_second",
                               quality_metric) if key not in summary]
    if missing:
        raise ComparisonError(f"arm {name!r}: the run summary lacks {', '.join(missing)}; "
                              f"{quality_metric} needs a validation channel")
    if training_seconds <= 0:
        raise ComparisonError(f"arm {name!r}: training time must be positive, got "
                              f"{training_seconds}")
    return ArmRun(name=name, compiler=str(summary[contract.SUMMARY_COMPILER]),
                  global_batch_size=int(summary[contract.SUMMARY_GLOBAL_BATCH_SIZE]),
                  learning_rate=float(summary[contract.SUMMARY_LEARNING_RATE]),
                  samples_per_second=float(summary["samples_per_second"]),
                  quality=float(summary[quality_metric]),
                  training_seconds=float(training_seconds),
                  billable_seconds=float(billable_seconds))


def compare(runs: Sequence[ArmRun], thresholds: Thresholds) -> dict[str, Any]:
    """The comparison document: every arm against the baseline, and the decision."""
    by_name = {run.name: run for run in runs}
    if contract.ARM_BASELINE not in by_name or len(by_name) < 2:
        raise ComparisonError(f"a comparison needs the {contract.ARM_BASELINE!r} arm and at "
                              f"least one other, got {sorted(by_name)}")
    baseline = by_name[contract.ARM_BASELINE]
    higher_is_better, scale, unit = contract.QUALITY_METRICS[thresholds.quality_metric]
    arms = []
    for run in runs:
        change = (run.quality - baseline.quality) * scale
        arms.append({
            **asdict(run),
            "speedup": baseline.training_seconds / run.training_seconds - 1.0,
            "throughput_gain": run.samples_per_second / baseline.samples_per_second - 1.0,
            "billable_change": run.billable_seconds / baseline.billable_seconds - 1.0
            if baseline.billable_seconds else 0.0,
            "quality_drop": -change if higher_is_better else change,
        })
    candidates = [arm for arm in arms if arm["name"] != contract.ARM_BASELINE]
    return {
        "quality_metric": thresholds.quality_metric,
        "quality_unit": unit,
        "thresholds": {"speedup": thresholds.speedup,
                       "quality_tolerance": thresholds.quality_tolerance},
        "arms": arms,
        "decision": _decide(candidates, thresholds, unit),
    }


def _decide(candidates: list[dict[str, Any]], thresholds: Thresholds,
            unit: str) -> dict[str, Any]:
    def fast(arm: dict[str, Any]) -> bool:
        return bool(arm["speedup"] >= thresholds.speedup)

    def keeps_quality(arm: dict[str, Any]) -> bool:
        return bool(arm["quality_drop"] <= thresholds.quality_tolerance)

    shipping = [arm for arm in candidates if fast(arm) and keeps_quality(arm)]
    pool = shipping or [arm for arm in candidates if keeps_quality(arm)] or candidates
    chosen = max(pool, key=lambda arm: arm["speedup"])
    ship = bool(shipping)
    units = f" {unit}" if unit else ""
    speedup, drop = chosen["speedup"], chosen["quality_drop"]
    pace = f"{speedup:.1%} faster" if speedup >= 0 else f"{-speedup:.1%} slower"
    quality = f"loses {drop:.3g}" if drop > 0 else f"gains {-drop:.3g}" if drop < 0 else "loses 0"
    facts = (f"{chosen['name']} is {pace} than the baseline (threshold "
             f"{thresholds.speedup:.0%}) and {quality}{units} of {thresholds.quality_metric} "
             f"(tolerance {thresholds.quality_tolerance:g}{units})")
    if ship:
        reason = f"{contract.VERDICT_SHIP}: {facts}"
    else:
        missed = []
        if not fast(chosen):
            missed.append("too slow")
        if not keeps_quality(chosen):
            missed.append("quality lost")
        reason = f"{contract.VERDICT_HOLD} ({', '.join(missed)}): {facts}"
    return {  # contract.DECISION_FIELDS
        "verdict": contract.VERDICT_SHIP if ship else contract.VERDICT_HOLD,
        "arm": chosen["name"],
        "speedup": chosen["speedup"],
        "quality_drop": chosen["quality_drop"],
        "global_batch_size": chosen["global_batch_size"],
        "learning_rate": chosen["learning_rate"],
        "reason": reason,
    }


def to_markdown(comparison: dict[str, Any]) -> str:
    metric, unit = comparison["quality_metric"], comparison["quality_unit"]
    lines = [
        "# Compiler benchmark",
        "",
        f"**{comparison['decision']['reason']}**",
        "",
        f"| arm | compiler | global batch | learning rate | samples/s | training s | "
        f"billable s | {metric} | speedup | quality lost ({unit or 'units'}) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in comparison["arms"]:
        lines.append(
            f"| {arm['name']} | {arm['compiler']} | {arm['global_batch_size']} | "
            f"{arm['learning_rate']:.3g} | {arm['samples_per_second']:.1f} | "
            f"{arm['training_seconds']:.1f} | {arm['billable_seconds']:.1f} | "
            f"{arm['quality']:.4f} | {_signed(arm['speedup'], '.1%')} | "
            f"{_signed(arm['quality_drop'], '.3f')} |")
    thresholds = comparison["thresholds"]
    lines += ["", f"Ships at a wall-clock speedup of at least {thresholds['speedup']:.0%} with "
                  f"at most {thresholds['quality_tolerance']:g} {unit} of {metric} lost.", ""]
    return "\n".join(lines)


def _signed(value: float, spec: str) -> str:
    """``+x`` or ``-x``, and never ``-0``."""
    shown = format(abs(value), spec)
    if float(shown.rstrip("%")) == 0:
        return shown
    return ("+" if value > 0 else "-") + shown


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--input-dir", type=Path, required=True,
                        help="one folder per arm, named after it")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--arm", action="append", required=True,
                        help="NAME=TRAINING_SECONDS:BILLABLE_SECONDS, once per arm")
    parser.add_argument("--quality-metric", default=contract.DEFAULT_QUALITY_METRIC)
    parser.add_argument("--speedup-threshold", type=float,
                        default=contract.DEFAULT_SPEEDUP_THRESHOLD)
    parser.add_argument("--quality-tolerance", type=float,
                        default=contract.DEFAULT_QUALITY_TOLERANCE)
    args = parser.parse_args(argv)
    try:
        thresholds = Thresholds(args.speedup_threshold, args.quality_tolerance,
                                args.quality_metric)
        runs = []
        for value in args.arm:
            match = _ARM_ARGUMENT.match(value)
            if not match:
                raise ComparisonError(f"--arm must be NAME=TRAINING_SECONDS:BILLABLE_SECONDS, "
                                      f"got {value!r}")
            name = match["name"]
            runs.append(arm_run(name, read_summary(args.input_dir / name),
                                training_seconds=float(match["training"]),
                                billable_seconds=float(match["billable"]),
                                quality_metric=thresholds.quality_metric))
        comparison = compare(runs, thresholds)
    except (ComparisonError, ValueError) as error:
        print(f"compare: {error}", file=sys.stderr)
        failure = Path("/opt/ml/output/message")
        if failure.parent.is_dir():  # SageMaker shows this file as the failure reason
            failure.write_text(str(error))
        return 2
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / contract.COMPARISON_JSON).write_text(
        json.dumps(comparison, indent=2, sort_keys=True))
    (args.output_dir / contract.COMPARISON_MARKDOWN).write_text(to_markdown(comparison))
    print(comparison["decision"]["reason"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
