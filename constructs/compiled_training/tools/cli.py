"""``compiled-training``: the command line.

    compiled-training advise WORKLOADS.yaml [--json] [--plot FILE.png] [--prices FILE.yaml]
                             [--live-prices]
    compiled-training bench [--steps N] [--compilers none,torch-compile,training-compiler]
                            [--out DIR] [--warm-start-only | --no-warm-start]
    compiled-training bench --ab [--compiler training-compiler|torch-compile] [--epochs N]
                                 [--out DIR]
    compiled-training run [cdk.out] --pipeline ID [--param NAME=VALUE]... [--data URI=DIR]...
                          [--set STEP.NAME=VALUE]... [--outputs STEP=FILE]... [--python PY]

Compilers are named as in the API and cdk.json: ``training-compiler`` (SageMaker Training
Compiler; locally its mechanism, XLA on the CPU), ``torch-compile``, ``none`` (eager PyTorch).

``bench`` with torch-compile adds the warm-start table: seconds to the first finished step
cold and warm (from the compile cache the cold run saved), on the tiny BERT and a larger one.

``bench --ab`` exits 0 when the compiler would ship and 1 when it would be held.

Bad input is one line on stderr naming what is wrong (for ``advise``, the workload and the
field), and exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import signal
import sys
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from compiled_training import tables
from compiled_training.advice.advisor import Assessment, Verdict, WorkloadProfile, assess_workload
from compiled_training.catalog.prices import live_prices
from compiled_training.compilers.base import value_of
from compiled_training.tools.bench import (
    COMPILERS,
    DEFAULT_AB_COMPILER,
    WARM_START_COMPILER,
    WARMUP_STEPS,
)
from compiled_training.tools.extras import MissingExtraError, require_extra
from compiled_training.typecheck import check_entry
from compiled_training_runtime import contract

USAGE_ERROR = 2
_FIELDS = {f.name: f for f in dataclasses.fields(WorkloadProfile)}
_REQUIRED = [name for name, f in _FIELDS.items()
             if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
_HINTS = get_type_hints(WorkloadProfile)


class InputError(Exception):
    """Bad input: printed as one line, exit code 2."""


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(f"{path}: malformed YAML{where}: "
                         f"{getattr(error, 'problem', None) or error}") from None


def load_workloads(path: Path) -> list[WorkloadProfile]:
    document = _read_yaml(path)
    entries = document.get("workloads") if isinstance(document, dict) else document
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{path}: expected a list of workloads (or 'workloads:' holding one)")
    return [_profile(path, i, entry) for i, entry in enumerate(entries)]


def load_prices(path: Path) -> dict[str, float]:
    """A prices file: instance type to on-demand USD per instance-hour (YAML or JSON)."""
    document = _read_yaml(path)
    if not isinstance(document, dict) or not document:
        raise InputError(f"{path}: expected a mapping of instance type to USD per hour, such "
                         "as 'ml.p5.48xlarge: 55.04'")
    for instance_type, price in document.items():
        if (not isinstance(price, int | float) or isinstance(price, bool) or price <= 0
                or not str(instance_type).startswith("ml.")):
            raise InputError(f"{path}: price for {instance_type!r} must be a positive number of "
                             f"USD per hour for an 'ml.' instance type, got {price!r}")
    return {str(k): float(v) for k, v in document.items()}


def _profile(path: Path, index: int, entry: Any) -> WorkloadProfile:
    name = entry.get("name", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
    subject = f"{path}: workload {name!r}"
    version = entry.get("framework_version") if isinstance(entry, dict) else None
    if isinstance(version, int | float):
        # YAML reads 2.10 as the number 2.1: only a quoted version keeps its digits.
        raise InputError(f"{subject}: framework_version must be a quoted version such as "
                         f"'2.10', got {version!r}")
    check_entry(entry, _HINTS, subject, required=_REQUIRED, error=InputError, one_line=True)
    try:
        return WorkloadProfile(**entry)
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None


def _table(assessments: list[Assessment]) -> str:
    rows = []
    for a in assessments:
        year = "price unknown" if a.dollars_per_year is None else f"${a.dollars_per_year:,.0f}"
        saving = ("-" if a.verdict is Verdict.SKIP or a.saving_per_year is None
                  else f"${a.saving_per_year[0]:,.0f}-{a.saving_per_year[1]:,.0f}")
        rows.append((a.profile.name, a.verdict.value, value_of(a.compiler), year, saving,
                     str(a.decision), a.reasons[a.deciding_factor]))
    lines = [tables.columns(("workload", "verdict", "compiler", "$ a year", "saving a year",
                             "decision", "deciding reason"), rows)]
    for a in assessments:
        lines.append("")
        lines.append(f"{a.profile.name}: {a.verdict.value} ({value_of(a.compiler)})")
        lines.extend(f"  {factor}: {reason}" for factor, reason in a.reasons.items())
        if a.decision is not None:
            lines.append(f"  accelerator: {a.decision} ({a.decision.reason})")
        lines.extend(f"  -> {note}" for note in a.notes)
        if a.recommended_learning_rate:
            lines.append(f"  -> batch {a.recommended_batch_size}, learning rate "
                         f"{a.recommended_learning_rate:.3g}")
    return "\n".join(lines)


def _rounded(value: float | None) -> float | None:
    """Cents, and null where there is no number (an unknown price, a break-even never met)."""
    return None if value is None or math.isinf(value) else round(value, 2)


def _json(assessments: list[Assessment]) -> str:
    return json.dumps([{
        "name": a.profile.name,
        "verdict": a.verdict.value,
        "compiler": value_of(a.compiler),
        "deciding_factor": a.deciding_factor,
        "reasons": a.reasons,
        "decision": str(a.decision),
        "decision_reason": a.decision.reason if a.decision else None,
        "options": [{"instance_type": o.instance_type, "compiler": value_of(o.compiler),
                     "dollars_per_run": [round(d, 2) for d in o.dollars_per_run],
                     "basis": o.basis, "claimed": o.claimed} for o in a.options],
        "speedup": list(a.speedup),
        "compile_minutes": list(a.compile_minutes),
        "break_even_minutes": _rounded(a.break_even_minutes),
        "dollars_per_run": _rounded(a.dollars_per_run),
        "dollars_per_year": _rounded(a.dollars_per_year),
        "saving_per_year": None if a.saving_per_year is None
        else [round(s, 2) for s in a.saving_per_year],
        "recommended_batch_size": a.recommended_batch_size,
        "recommended_learning_rate": a.recommended_learning_rate,
        "notes": a.notes,
    } for a in assessments], indent=2)


def plot(assessments: list[Assessment], target: Path) -> None:
    """Wall-clock with and without the compiler against job length, break-even marked.

    Log axes, so that the short jobs where compilation does not pay stay visible next to
    the long ones where it does. One band per expected gain; each workload is a point on it.
    """
    require_extra("plot", "advise --plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5), dpi=110)
    longest = max(a.profile.hours_per_run * 60 for a in assessments) * 2
    xs = [5 * (longest / 5) ** (i / 200) for i in range(201)]
    axes.plot(xs, xs, color="black", linewidth=1.5, label="no compiler")
    bands: dict[tuple[float, float], list[Assessment]] = {}
    for a in assessments:
        if a.speedup != (1.0, 1.0):
            bands.setdefault(a.speedup, []).append(a)
    for (low, high), members in bands.items():
        first = members[0]
        slow = [x / low + first.compile_minutes[1] for x in xs]
        fast = [x / high + first.compile_minutes[0] for x in xs]
        label = f"compiled, {low:.2f}-{high:.2f}x ({', '.join(a.profile.name for a in members)})"
        (line,) = axes.plot(xs, slow, linewidth=1, label=label)
        color = line.get_color()
        axes.fill_between(xs, fast, slow, color=color, alpha=0.2)
        axes.axvline(first.break_even_minutes, color=color, linestyle="--", linewidth=1)
        axes.annotate(f"break-even {first.break_even_minutes:.0f} min",
                      (first.break_even_minutes, xs[-1] / 10), rotation=90, fontsize=8,
                      color=color, xytext=(3, 0), textcoords="offset points")
        for a in members:
            minutes = a.profile.hours_per_run * 60
            point = (minutes, minutes / low + a.compile_minutes[1])
            axes.plot(*point, "o", color=color)
            # Neighbouring jobs alternate above and below the curves, a line to each point.
            above = sorted(assessments, key=lambda b: b.profile.hours_per_run).index(a) % 2 == 0
            axes.annotate(f"{a.profile.name}: {a.verdict.value}", point, fontsize=8,
                          xytext=(-15, 20) if above else (15, -25), textcoords="offset points",
                          ha="right" if above else "left", zorder=5,
                          arrowprops={"arrowstyle": "-", "color": color})
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("job length without a compiler (minutes)")
    axes.set_ylabel("wall-clock per run (minutes)")
    axes.set_title("Where the compiler pays: wall-clock against job length")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(alpha=0.3, which="both")
    figure.tight_layout()
    figure.savefig(target, metadata={"Software": None})
    plt.close(figure)


def _bench(args: argparse.Namespace) -> int:
    from compiled_training.tools import bench

    if args.ab:
        return _ab(args)
    chosen = [c for c in args.compilers.split(",") if c]
    unknown = sorted(set(chosen) - set(COMPILERS))
    if unknown or args.steps < WARMUP_STEPS + 1:
        print(f"compiled-training bench: --compilers must come from {', '.join(COMPILERS)} "
              f"and --steps be at least {WARMUP_STEPS + 1}, got {args.compilers!r}, "
              f"{args.steps}", file=sys.stderr)
        return USAGE_ERROR
    if not args.warm_start_only:
        rows = bench.bench(args.steps, chosen, args.out)
        print(bench.table(rows))
        print(f"\nresults: {args.out / 'bench.json'}; plot: {args.out / 'bench.png'}")
    if args.warm_start_only or (WARM_START_COMPILER in chosen
                                and not args.no_warm_start):
        print("\nWarm start: torch-compile cold, then warm from the cache the cold run saved "
              "(least of 2 runs each)")
        print(bench.warm_start_table(bench.warm_start(args.out)))
        print(f"\nresults: {args.out / 'warm-start.json'}")
    return 0


def _ab(args: argparse.Namespace) -> int:
    """The CompilerBenchmark's arms and comparison, on this machine."""
    require_extra("bench", "bench --ab")
    from tqdm import tqdm

    from compiled_training.tools.bench_ab import check_compiler, run_ab
    from compiled_training_runtime.compare import Thresholds

    try:
        check_compiler(args.compiler, "--compiler")
        if args.epochs < 1:
            raise ValueError(f"--epochs must be at least 1, got {args.epochs}")
        thresholds = Thresholds(args.speedup_threshold, args.quality_tolerance)
    except ValueError as error:
        print(f"compiled-training bench: {error}", file=sys.stderr)
        return USAGE_ERROR
    with tqdm(total=3, desc="arms", unit="arm", file=sys.stderr) as bar:
        comparison = run_ab(args.out, compiler=args.compiler, thresholds=thresholds,
                            epochs=args.epochs, progress=bar)
    print((args.out / contract.COMPARISON_MARKDOWN).read_text())
    print(f"results: {args.out / contract.COMPARISON_JSON}")
    return 0 if comparison["decision"]["verdict"] == contract.VERDICT_SHIP else 1


