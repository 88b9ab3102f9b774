"""The sweep's figure (Figure 3's panel): the metric against the swept value, over seeds,
with the target and the threshold."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from empirical.experiments.sweep.summary_md import fmt_x
from empirical.experiments.sweep.thresholds import numeric
from empirical.report.figures import OKABE_ITO, save_figure


def _draw_uncertainty(ax, results: dict, pos: list, is_num: bool, color) -> None:
    """Error bars of the pooled binomial 95% intervals and a shaded span between the
    smallest and largest per-seed threshold (numeric x, when there is a spread)."""
    points = results["points"]
    if points and all("ci95" in p for p in points):
        mean = np.array([p["mean"] for p in points]) * 100
        lo = np.array([p["ci95"][0] for p in points]) * 100
        hi = np.array([p["ci95"][1] for p in points]) * 100
        pooled = np.array([p["correct"] / p["n_sequences"] for p in points]) * 100
        err = np.clip(np.stack([pooled - lo, hi - pooled]), 0, None)
        ax.errorbar(
            pos, mean, yerr=err, fmt="none", ecolor=color, elinewidth=1, capsize=2,
            label="binomial 95% CI (pooled)",
        )  # fmt: skip
    thr = results["threshold"]
    if is_num and thr.get("seed_min") is not None and thr["seed_max"] != thr["seed_min"]:
        ax.axvspan(
            thr["seed_min"], thr["seed_max"], color="gray", alpha=0.12,
            label=f"per-seed thresholds {fmt_x(thr['seed_min'])}-{fmt_x(thr['seed_max'])}",
        )  # fmt: skip


def plot_sweep(results: dict, path: Path | None = None, *, fmt: str | None = None):
    """Final accuracy against the swept value (Figure 3): mean and min-max band over seeds,
    each member as a dot, the target and the threshold. Returns the Figure; writes it to
    `path` (png, pdf or svg: the suffix, or `fmt`) and closes it when a path is given."""
    blue, others = OKABE_ITO["blue"], ["orange", "green", "vermillion", "purple", "sky"]
    points = results["points"]
    xs = [p["x"] for p in points]
    is_num = numeric(xs)
    pos = xs if is_num else list(range(len(xs)))
    fig, ax = plt.subplots(figsize=(8.5, 4.8), layout="constrained")
    mean = np.array([p["mean"] for p in points]) * 100
    lo = np.array([p["min"] for p in points]) * 100
    hi = np.array([p["max"] for p in points]) * 100
    n = max(p["n"] for p in points)
    if n > 1:  # one seed has no spread to show
        ax.fill_between(pos, lo, hi, alpha=0.25, color=blue, label=f"min-max over {n} seeds")
    ax.plot(pos, mean, "o-", color=blue, label=f"mean {results['metric']}")
    _draw_uncertainty(ax, results, pos, is_num, blue)
    where = {x: i for i, x in enumerate(xs)}
    for r in results["members"]:
        px = r["x"] if is_num else where.get(r["x"])
        if px is not None:
            ax.plot(px, 100 * r["metric"], ".", color=blue, alpha=0.6, ms=4)
    for j, aux in enumerate(sorted({a for p in points for a in p.get("aux", {})})):
        vals = [100 * p.get("aux", {}).get(aux, math.nan) for p in points]
        color = OKABE_ITO[others[j % len(others)]]
        ax.plot(pos, vals, "--", lw=1, color=color, label=f"mean {aux}")
    target = 100 * results["target"]
    ax.axhline(target, color="gray", ls=":", lw=1, label=f"target {target:g}%")
    thr = results["threshold"]["threshold"]
    stable = results["threshold"].get("stable_threshold")
    if thr is not None:
        tx = thr if is_num else where[thr]
        ax.axvline(tx, color="black", ls="-.", lw=1.2, label=f"threshold {fmt_x(thr)}")
    if stable is not None and stable != thr:
        sx = stable if is_num else where[stable]
        ax.axvline(
            sx, color=OKABE_ITO["purple"], ls=":", lw=1, label=f"stable threshold {fmt_x(stable)}"
        )
    if not is_num:
        ax.set_xticks(pos, [str(x) for x in xs])
    elif min(xs) > 0 and max(xs) > 1 and max(xs) / min(xs) >= 10:  # e.g. ratios 0.25 .. 8
        # (fractions in (0, 1], e.g. the paper's pair fractions 0.06 .. 0.99, stay linear)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [fmt_x(x) for x in xs])
        ax.minorticks_off()
    ax.set_xlabel(results["x_label"])
    when = "final" if results.get("at_step") is None else f"step-{results['at_step']}"
    ax.set_ylabel(f"{when} accuracy, {results['metric']} (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(results["title"], fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, fmt)
