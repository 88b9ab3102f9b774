"""Confidence intervals for accuracies (scipy.stats): every reported accuracy says how sure it is.

    accuracy_interval(486, 500)                       # (0.953.., 0.983..): Wilson, 95%
    accuracy_interval(486, 500, method="exact")       # Clopper-Pearson
    accuracy_intervals({"0var/ind": 0.972}, {"0var/ind": 500})
        # {"0var/ind": {"acc": 0.972, "n": 500, "correct": 486, "ci95": [0.953.., 0.983..]}}
    format_accuracy(0.972, (0.953, 0.983))            # '97.2% [95.3, 98.3]'

An accuracy is a binomial proportion (`correct` of `n` fixed sequences); the interval is
`scipy.stats.binomtest(correct, n).proportion_ci(confidence, method)`, method "wilson"
(default), "exact" or "wilsoncc". It covers the sampling of the evaluation set only, not the
training seed (different seeds differ by more).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.stats import binomtest, norm

METHODS = ("wilson", "exact", "wilsoncc")


def accuracy_interval(
    correct: int, n: int, confidence: float = 0.95, method: str = "wilson"
) -> tuple[float, float]:
    """(low, high) confidence interval of an accuracy of `correct` out of `n`."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n = {n!r}: the number of sequences must be a positive integer")
    if isinstance(correct, bool) or int(correct) != correct or not 0 <= correct <= n:
        raise ValueError(f"correct = {correct!r} must be an integer in 0..n = {n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence = {confidence!r} must lie strictly between 0 and 1")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: use one of {', '.join(METHODS)}")
    ci = binomtest(int(correct), int(n)).proportion_ci(confidence_level=confidence, method=method)
    return float(ci.low), float(ci.high)


def correct_count(accuracy: float, n: int) -> int:
    """The number of correct sequences behind an accuracy measured on `n` of them."""
    if not (isinstance(accuracy, (int, float)) and math.isfinite(accuracy)):
        raise ValueError(f"accuracy {accuracy!r} is not a number")
    if not -1e-9 <= accuracy <= 1 + 1e-9:
        raise ValueError(f"accuracy {accuracy!r} is not in [0, 1]")
    return min(n, max(0, round(accuracy * n)))


def accuracy_intervals(
    accuracies: Mapping[str, float], sizes: Mapping[str, int], confidence: float = 0.95,
    method: str = "wilson", digits: int = 6,
) -> dict[str, dict]:  # fmt: skip
    """Per set: {"acc", "n", "correct", "ci95": [low, high]} from accuracies (fractions) and
    set sizes. Sets without a known size are left out. (The key is "ci95" at the default
    confidence, else e.g. "ci99".)"""
    key = f"ci{round(100 * confidence):d}"
    out = {}
    for name, acc in accuracies.items():
        n = sizes.get(name)
        if not n:
            continue
        correct = correct_count(acc, int(n))
        low, high = accuracy_interval(correct, int(n), confidence, method)
        out[name] = {
            "acc": acc,
            "n": int(n),
            "correct": correct,
            key: [round(low, digits), round(high, digits)],
        }
    return out


def format_accuracy(acc: float | None, interval: tuple[float, float] | None = None) -> str:
    """'97.2% [95.3, 98.3]' (percent, the interval in brackets), '97.2%' without one."""
    if acc is None or (isinstance(acc, float) and not math.isfinite(acc)):
        return "-"
    text = f"{100 * acc:.1f}%"
    if interval is not None:
        low, high = interval
        text += f" [{100 * low:.1f}, {100 * high:.1f}]"
    return text


def wilson_band(accuracy, n: int, confidence: float = 0.95):
    """Vectorised Wilson interval (low, high arrays) of accuracies measured on `n` sequences
    each (the same numbers as `accuracy_interval(..., method="wilson")`, for curves)."""
    if n < 1:
        raise ValueError(f"n = {n!r}: the number of sequences must be a positive integer")
    phat = np.clip(np.rint(np.asarray(accuracy, dtype=float) * n), 0, n) / n
    z = norm.ppf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    center = (phat + z * z / (2 * n)) / denom
    half = z / denom * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
    low = np.where(phat == 0, 0.0, np.clip(center - half, 0, 1))
    high = np.where(phat == 1, 1.0, np.clip(center + half, 0, 1))
    return low, high