def _live_prices(profiles: list[WorkloadProfile]) -> dict[str, dict[str, float]]:
    """Live prices by region; what cannot be priced live falls back to the table, said once."""
    by_region: dict[str, dict[str, float]] = {}
    for region in sorted({p.region for p in profiles}):
        found, problems = live_prices([p.instance_type for p in profiles if p.region == region],
                                      region)
        by_region[region] = found
        for problem in problems:
            print(f"compiled-training advise: no live price for {problem}; using the table",
                  file=sys.stderr)
    return by_region


def _run(argv: list[str]) -> int:
    """``run``: the local runner, its own parser. It imports boto3 and moto (the ``local``
    extra), so it is reached by name here: nothing the CLI's other commands or a synth load
    brings them in (import-linter's contracts keep the package apart)."""
    try:
        require_extra("local", "run")
    except MissingExtraError as error:
        print(f"compiled-training run: {error}", file=sys.stderr)
        return USAGE_ERROR
    runner = importlib.import_module("compiled_training.local.cli")
    return int(runner.main(argv))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        return _run(argv[1:])
    args = parser().parse_args(argv)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `advise ... | head` ends quietly
    try:
        return _bench(args) if args.command == "bench" else _advise(args)
    except (InputError, MissingExtraError) as error:
        print(f"compiled-training {args.command}: {error}", file=sys.stderr)
        return USAGE_ERROR


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser by name, ``run``'s own (the local runner's) included: what the
    API check and the documentation's CLI page read."""
    top = parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    run = importlib.import_module("compiled_training.local.cli").parser()
    return {name: run if name == "run" else sub for name, sub in commands.choices.items()}


