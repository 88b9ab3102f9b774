"""A sweep's results in words: summary.md, and the sentences of its threshold and of the
threshold's uncertainty (also logged by the commands)."""

from __future__ import annotations

import math
from typing import Any


def uncertainty_sentence(results: dict) -> str:
    """The threshold's uncertainty in words: across seeds, and from the binomial intervals."""
    thr = results["threshold"]
    n = thr.get("n_seeds", 0)
    if not n:
        return ""
    per = thr.get("per_seed", {})
    if n == 1:
        text = "1 seed: no spread across seeds is measured"
    else:
        shown = ", ".join(f"seed {s}: {'none' if t is None else fmt_x(t)}" for s, t in per.items())
        text = f"per-seed thresholds ({n} seeds) {shown}"
        if "seed_min" in thr:
            text += f"; range {fmt_x(thr['seed_min'])} - {fmt_x(thr['seed_max'])}"
    if "ci_range" in thr:
        lo, hi = thr["ci_range"]
        text += ("; from the binomial 95% intervals of the pooled accuracies: "
                 f"{'none' if lo is None else fmt_x(lo)} (upper bounds) to "
                 f"{'none' if hi is None else fmt_x(hi)} (lower bounds)")
    return text


def threshold_sentence(results: dict) -> str:
    thr = results["threshold"]
    metric, target = results["metric"], results["target"]
    if not results["points"]:
        return "no finished members yet"
    if thr["threshold"] is None:
        return f"no threshold: the mean {metric} accuracy stays below {100 * target:g}% at every x"
    text = (f"threshold {fmt_x(thr['threshold'])}: the smallest {results['x_label']} at which "
            f"the mean {metric} accuracy over seeds is >= {100 * target:g}%")
    if not thr["monotone"]:
        stable = thr["stable_threshold"]
        text += " (not monotone: " + (
            f"it stays >= target only from {fmt_x(stable)} up)"
            if stable is not None
            else "the largest swept value falls below the target again)"
        )
    return text


def markdown(results: dict, figure_name: str) -> str:
    lines = [f"# {results['title'].replace(chr(10), ' ')}", ""]
    if results.get("command"):
        lines += ["```", results["command"], "```", ""]
    lines += [f"- swept: `{results['param']}` (x axis: {results['x_label']})",
              f"- metric: `{results['metric']}` ({_evaluated_when(results)}), target "
              f"{results['target']:g}",
              f"- criterion: {results['threshold']['criterion']}",
              f"- **{threshold_sentence(results)}**"]
    if uncertainty_sentence(results):
        lines.append(f"- uncertainty: {uncertainty_sentence(results)}")
    lines += ["", f"![sweep]({figure_name})", ""]
    aux = sorted({a for p in results["points"] for a in p.get("aux", {})})
    has_ci = any("ci95" in p for p in results["points"])
    head = ["x", "seeds", "mean", "std", "min", "max"]
    head += ["95% CI (pooled, binomial)", "sequences"] if has_ci else []
    head += [f"mean {a}" for a in aux]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for p in results["points"]:
        cells = [fmt_x(p["x"]), str(p["n"])] + [_pct(p[k]) for k in ("mean", "std", "min", "max")]
        if has_ci:
            cells += [_ci(p.get("ci95")), str(p.get("n_sequences", "-"))]
        cells += [_pct(p.get("aux", {}).get(a, math.nan)) for a in aux]
        lines.append("| " + " | ".join(cells) + " |")
    member_ci = any(r.get("metric_ci") for r in results["members"])
    lines += ["", "## Members", "",
              "| member | seed | x | step | metric |"
              + (" 95% CI | sequences |" if member_ci else ""),
              "| --- | --- | --- | --- | --- |" + (" --- | --- |" if member_ci else "")]
    for r in results["members"]:
        extra = f" {_ci(r.get('metric_ci'))} | {r.get('metric_n', '-')} |" if member_ci else ""
        lines.append(f"| {r['member']} | {r['seed']} | {fmt_x(r['x'])} | "
                     f"{_or_dash(r.get('final_step'))} | {_pct(r['metric'])} |" + extra)
    if results["missing_members"]:
        lines += ["", "Not finished yet: " + ", ".join(results["missing_members"])]
    for name, reason in results.get("stopped_members", {}).items():
        lines += ["", f"Stopped, not in the figure: {name}: {reason}"]
    return "\n".join(lines) + "\n"


def _evaluated_when(results: dict) -> str:
    step = results.get("at_step")
    return "final evaluation" if step is None else f"evaluation at step {step}"


def fmt_x(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _pct(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


def _ci(interval) -> str:
    return "-" if not interval else f"[{100 * interval[0]:.2f}, {100 * interval[1]:.2f}]%"


def _or_dash(value) -> str:
    return "-" if value is None else str(value)
