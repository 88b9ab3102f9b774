"""Fitting the race's one constant tau on the fit half, and scoring the prediction
(docs/race.md, "How it is tested"). The prediction is constant in tau between consecutive fit
values of T_mem / T_in: tau is the geometric middle of the interval with the highest fit
accuracy (ties: the widest in log; unbounded is widest), an unbounded one's finite end x or
/ 10. Rows: dicts with "step_zero" (`StepZero`), "composed" and "split".

Beside it, the rules the criterion must beat (issue #45): the tau-free rule (`tau_free`: no
race, only whether the inputs train and whether 2-var is trained) and the majority class of
the fit half; and the test accuracy over every tau the fit half cannot tell apart (`tau_scan`).
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


def inputs_train(sz: StepZero) -> bool:
    """Whether layer 1 or the embeddings train (a first-order decrease through them)."""
    return sz.D_in > 0


def tau_free(sz: StepZero, steps: int) -> bool:
    """The rule without tau and without a race: composes iff (layer 1 and the embeddings are
    frozen and T_mem <= S) or (they train and 2-var is in the training data)."""
    if not inputs_train(sz):
        return sz.T_mem <= steps
    return sz.two_var_trained


def majority_class(rows: list[dict]) -> bool:
    """The commoner outcome of `rows` (a tie: "not composed"): the better of the two constant
    answers on the rows it is scored on, known only afterwards, so the strictest trivial rule."""
    outcomes = [r["composed"] for r in rows]
    return 2 * sum(outcomes) > len(outcomes)


def rule_accuracy(rows: list[dict], rule) -> dict | None:
    """{"right": k, "of": n, "accuracy"} of a rule (row -> bool) on `rows` (None: no rows)."""
    if not rows:
        return None
    k = sum(rule(r) == r["composed"] for r in rows)
    return {"right": k, "of": len(rows), "accuracy": k / len(rows)}


def tau_scan(rows: list[dict], interval: list, steps: int) -> list[dict]:
    """Accuracy of `rows` at every tau inside the fit-equivalent `interval` [lo, hi] (hi None:
    unbounded): one entry per piece between consecutive values of the rows' T_mem / T_in
    that fall inside it, {"from", "to", "tau" (its geometric middle), "right", "of"}."""
    lo, hi = interval[0], math.inf if interval[1] is None else interval[1]
    inner = [x for x in _breakpoints(rows) if lo < x < hi]
    edges = [lo, *inner, hi]
    out = []
    for a, b in zip(edges, edges[1:], strict=False):
        if a == 0:
            tau = b / 10
        elif math.isinf(b):
            tau = a * 10
        else:
            tau = math.sqrt(a * b)
        acc = accuracy(rows, tau, steps)
        out.append({"from": a, "to": None if math.isinf(b) else b, "tau": tau,
                    "right": round((acc or 0) * len(rows)), "of": len(rows)})  # fmt: skip
    return out


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
