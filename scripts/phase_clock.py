"""Times the phases of `make test`, so that the next change that slows it shows in its own run.

    python3 scripts/phase_clock.py PHASE COMMAND [ARG...]   # runs it, appends its seconds
    python3 scripts/phase_clock.py --report                 # prints the phases, then forgets them

Standard library only: it times the virtualenv's own creation too.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

CLOCK = Path(".phase-times")


def timed(phase: str, command: list[str]) -> int:
    start = time.time()
    code = subprocess.call(command)
    with CLOCK.open("a") as clock:
        clock.write(f"{phase}\t{start:.0f}\t{time.time():.0f}\n")
    return code


def report() -> int:
    """Each phase's seconds, and the wall time from the first start to the last end (phases
    that ran side by side overlap in it)."""
    phases: dict[str, int] = {}
    lines = [line.split("\t") for line in CLOCK.read_text().splitlines()] if CLOCK.exists() \
        else []
    for phase, start, end in lines:
        phases[phase] = phases.get(phase, 0) + int(end) - int(start)
    wall = max(int(end) for *_, end in lines) - min(int(start) for _, start, _ in lines) \
        if lines else 0
    print("phase times (s):", ", ".join(f"{p} {s}" for p, s in phases.items()),
          f"| wall {wall}")
    CLOCK.unlink(missing_ok=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--report"]:
        return report()
    if len(argv) < 2:
        sys.exit(__doc__)
    return timed(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
