"""A sweep's curve over seeds and its threshold (docs/sweep.md, "Threshold criterion" and
"Uncertainty"): the smallest swept x at which the mean over seeds is >= the target (None if no
x passes); `stable_threshold`: the smallest x at which it passes and at every larger x (None
when the largest x fails); and the threshold's spread over seeds and binomial intervals.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from empirical.report.stats import accuracy_interval


def find_threshold(xs: list[float], means: list[float], target: float) -> dict[str, Any]:
    """Threshold of a curve (the module docstring). xs need not be sorted."""
    pts = sorted((float(x), float(m)) for x, m in zip(xs, means, strict=True))
    passing = [(not math.isnan(m)) and m >= target for _, m in pts]
    stable = None
    for i in range(len(pts) - 1, -1, -1):
        if not passing[i]:
            break
        stable = pts[i][0]
    first = next((x for (x, _), ok in zip(pts, passing, strict=True) if ok), None)
    return {
        "threshold": first, "stable_threshold": stable, "monotone": stable == first,
        "target": target,
        "criterion": f"smallest swept x with mean accuracy over seeds >= {target:g} (stable: also "
        "at every larger swept x)",
    }  # fmt: skip


def aggregate(rows: list[dict], key: str = "metric") -> list[dict]:
    """Per x: n, mean, std (population), min, max of rows[key] over seeds, sorted by x."""
    by_x: dict[Any, list[float]] = {}
    for r in rows:
        by_x.setdefault(r["x"], []).append(r[key])
    out = []
    for x in sorted(by_x, key=_sort_key):
        v = np.array(by_x[x], dtype=float)
        out.append({"x": x, "n": int(v.size), "mean": float(v.mean()), "std": float(v.std()),
                    "min": float(v.min()), "max": float(v.max())})  # fmt: skip
    return out


def _sort_key(x: Any):
    return (0, float(x), "") if isinstance(x, (int, float)) else (1, 0.0, str(x))


def numeric(xs: list[Any]) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def curve_threshold(points: list[dict], values: list[float], target: float) -> dict:
    """find_threshold over the points' x (categorical x: in the order given)."""
    xs = [p["x"] for p in points]
    if numeric(xs):
        return find_threshold(xs, values, target)
    idx = list(range(len(points)))
    thr = find_threshold(idx, values, target)
    for k in ("threshold", "stable_threshold"):
        thr[k] = None if thr[k] is None else points[int(thr[k])]["x"]
    return thr


def pooled_intervals(rows: list[dict], points: list[dict]) -> None:
    """Each point's binomial 95% interval (`ci95`) of the metric, its correct answers pooled
    over seeds, when every member at that x measured the metric on one set of known size."""
    for p in points:
        mine = [r for r in rows if r["x"] == p["x"]]
        if not mine or any(r.get("metric_n") is None for r in mine):
            continue
        n = sum(int(r["metric_n"]) for r in mine)
        correct = sum(int(r["metric_correct"]) for r in mine)
        p["n_sequences"], p["correct"] = n, correct
        p["ci95"] = [round(v, 6) for v in accuracy_interval(correct, n)]


def threshold_uncertainty(rows: list[dict], points: list[dict], target: float) -> dict:
    """The threshold of each seed's own curve (spread across seeds) and the range of thresholds
    the points' binomial intervals allow (`ci_range`: the smallest x whose upper bound, and
    whose lower bound, reaches the target)."""
    by_seed: dict[int, list[dict]] = {}
    for r in rows:
        by_seed.setdefault(r["seed"], []).append(r)
    per_seed = {}
    for seed in sorted(by_seed):
        pts = aggregate(by_seed[seed])
        per_seed[str(seed)] = curve_threshold(pts, [p["mean"] for p in pts], target)["threshold"]
    found = [t for t in per_seed.values() if t is not None]
    out: dict[str, Any] = {"n_seeds": len(per_seed), "per_seed": per_seed}
    if found and numeric(found):
        out["seed_min"], out["seed_max"] = min(found), max(found)
    out["seeds_without_threshold"] = len(per_seed) - len(found)
    if points and all("ci95" in p for p in points):
        upper = curve_threshold(points, [p["ci95"][1] for p in points], target)["threshold"]
        lower = curve_threshold(points, [p["ci95"][0] for p in points], target)["threshold"]
        out["ci_range"] = [upper, lower]  # earliest and latest threshold the intervals allow
    return out
