"""The comparison step of a `CompilerBenchmark`: reads each arm's run, compares, decides.

It runs as a SageMaker Processing job (``python3 -m compiled_training_runtime.compare``) in
a PyTorch CPU image, with network isolation: everything it reads comes in as inputs, and
it needs nothing but the standard library (the image's Python may be 3.8).

Each arm's input folder holds what SageMaker uploaded from its training job: the
``output.tar.gz`` with the runtime's run summary (``metrics.json``). The timings SageMaker
measured (training and billable seconds) arrive as arguments, read from the training
steps' properties. It writes ``comparison.json`` (the pipeline's condition reads it) and
``comparison.md`` (for people).

Each arm's fleet (instance type, count, USD per instance-hour) arrives as ``--fleet``, so
time and cost are reported per epoch. The gain an arm is judged by: on the baseline's fleet,
its wall-clock speedup (epochs per hour); on another fleet (a Trainium arm beside a GPU job),
its cost gain (epochs per dollar, from SageMaker's billable seconds), since time on different
hardware at different prices says nothing about the bill.

The decision: an arm ships when its gain is at least ``speedup_threshold`` and it loses at
most ``quality_tolerance`` of the quality metric. Of the arms that ship, the one with the
largest gain is chosen; when none does, the reason names the closest one and what it missed.
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

_ARM_ARGUMENT = re.compile(r"^(?P<name>[a-z][a-z0-9-]*)=(?P<training>[0-9.]+)"
                          r":(?P<billable>[0-9.]+)$")
_FLEET_ARGUMENT = re.compile(r"^(?P<name>[a-z][a-z0-9-]*)=(?P<instance_type>ml\.[a-z0-9.-]+)"
                             r":(?P<count>[1-9][0-9]*):(?P<price>[0-9.]+|unknown)$")
BASIS_WALL_CLOCK = "wall-clock"
BASIS_COST = "cost"


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
            raise ValueError(contract.not_one_of("quality_metric", self.quality_metric,
                                                 contract.QUALITY_METRICS))
        if self.speedup < 0 or self.quality_tolerance < 0:
            raise ValueError(f"thresholds must not be negative, got speedup {self.speedup} "
                             f"and quality tolerance {self.quality_tolerance}")


@dataclass(frozen=True)
class Fleet:
    """The instances an arm trains on, and their price (None: not known)."""

    instance_type: str
    instance_count: int
    usd_per_instance_hour: float | None = None


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
    epochs: float = 1.0
    """Epochs trained (fractional under ``max_steps``)."""
    fleet: Fleet | None = None
    """What the arm ran on; None where the comparison was not told (then it shares the
    baseline's)."""

    @property
    def seconds_per_epoch(self) -> float:
        return self.training_seconds / self.epochs

    @property
    def cost_per_epoch(self) -> float | None:
        """USD: SageMaker bills each instance for the billable seconds."""
        if self.fleet is None or self.fleet.usd_per_instance_hour is None:
            return None
        return (self.billable_seconds * self.fleet.instance_count
                * self.fleet.usd_per_instance_hour / 3600 / self.epochs)


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
            billable_seconds: float, quality_metric: str, fleet: Fleet | None = None) -> ArmRun:
    missing = [key for key in (contract.SUMMARY_COMPILER, contract.SUMMARY_GLOBAL_BATCH_SIZE,
                               contract.SUMMARY_LEARNING_RATE, "samples_per_second",
                               quality_metric) if key not in summary]
    if missing:
        raise ComparisonError(f"arm {name!r}: the run summary lacks {', '.join(missing)}; "
                              f"{quality_metric} needs a validation channel")
    if training_seconds <= 0:
        raise ComparisonError(f"arm {name!r}: training time must be positive, got "
                              f"{training_seconds}")
    epochs = float(summary.get(contract.SUMMARY_EPOCHS, 1.0))
    if epochs <= 0:
        raise ComparisonError(f"arm {name!r}: the run summary's {contract.SUMMARY_EPOCHS} must "
                              f"be positive, got {epochs}")
    return ArmRun(name=name, compiler=str(summary[contract.SUMMARY_COMPILER]),
                  global_batch_size=int(summary[contract.SUMMARY_GLOBAL_BATCH_SIZE]),
                  learning_rate=float(summary[contract.SUMMARY_LEARNING_RATE]),
                  samples_per_second=float(summary["samples_per_second"]),
                  quality=float(summary[quality_metric]),
                  training_seconds=float(training_seconds),
                  billable_seconds=float(billable_seconds), epochs=epochs, fleet=fleet)


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
        speedup = baseline.seconds_per_epoch / run.seconds_per_epoch - 1.0
        cost, baseline_cost = run.cost_per_epoch, baseline.cost_per_epoch
        cost_gain = baseline_cost / cost - 1.0 if cost and baseline_cost else None
        basis = BASIS_WALL_CLOCK if _same_fleet(run, baseline) else BASIS_COST
        if basis == BASIS_COST and cost_gain is None:
            raise ComparisonError(
                f"arm {run.name!r} runs on {_fleet_text(run)} and the baseline on "
                f"{_fleet_text(baseline)}: comparing them needs both prices (--fleet "
                f"NAME=INSTANCE_TYPE:COUNT:USD_PER_INSTANCE_HOUR)")
        arms.append({
            **{key: value for key, value in asdict(run).items() if key != "fleet"},
            "instance_type": run.fleet.instance_type if run.fleet else "",
            "instance_count": run.fleet.instance_count if run.fleet else 0,
            "seconds_per_epoch": run.seconds_per_epoch,
            "cost_per_epoch": cost,
            "speedup": speedup,
            "cost_gain": cost_gain,
            "gain": speedup if basis == BASIS_WALL_CLOCK else cost_gain,
            "basis": basis,
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


def _same_fleet(run: ArmRun, baseline: ArmRun) -> bool:
    """Whether time alone compares them: unknown fleets are the baseline's."""
    if run.fleet is None or baseline.fleet is None:
        return True
    return ((run.fleet.instance_type, run.fleet.instance_count)
            == (baseline.fleet.instance_type, baseline.fleet.instance_count))


def _fleet_text(run: ArmRun) -> str:
    return (f"{run.fleet.instance_count} x {run.fleet.instance_type}" if run.fleet
            else "an unnamed fleet")


def _decide(candidates: list[dict[str, Any]], thresholds: Thresholds,
            unit: str) -> dict[str, Any]:
    def fast(arm: dict[str, Any]) -> bool:
        return bool(arm["gain"] >= thresholds.speedup)

    def keeps_quality(arm: dict[str, Any]) -> bool:
        return bool(arm["quality_drop"] <= thresholds.quality_tolerance)

    shipping = [arm for arm in candidates if fast(arm) and keeps_quality(arm)]
    pool = shipping or [arm for arm in candidates if keeps_quality(arm)] or candidates
    chosen = max(pool, key=lambda arm: arm["gain"])
    ship = bool(shipping)
    units = f" {unit}" if unit else ""
    gain, drop = chosen["gain"], chosen["quality_drop"]
    if chosen["basis"] == BASIS_WALL_CLOCK:
        pace = f"is {gain:.1%} faster" if gain >= 0 else f"is {-gain:.1%} slower"
    else:
        more = f"{gain:.1%} more" if gain >= 0 else f"{-gain:.1%} fewer"
        pace = (f"on {chosen['instance_count']} x {chosen['instance_type']} trains {more} "
                f"epochs per dollar (${chosen['cost_per_epoch']:,.2f} an epoch)")
    quality = f"loses {drop:.3g}" if drop > 0 else f"gains {-drop:.3g}" if drop < 0 else "loses 0"
    facts = (f"{chosen['name']} {pace} than the baseline (threshold "
             f"{thresholds.speedup:.0%}) and {quality}{units} of {thresholds.quality_metric} "
             f"(tolerance {thresholds.quality_tolerance:g}{units})")
    if ship:
        reason = f"{contract.VERDICT_SHIP}: {facts}"
    else:
        missed = []
        if not fast(chosen):
            missed.append("too slow" if chosen["basis"] == BASIS_WALL_CLOCK else "too costly")
        if not keeps_quality(chosen):
            missed.append("quality lost")
        reason = f"{contract.VERDICT_HOLD} ({', '.join(missed)}): {facts}"
    return {  # contract.DECISION_FIELDS
        "verdict": contract.VERDICT_SHIP if ship else contract.VERDICT_HOLD,
        "arm": chosen["name"],
        "speedup": chosen["speedup"],
        "gain": gain,
        "basis": chosen["basis"],
        "instance_type": chosen["instance_type"],
        "instance_count": chosen["instance_count"],
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
        f"| arm | instances | compiler | global batch | learning rate | samples/s | "
        f"training s | billable s | s/epoch | USD/epoch | {metric} | speedup | cost gain | "
        f"quality lost ({unit or 'units'}) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in comparison["arms"]:
        fleet = (f"{arm['instance_count']} x {arm['instance_type']}" if arm["instance_type"]
                 else "-")
        cost = "-" if arm["cost_per_epoch"] is None else f"{arm['cost_per_epoch']:,.2f}"
        cost_gain = "-" if arm["cost_gain"] is None else _signed(arm["cost_gain"], ".1%")
        lines.append(
            f"| {arm['name']} | {fleet} | {arm['compiler']} | {arm['global_batch_size']} | "
            f"{arm['learning_rate']:.3g} | {arm['samples_per_second']:.1f} | "
            f"{arm['training_seconds']:.1f} | {arm['billable_seconds']:.1f} | "
            f"{arm['seconds_per_epoch']:.1f} | {cost} | "
            f"{arm['quality']:.4f} | {_signed(arm['speedup'], '.1%')} | {cost_gain} | "
            f"{_signed(arm['quality_drop'], '.3f')} |")
    thresholds = comparison["thresholds"]
    lines += ["", f"Ships at a gain of at least {thresholds['speedup']:.0%} (wall-clock on the "
                  f"baseline's instances, epochs per dollar on others) with at most "
                  f"{thresholds['quality_tolerance']:g} {unit} of {metric} lost.", ""]
    return "\n".join(lines)


def _signed(value: float, spec: str) -> str:
    """``+x`` or ``-x``, and never ``-0``."""
    shown = format(abs(value), spec)
    if float(shown.rstrip("%")) == 0:
        return shown
    return ("+" if value > 0 else "-") + shown


def _timings(option: str, value: str) -> tuple[str, tuple[float, float]]:
    match = _ARM_ARGUMENT.match(value)
    if not match:
        raise ComparisonError(f"{option} must be NAME=TRAINING_SECONDS:BILLABLE_SECONDS, "
                              f"got {value!r}")
    return match["name"], (float(match["training"]), float(match["billable"]))


def _fleet(value: str) -> tuple[str, Fleet]:
    match = _FLEET_ARGUMENT.match(value)
    if not match:
        raise ComparisonError(f"--fleet must be NAME=INSTANCE_TYPE:COUNT:USD_PER_INSTANCE_HOUR "
                              f"(USD may be 'unknown'), got {value!r}")
    price = None if match["price"] == "unknown" else float(match["price"])
    return match["name"], Fleet(match["instance_type"], int(match["count"]), price)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--input-dir", type=Path, required=True,
                        help="one folder per arm, named after it")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--arm", action="append", required=True,
                        help="NAME=TRAINING_SECONDS:BILLABLE_SECONDS, once per arm")
    parser.add_argument("--precompile", action="append", default=[],
                        help="NAME=TRAINING_SECONDS:BILLABLE_SECONDS of an arm's Neuron "
                             "pre-compilation step, added to the arm's own")
    parser.add_argument("--fleet", action="append", default=[],
                        help="NAME=INSTANCE_TYPE:COUNT:USD_PER_INSTANCE_HOUR (or unknown), "
                             "once per arm")
    parser.add_argument("--quality-metric", default=contract.DEFAULT_QUALITY_METRIC)
    parser.add_argument("--speedup-threshold", type=float,
                        default=contract.DEFAULT_SPEEDUP_THRESHOLD)
    parser.add_argument("--quality-tolerance", type=float,
                        default=contract.DEFAULT_QUALITY_TOLERANCE)
    args = parser.parse_args(argv)
    try:
        thresholds = Thresholds(args.speedup_threshold, args.quality_tolerance,
                                args.quality_metric)
        fleets = dict(_fleet(value) for value in args.fleet)
        before = dict(_timings("--precompile", value) for value in args.precompile)
        runs = []
        for value in args.arm:
            name, (training, billable) = _timings("--arm", value)
            extra_training, extra_billable = before.get(name, (0.0, 0.0))
            runs.append(arm_run(name, read_summary(args.input_dir / name),
                                training_seconds=training + extra_training,
                                billable_seconds=billable + extra_billable,
                                quality_metric=thresholds.quality_metric,
                                fleet=fleets.get(name)))
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
