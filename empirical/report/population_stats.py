"""The statistics of a population of runs (docs/populations.md, "Intervals"; scipy.stats where
it has the statistic): Wilson intervals of shares, Kaplan-Meier survival of a jump (members
without it right-censored at their last step), the log-rank and Fisher tests between
populations, the Mann-Whitney U test of two populations' per-member values, the
multi-bootstrap over members and evaluation sequences (Sellam et al. 2022).

    share_interval(7, 8)                       # (0.529.., 0.977..): Wilson 95% of 7 of 8
    kaplan_meier([3400, None, 5600], [40000, 40000, 40000])   # Survival: S(t) with censoring
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import CensoredData, ecdf, mannwhitneyu
from scipy.stats import fisher_exact as scipy_fisher
from scipy.stats import logrank as scipy_logrank

from empirical.report.stats import accuracy_interval

CONFIDENCE = 0.95
BOOTSTRAP_DRAWS = 10_000
BOOTSTRAP_SEED = 35  # issue #35: the draws are fixed, so the same files give the same interval


def share_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson interval of a share k / n (None when n = 0)."""
    if n == 0:
        return None
    return accuracy_interval(int(k), int(n), confidence, "wilson")


@dataclass
class Survival:
    """A Kaplan-Meier survival curve: `survival[i]` is the estimated share of members still
    before the event just after `steps[i]` (a step function, 1.0 before `steps[0]`)."""

    steps: list[int] = field(default_factory=list)
    survival: list[float] = field(default_factory=list)
    n: int = 0  # members
    events: int = 0  # members with the event
    censored: list[int] = field(default_factory=list)  # steps at which members were censored

    def at(self, step: float) -> float:
        """S(step): the share of members estimated still before the event at `step`."""
        value = 1.0
        for s, v in zip(self.steps, self.survival, strict=True):
            if s > step:
                break
            value = v
        return value

    def median(self) -> int | None:
        """The first step by which half the members are estimated past the event (None: not
        reached within the observed steps)."""
        return next((s for s, v in zip(self.steps, self.survival, strict=True) if v <= 0.5), None)

    def to_dict(self) -> dict:
        return {"steps": self.steps, "survival": [round(v, 6) for v in self.survival], "n": self.n,
                "events": self.events, "censored": self.censored, "median": self.median()}


def _split(times: Sequence[int | None], last: Sequence[int]) -> tuple[list[int], list[int]]:
    if len(times) != len(last):
        raise ValueError(f"{len(times)} event steps but {len(last)} last steps")
    events = [int(t) for t in times if t is not None]
    censored = [int(c) for t, c in zip(times, last, strict=True) if t is None]
    return events, censored


def _censored_data(events: list[int], censored: list[int]):
    return CensoredData(uncensored=np.asarray(events, float), right=np.asarray(censored, float))


def kaplan_meier(times: Sequence[int | None], last: Sequence[int]) -> Survival:
    """Survival of an event (a jump) over members: `times[m]` the step of member m's event
    (None: it has none), `last[m]` its last evaluated step (where a member without the event
    is censored)."""
    events, censored = _split(times, last)
    n = len(events) + len(censored)
    if not events:  # nobody has the event: S = 1 throughout (scipy needs one event)
        return Survival([], [], n, 0, sorted(censored))
    sf = ecdf(_censored_data(events, censored)).sf
    return Survival(steps=[int(q) for q in sf.quantiles],
                    survival=[float(p) for p in sf.probabilities], n=n, events=len(events),
                    censored=sorted(censored))  # fmt: skip


