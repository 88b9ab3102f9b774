"""Fitting the race's one constant tau on the fit half, and scoring the prediction
(docs/race.md, "How it is tested"). The prediction is constant in tau between consecutive fit
values of T_mem / T_in: tau is the geometric middle of the interval with the highest fit
accuracy (ties: the widest in log; unbounded is widest), an unbounded one's finite end x or
/ 10. Rows: dicts with "step_zero" (`StepZero`), "composed" and "split".
"""

from __future__ import annotations

import math

from empirical.bridge.race.criterion import StepZero, predict


def accuracy(rows: list[dict], tau: float, steps: int) -> float | None:
    """Share of `rows` whose prediction at tau equals their outcome (None for no rows)."""
    if not rows:
        return None
    hits = [predict(r["step_zero"], tau, r.get("steps", steps))["predicted"] == r["composed"]
            for r in rows]  # fmt: skip
    return sum(hits) / len(hits)


def _breakpoints(rows: list[dict]) -> list[float]:
    out = set()
    for r in rows:
        sz: StepZero = r["step_zero"]
        if 0 < sz.T_in < math.inf and sz.T_mem < math.inf:
            out.add(sz.T_mem / sz.T_in)
    return sorted(out)


def _candidates(points: list[float]) -> list[tuple[float, float, float]]:
    """(tau, low end, high end) of every interval between consecutive points (and beyond)."""
    if not points:
        return [(1.0, 0.0, math.inf)]
    out = [(points[0] / 10, 0.0, points[0])]
    out += [(math.sqrt(lo * hi), lo, hi) for lo, hi in zip(points, points[1:], strict=False)]
    return out + [(points[-1] * 10, points[-1], math.inf)]


def fit_tau(rows: list[dict], steps: int) -> dict:
    """{"tau", "interval": [low, high], "fit_accuracy"} from the rows of the fit half."""
    fit = [r for r in rows if r["split"] == "fit"]
    best = None
    for tau, lo, hi in _candidates(_breakpoints(fit)):
        acc = accuracy(fit, tau, steps) or 0.0
        width = math.inf if lo == 0 or math.isinf(hi) else math.log(hi / lo)
        key = (acc, width)
        if best is None or key > best[0]:
            best = (key, tau, lo, hi)
    (acc, _), tau, lo, hi = best
    return {"tau": tau, "interval": [lo, None if math.isinf(hi) else hi], "fit_accuracy": acc}
