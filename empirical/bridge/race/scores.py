"""The race's scores (docs/race.md, "How it is scored"; issue #45, item 1): the criterion beside
the rules it must beat (the tau-free rule and the fit half's majority class) on every subset
(the fit and test halves; the test half's configurations whose outcome was known when the
criterion was written and the unseen ones; the new test set; and, in each, the regime where
the race decides: inputs trained, no 2-var in training), the test accuracy over every tau the
fit half cannot tell apart, and the new test set's critical rates (where composition stops as
the inputs' rate grows), predicted against observed.
"""

from __future__ import annotations

import math
import statistics

from empirical.bridge.race.criterion import predict
from empirical.bridge.race.fit import (
    accuracy,
    inputs_train,
    majority_class,
    rule_accuracy,
    tau_free,
    tau_scan,
)

RATE = "sgd.lr="  # the inputs' rate: the override the new test set varies
FACTOR = 2.0  # a critical rate "predicted" when within this factor of the observed one


def _decides(r: dict) -> bool:
    """The regime where the race decides: the inputs train and 2-var is not in training
    (there the tau-free rule says "not composed" whatever the rates)."""
    return inputs_train(r["step_zero"]) and not r["step_zero"].two_var_trained


def subsets(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows of each subset that is scored (module docstring)."""
    by = {
        "fit": [r for r in rows if r["split"] == "fit"],
        "test": [r for r in rows if r["split"] == "test"],
        "test_known": [r for r in rows if r["split"] == "test" and r["known_when_written"]],
        "test_unseen": [r for r in rows if r["split"] == "test" and not r["known_when_written"]],
        "new": [r for r in rows if r["split"] == "new"],
    }
    for name in ("fit", "test", "new"):
        by[f"{name}_decides"] = [r for r in by[name] if _decides(r)]
    return by


def scores(rows: list[dict], fit: dict, steps: int) -> dict:
    """race.json's scores of the finished `rows` at the fitted tau (`fit`: fit_tau's)."""
    tau = fit["tau"]
    rules = {
        "criterion": lambda r: predict(r["step_zero"], tau, r["steps"])["predicted"],
        "tau_free": lambda r: tau_free(r["step_zero"], r["steps"]),
    }
    by = subsets(rows)
    table = {}
    for name, sub in by.items():
        if sub:
            majority = majority_class(sub)  # each subset's own: the strictest constant rule
            table[name] = {rule: rule_accuracy(sub, f) for rule, f in rules.items()}
            table[name]["majority"] = rule_accuracy(sub, lambda _r, m=majority: m)
            table[name]["majority_class"] = majority
    acc = {s: accuracy(by[s], tau, steps) for s in ("fit", "test", "new")}
    acc["all"] = accuracy(by["fit"] + by["test"], tau, steps)
    return {
        "accuracy": acc, "counts": {s: len(by[s]) for s in ("fit", "test", "new")},
        "scores": table,
        "tau_scan": {s: tau_scan(by[s], fit["interval"], steps) for s in ("test", "new")
                     if by[s]},
    }  # fmt: skip


def _rate(r: dict) -> float | None:
    words = [o for o in r["overrides"] if o.startswith(RATE)]
    return float(words[-1][len(RATE):]) if words else None


def _setting(r: dict) -> str:
    """A new configuration's setting: everything but its inputs' rate."""
    rest = [o for o in r["overrides"] if not o.startswith(RATE)]
    return "+".join(r["releases"]) + " @ " + ", ".join(rest)


def predicted_critical(r: dict, tau: float) -> float | None:
    """The inputs' rate at which T_mem = tau T_in for this configuration's setting (plain SGD:
    T_in is proportional to 1 / rate): rate tau T_in / T_mem. None without a race."""
    sz, rate = r["step_zero"], _rate(r)
    if rate is None or not 0 < sz.T_in < math.inf or not 0 < sz.T_mem < math.inf:
        return None
    return rate * tau * sz.T_in / sz.T_mem


def observed_critical(points: list[tuple[float, bool]]) -> dict:
    """From (rate, composed) pairs: the largest composing rate `below`, the smallest rate
    above it that does not compose `above`, their geometric middle `critical` (None where
    either is missing: every rate composes, or none), and whether the outcomes are monotone
    (every rate up to `below` composes)."""
    points = sorted(points)
    yes = [x for x, c in points if c]
    below = max(yes) if yes else None
    above = min((x for x, c in points if not c and (below is None or x > below)), default=None)
    monotone = below is None or all(c for x, c in points if x <= below)
    crit = math.sqrt(below * above) if below is not None and above is not None else None
    return {"below": below, "above": above, "critical": crit, "monotone": monotone}


def critical_rates(rows: list[dict], fit: dict) -> list[dict]:
    """Per setting of the new test set: the predicted critical rate (at tau, and its range over
    the fit-equivalent interval of tau), the observed one where the outcomes are in, and
    whether they agree within FACTOR."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["split"] == "new" and _rate(r) is not None:
            groups.setdefault(_setting(r), []).append(r)
    lo, hi = fit["interval"]
    out = []
    for setting, members in groups.items():
        preds = [p for r in members if (p := predicted_critical(r, fit["tau"])) is not None]
        pred = statistics.median(preds) if preds else None
        entry = {"setting": setting, "rates": sorted(_rate(r) for r in members),
                 "predicted": pred, "predicted_range": None, "observed": None,
                 "within_factor": None}  # fmt: skip
        if pred is not None:
            scale = pred / fit["tau"]
            entry["predicted_range"] = [scale * lo, None if hi is None else scale * hi]
        if all(r["composed"] is not None for r in members):
            obs = observed_critical([(_rate(r), r["composed"]) for r in members])
            entry["observed"] = obs
            if pred is not None and obs["critical"] is not None:
                entry["within_factor"] = abs(math.log(pred / obs["critical"])) <= math.log(FACTOR)
        out.append(entry)
    return out