def logrank(times_a: Sequence[int | None], last_a: Sequence[int], times_b: Sequence[int | None],
            last_b: Sequence[int]) -> dict:  # fmt: skip
    """Log-rank test of two populations' event steps (two-sided): {"statistic", "pvalue",
    "events": [a, b], "n": [a, b]}; pvalue None when neither population has an event (no
    information to compare) or one is empty; statistic 0 and pvalue 1 when the statistic's
    variance is zero (both populations' events all at the same step: nothing tells them
    apart)."""
    ea, ca = _split(times_a, last_a)
    eb, cb = _split(times_b, last_b)
    out = {
        "test": "log-rank (scipy.stats.logrank), two-sided; members without the event censored "
        "at their last evaluated step",
        "events": [len(ea), len(eb)], "n": [len(ea) + len(ca), len(eb) + len(cb)],
        "statistic": None, "pvalue": None,
    }  # fmt: skip
    if not (ea or eb) or not (ea or ca) or not (eb or cb):
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        res = scipy_logrank(_censored_data(ea, ca), _censored_data(eb, cb))
    if math.isfinite(res.statistic) and math.isfinite(res.pvalue):
        out["statistic"], out["pvalue"] = float(res.statistic), float(res.pvalue)
    elif math.isnan(res.statistic):
        # zero variance: every member still at risk has its event at the same step in both
        # populations (observed = expected at every step), so nothing tells them apart
        out["statistic"], out["pvalue"] = 0.0, 1.0
    return out


def fisher_exact(k_a: int, n_a: int, k_b: int, n_b: int) -> float | None:
    """Two-sided p-value of Fisher's exact test for k_a of n_a against k_b of n_b."""
    if n_a == 0 or n_b == 0:
        return None
    return float(scipy_fisher([[k_a, n_a - k_a], [k_b, n_b - k_b]]).pvalue)


def mann_whitney(a: Sequence[float | None], b: Sequence[float | None]) -> dict:
    """Two-sided Mann-Whitney U test of two populations' per-member values (None left out):
    {"test", "n": [a, b], "statistic", "pvalue"} (None with an empty side); scipy chooses the
    exact distribution for small samples without ties, else the normal approximation."""
    x = [v for v in a if v is not None and math.isfinite(v)]
    y = [v for v in b if v is not None and math.isfinite(v)]
    out = {"test": "Mann-Whitney U (scipy.stats.mannwhitneyu), two-sided", "n": [len(x), len(y)],
           "statistic": None, "pvalue": None}  # fmt: skip
    if x and y:
        res = mannwhitneyu(x, y, alternative="two-sided")
        out["statistic"], out["pvalue"] = float(res.statistic), float(res.pvalue)
    return out


def multi_bootstrap(
    values: Sequence[float | None], sizes: Sequence[int | None] | None = None,
    draws: int = BOOTSTRAP_DRAWS, confidence: float = CONFIDENCE, seed: int = BOOTSTRAP_SEED,
) -> dict | None:  # fmt: skip
    """Mean over members of a per-member quantity with its multi-bootstrap interval: each draw
    resamples the members and, where `sizes[m]` (evaluation sequences behind an accuracy) is
    given, their sequences (a binomial draw). `values[m]` None: left out. Returns {"mean",
    "ci95": [lo, hi], "n", "median", "min", "max", "resampled"}, or None if no member has a
    value."""
    keep = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if not keep:
        return None
    x = np.asarray([values[i] for i in keep], dtype=float)
    n_seq = None
    if sizes is not None:
        if len(sizes) != len(values):
            raise ValueError(f"{len(values)} values but {len(sizes)} sizes")
        kept = [sizes[i] for i in keep]
        if all(s is not None and s > 0 for s in kept):
            n_seq = np.asarray(kept, dtype=np.int64)
            if ((x < 0) | (x > 1)).any():
                raise ValueError("values with sizes are accuracies: each must lie in [0, 1]")
    rng = np.random.default_rng(seed)
    n = len(x)
    idx = rng.integers(0, n, size=(draws, n))
    sample = x[idx]
    if n_seq is not None:
        sample = rng.binomial(n_seq[idx], sample) / n_seq[idx]
    means = sample.mean(axis=1)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    key = f"ci{round(100 * confidence):d}"
    return {
        "mean": float(x.mean()), key: [float(lo), float(hi)], "n": n,
        "median": float(np.median(x)), "min": float(x.min()), "max": float(x.max()),
        "resampled": "members and evaluation sequences" if n_seq is not None else "members",
    }  # fmt: skip
