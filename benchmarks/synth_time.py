"""Synth time: N TrainingPipelines in one stack against the same template written as raw L1.

The baseline is the exact template the constructs produce, rebuilt resource by resource as
``CfnResource``s with literal properties (the pipeline as a raw ``CfnPipeline`` with a literal
definition): same output, no validation, no SDK, no L2 logic. Each measurement runs in a
fresh process (a user's ``cdk synth`` is one), timing construction plus ``app.synth()``;
the SDK's lazy import is included because a user pays it. Modes alternate within one run.

Usage: python benchmarks/synth_time.py [--repeats 3] [--out benchmarks/RESULTS-synth.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1, 8, 32)


def _constructs_app(n: int, outdir: str):
    import aws_cdk as cdk

    from compiled_training import Compiler, Framework, InputChannel, Parameter, TrainingPipeline

    app = cdk.App(outdir=outdir)
    stack = cdk.Stack(app, "Bench", env=cdk.Environment(account="123456789012",
                                                         region="us-east-1"))
    source = ROOT / "runtime"
    for i in range(n):
        TrainingPipeline(
            stack, f"Team{i}", framework=Framework.pytorch("1.13.1"),
            compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
            instance_count=8, source_dir=source, entry_point="train.py",
            hyperparameters={"epochs": Parameter.integer("Epochs", 3), "batch_size": 32},
            channels=[InputChannel("train", f"s3://bench-data/team{i}/train/")],
        )
    return app


def _raw_app(template: dict, outdir: str):
    import aws_cdk as cdk

    app = cdk.App(outdir=outdir)
    stack = cdk.Stack(app, "Bench", env=cdk.Environment(account="123456789012",
                                                         region="us-east-1"))
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::CDK::Metadata":
            continue
        cfn = cdk.CfnResource(stack, logical_id, type=resource["Type"],
                              properties=resource.get("Properties"))
        cfn.override_logical_id(logical_id)
        if "DeletionPolicy" in resource:
            cfn.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
    for name, mapping in template.get("Mappings", {}).items():
        cdk.CfnMapping(stack, name, mapping=mapping)
    return app


def worker(mode: str, n: int, template_path: str | None) -> None:
    """Runs in its own process: prints the seconds one synth took."""
    template = json.loads(Path(template_path).read_text()) if template_path else None
    with tempfile.TemporaryDirectory() as outdir:
        start = time.perf_counter()
        app = _constructs_app(n, outdir) if mode == "constructs" else _raw_app(template, outdir)
        assembly = app.synth()
        elapsed = time.perf_counter() - start
        if mode == "constructs" and os.environ.get("BENCH_KEEP_TEMPLATE"):
            Path(os.environ["BENCH_KEEP_TEMPLATE"]).write_text(
                json.dumps(assembly.get_stack_by_name("Bench").template))
    print(json.dumps({"seconds": elapsed}))


def _run(mode: str, n: int, template: Path | None, keep: Path | None = None) -> float:
    env = dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    if keep:
        env["BENCH_KEEP_TEMPLATE"] = str(keep)
    args = [sys.executable, __file__, "--worker", mode, str(n)]
    if template:
        args.append(str(template))
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS-synth.md")
    parser.add_argument("--worker", nargs="+")
    args = parser.parse_args()
    if args.worker:
        mode, n, *rest = args.worker
        worker(mode, int(n), rest[0] if rest else None)
        return 0

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            template = Path(tmp) / f"template-{n}.json"
            _run("constructs", n, None, keep=template)  # warm-up, and the baseline's template
            ours, raw = [], []
            for _ in range(args.repeats):
                ours.append(_run("constructs", n, None))
                raw.append(_run("raw", n, template))
            resources = len(json.loads(template.read_text())["Resources"])
            rows.append((n, resources, statistics.median(ours), statistics.median(raw)))
            print(f"{n:>3} pipelines: constructs {rows[-1][2]:.2f} s, raw L1 {rows[-1][3]:.2f} s",
                  file=sys.stderr)

    lines = [
        "# Synth time: TrainingPipeline against raw L1",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.platform()}.",
        f"Median of {args.repeats} fresh-process runs per cell, measured in one run "
        "(`make bench`). Same template on both sides.",
        "",
        "| pipelines | resources | constructs (s) | raw L1 (s) | ratio | constructs s/pipeline |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, resources, ours, raw in rows:
        lines.append(f"| {n} | {resources} | {ours:.2f} | {raw:.2f} | {ours / raw:.2f}x "
                     f"| {ours / n:.3f} |")
    lines += [
        "",
        "What it means: the fixed cost (first row) is loading botocore's SageMaker service",
        "model (the validation source) and the extra CDK modules the constructs use; the",
        "per-pipeline cost is the L2 roles, the acknowledgements and the definition. The",
        "baseline does no validation and no least-privilege policy building. What it does not",
        "mean: on 2 cores the raw L1 times vary by several tenths of a second between runs, so",
        "ratios within about 0.1 of each other are not different. The target in issue 2 is at",
        "most 1.3x at 32 pipelines; compare the last row with it.",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
