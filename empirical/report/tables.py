"""How every report of `empirical` writes numbers and tables in markdown."""

from __future__ import annotations


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown_table(header: str, rows) -> list[str]:
    """A markdown table's lines: `header` and each of `rows` are its cells joined by ' | '."""
    width = header.count(" | ") + 1
    return [f"| {header} |", "|" + " --- |" * width, *(f"| {row} |" for row in rows)]
