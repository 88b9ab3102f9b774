"""How the population's reports (claims.md, report.md's placement section) write numbers:
shares with their Wilson interval, multi-bootstrap summaries."""

from __future__ import annotations


def share_text(entry: dict) -> str:
    """'87.5% [52.9, 97.8]' of a count entry (share and its Wilson interval)."""
    if not entry.get("of"):
        return "-"
    lo, hi = entry["ci95"]
    return f"{100 * entry['share']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def number(x, quantity: str = "") -> str:
    if x is None:
        return "-"
    if "step" in quantity:
        return f"{x:.0f}"
    if "accuracy" in quantity:
        return f"{100 * x:.2f}%"
    return f"{x:.3f}"


def summary_text(s: dict | None, quantity: str = "") -> str:
    """'mean [lo, hi] (min-max, n)' of a multi_bootstrap result."""
    if not s:
        return "-"
    lo, hi = s["ci95"]
    return (f"{number(s['mean'], quantity)} [{number(lo, quantity)}, {number(hi, quantity)}] "
            f"({number(s['min'], quantity)} to {number(s['max'], quantity)}, n = {s['n']})")


def verdict_text(entry: dict) -> str:
    """A count entry's verdict, with its lean where the share is strictly inside: 'seed-
    dependent, 1 of 8' (the members that hold it), so that 1 of 8 and 7 of 8 read apart."""
    verdict = entry.get("verdict") or "-"
    if verdict == "seed-dependent" and entry.get("of"):
        return f"{verdict}, {entry['holds']} of {entry['of']}"
    return verdict
