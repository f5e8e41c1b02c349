"""The test suite's clock: where a full run's time goes, and which real processes its tests start.

    python scripts/suite_report.py DIR [--processes OUT.json] [--against BEFORE.json]
                                       [--durations tests/durations.json]

DIR holds the lines ``pytest -p tests.suite_clock --suite-clock=DIR`` wrote. It prints, as
Markdown, each worker's busy time, the files and tests that cost most, and the processes by
kind. ``--processes`` writes each test id's processes (paths made machine-neutral);
``--against`` checks that every distinct process of an earlier run is still started by some
test, and exits 1 naming those that are not. ``--durations`` writes the seconds of each test
that takes at least ``LONG_SECONDS``, which ``tests/conftest.py`` reads to start them first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_FILES = 25
TOP_TESTS = 40
LONG_SECONDS = 1.0
_TMP = re.compile(r"/tmp/[^\s'\"]*?pytest-\d+/|/tmp/tmp[\w-]+/|/tmp/[\w.-]*?\d[\w.-]*/")
_XDIST_GROUP = re.compile(r"@[\w-]+$")
_PYENV = re.compile(r"\S*/\.pyenv/(?:shims|versions/[^/]+/bin)/")
_PORT = re.compile(r"(port[=:])\d+")
_NUMBERED = re.compile(r"(?<=[a-zA-Z_-])\d+(?=/|$)")


def neutral(part: str, root: Path = ROOT) -> str:
    """One argument without the run's checkout, the temporary folders or their numbers."""
    part = part.replace(str(root), "<root>")
    # pyenv's shim and the interpreter it execs are one Python.
    part = _PYENV.sub("<pyenv>/", _PORT.sub(r"\1N", _TMP.sub("<tmp>/", part)))
    if "<tmp>" in part:
        part = _NUMBERED.sub("N", part)
    return part


def kind(argv: list[str]) -> str:
    """What a process is, for the report: the CDK CLI, an install, a side environment's run..."""
    words = " ".join(argv)
    program = Path(argv[0]).name if argv else ""
    side = re.search(r"\.venvs/([\w.-]+)/bin/python", argv[0]) if argv else None
    if argv[:1] == ["multiprocessing"]:
        return "multiprocessing (in the main environment)"
    if "cdk" in (program, *argv[1:2]) or "node_modules/.bin/cdk" in words or "aws-cdk" in words:
        return "CDK CLI"
    if program == "node":
        return "node (jsii kernel or a script)"
    if re.search(r"\b(pip|uv)\b.*\binstall\b", words):
        return "package install (pip or uv)"
    if re.search(r"-m build\b|bdist_wheel|\bpip wheel\b", words):
        return "wheel build"
    for tool in ("mkdocs", "mypy", "ruff", "lint-imports", "cfn-lint", "checkov", "hadolint",
                 "docker", "git"):
        if re.search(rf"(^|[/\s-]){re.escape(tool)}(\s|$)", words):
            return f"tool: {tool}"
    where = (f"side environment {side.group(1)}" if side
             else "the main environment" if "/.venv/bin/" in argv[0]
             else "a test's own virtualenv" if argv[0].startswith("/tmp/")
             else "another interpreter" if program.startswith("python") else "")
    if not where:
        return program
    if "compiled_training.tools.cli" in words:
        return f"compiled-training CLI ({where})"
    if "sagemaker_training" in words:
        return f"training toolkit ({where})"
    if re.search(r"\btrain\.py\b|torchrun|bench", words):
        return f"training or benchmark run ({where})"
    return f"python ({where})"


def read(folder: Path) -> list[dict]:
    tests = []
    for lines in sorted(folder.glob("*.jsonl")):
        tests += [json.loads(line) for line in lines.read_text().splitlines() if line]
    for test in tests:  # ids from the checkout's root, whatever root pytest chose, no group
        test["nodeid"] = _XDIST_GROUP.sub("", test["nodeid"][test["nodeid"].index("tests/"):])
    return tests


def seconds(test: dict) -> float:
    return sum(test["phases"].values())