def parser() -> argparse.ArgumentParser:
    """The command line, as ``--help`` prints it and the documentation's CLI page shows it
    (``run``'s own options: `compiled_training.local.cli.parser`)."""
    # The module's docstring, less its reStructuredText quoting: a terminal shows it as typed.
    parser = argparse.ArgumentParser(prog="compiled-training",
                                     description=__doc__.replace("``", ""),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    advise = commands.add_parser("advise", help="verdicts and money at stake for workloads")
    advise.add_argument("workloads", type=Path, help="a YAML file of workloads")
    advise.add_argument("--json", action="store_true", help="print JSON for machines")
    advise.add_argument("--plot", type=Path, metavar="FILE.png",
                        help="draw wall-clock against job length, break-even marked")
    advise.add_argument("--prices", type=Path, metavar="FILE.yaml",
                        help="instance type to on-demand USD per hour, before the built-in table")
    advise.add_argument("--live-prices", action="store_true",
                        help="ask the AWS Price List API (needs credentials) before the table")
    commands.add_parser("run", help="run a synthesized pipeline on this machine (see "
                                     "compiled-training run --help)")
    bench = commands.add_parser("bench", help="each compiler on a tiny BERT, here")
    bench.add_argument("--steps", type=int, default=20)
    bench.add_argument("--compilers", default=",".join(COMPILERS),
                       help=f"comma-separated, from {', '.join(COMPILERS)} (training-compiler "
                            "runs through XLA, Training Compiler's mechanism)")
    bench.add_argument("--out", type=Path, default=Path("bench-results"))
    warm = bench.add_mutually_exclusive_group()
    warm.add_argument("--warm-start-only", action="store_true",
                      help="only the warm-start table: torch-compile's first step cold and "
                           "warm from its compile cache, on two BERTs")
    warm.add_argument("--no-warm-start", action="store_true",
                      help="leave the warm-start table out")
    bench.add_argument("--ab", action="store_true",
                       help="run a CompilerBenchmark's arms and comparison here instead")
    bench.add_argument("--compiler", default=DEFAULT_AB_COMPILER,
                       help="with --ab: the compiler on trial, training-compiler (through XLA, "
                            "as on its images) or torch-compile")
    bench.add_argument("--epochs", type=int, default=1,
                       help="with --ab: epochs of the digits' 1,437 training images")
    bench.add_argument("--speedup-threshold", type=float,
                       default=contract.DEFAULT_SPEEDUP_THRESHOLD,
                       help="with --ab: least speedup to ship, as a fraction")
    bench.add_argument("--quality-tolerance", type=float,
                       default=contract.DEFAULT_QUALITY_TOLERANCE,
                       help="with --ab: most validation accuracy lost to ship, in points")
    return parser


def _advise(args: argparse.Namespace) -> int:
    if args.plot:
        require_extra("plot", "advise --plot")  # before the report, which it would follow
    profiles = load_workloads(args.workloads)
    given = load_prices(args.prices) if args.prices else {}
    live = _live_prices(profiles) if args.live_prices else {}
    assessments = [assess_workload(p, prices={**live.get(p.region, {}), **given})
                   for p in profiles]
    print(_json(assessments) if args.json else _table(assessments))
    if args.plot:
        plot(assessments, args.plot)
        if not args.json:
            print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
