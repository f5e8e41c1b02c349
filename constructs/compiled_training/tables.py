"""The library's one table renderer, for the command line's output and the benchmarks' reports:
plain-text columns and Markdown. Imports nothing of the library, so every layer may use it."""

from __future__ import annotations

from collections.abc import Sequence


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text columns: the header, a rule of dashes, then the rows, each column as wide
    as its widest cell; the last is left ragged, as it holds prose (a reason, a path)."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join([*(c.ljust(w) for c, w in zip(cells, widths, strict=False)), cells[-1]])

    rule = ["-" * w for w in widths] + ["-" * len(header[-1])]
    return "\n".join([line(table[0]), line(rule), *(line(row) for row in table[1:])])


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], *, numeric_from: int = 1
             ) -> str:
    """A Markdown table whose columns from ``numeric_from`` on are numbers, right-aligned."""
    align = ["---" if i < numeric_from else "---:" for i in range(len(header))]
    lines = [f"| {' | '.join(header)} |", f"|{'|'.join(align)}|"]
    return "\n".join(lines + [f"| {' | '.join(row)} |" for row in rows])