def report(tests: list[dict]) -> str:
    out = [f"{len(tests)} tests, {sum(map(seconds, tests)):.0f} s of test time in all.", ""]
    workers: dict[str, list[dict]] = defaultdict(list)
    for test in tests:
        workers[test["worker"]].append(test)
    out += ["| worker | tests | busy s | first start to last end, s |", "|---|---:|---:|---:|"]
    for worker, own in sorted(workers.items()):
        span = max(t["started"] + seconds(t) for t in own) - min(t["started"] for t in own)
        out.append(f"| {worker} | {len(own)} | {sum(map(seconds, own)):.0f} | {span:.0f} |")
    files: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for test in tests:
        name = test["nodeid"].split("::")[0]
        files[name] += seconds(test)
        counts[name] += 1
    out += ["", f"The {TOP_FILES} costliest files:", "", "| file | tests | s |", "|---|---:|---:|"]
    out += [f"| `{name}` | {counts[name]} | {s:.0f} |" for name, s in files.most_common(TOP_FILES)]
    out += ["", f"The {TOP_TESTS} slowest tests (setup includes the session fixtures a test built "
            "first):", "", "| test | setup s | call s |", "|---|---:|---:|"]
    for test in sorted(tests, key=seconds, reverse=True)[:TOP_TESTS]:
        phases = test["phases"]
        out.append(f"| `{test['nodeid']}` | {phases.get('setup', 0):.1f} | "
                   f"{phases.get('call', 0):.1f} |")
    kinds: Counter[str] = Counter()
    costs: Counter[str] = Counter()
    starters: dict[str, set[str]] = defaultdict(set)
    for test in tests:
        own = {kind(argv) for argv in test["processes"]}
        for argv in test["processes"]:
            kinds[kind(argv)] += 1
            starters[kind(argv)].add(test["nodeid"])
        for name in own:
            costs[name] += seconds(test)
    out += ["", "The processes the tests start, by kind (a test's time counts once under each "
            "kind it starts):", "", "| kind | processes | tests | those tests' s |",
            "|---|---:|---:|---:|"]
    out += [f"| {name} | {n} | {len(starters[name])} | {costs[name]:.0f} |"
            for name, n in kinds.most_common()]
    none = [t for t in tests if not t["processes"]]
    out += ["", f"Tests that start no process: {len(none)}, {sum(map(seconds, none)):.0f} s."]
    return "\n".join(out) + "\n"


def processes(tests: list[dict], root: Path = ROOT) -> dict[str, list[list[str]]]:
    return {t["nodeid"]: [[neutral(part, root) for part in argv] for argv in t["processes"]]
            for t in sorted(tests, key=lambda t: t["nodeid"]) if t["processes"]}


def missing(before: dict[str, list[list[str]]], after: dict[str, list[list[str]]]) -> list[str]:
    """The distinct processes started before that no test starts after."""
    started = {json.dumps(argv) for argvs in after.values() for argv in argvs}
    lost = {}
    for nodeid, argvs in before.items():
        for argv in argvs:
            if json.dumps(argv) not in started:
                lost.setdefault(json.dumps(argv), nodeid)
    return [f"{nodeid}: {argv}" for argv, nodeid in sorted(lost.items())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--processes", type=Path, help="write each test's processes here")
    parser.add_argument("--against", type=Path, help="an earlier run's --processes file")
    parser.add_argument("--durations", type=Path, help="write the long tests' seconds here")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout the run was in (this one by default)")
    args = parser.parse_args()
    tests = read(args.folder)
    print(report(tests))
    started = processes(tests, args.root)
    if args.processes:
        args.processes.write_text(json.dumps(started, indent=1) + "\n")
    if args.durations:
        long = {t["nodeid"]: round(seconds(t), 1) for t in tests if seconds(t) >= LONG_SECONDS}
        args.durations.write_text(json.dumps(dict(sorted(long.items())), indent=1) + "\n")
    if args.against:
        lost = missing(json.loads(args.against.read_text()), started)
        for line in lost:
            print(f"no longer started: {line}")
        return 1 if lost else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
