"""Detect the paper's three training phases (Section 6) from a run's metrics log.

- phase 1 ends when 0-var addition is learned: the first evaluation where the 0-var
  in-distribution accuracy reaches 90% (`zero_var_learned`);
- the first spike: the rise of variable-operand accuracy (mean over the 1-var and 2-var
  in-distribution and pair-restricted sets), searched from the end of phase 1 on;
- the second spike: the rise of var-restricted accuracy (mean over the `*/var` and `*/both`
  sets), searched from the first spike's plateau on (from the end of phase 1 without one).

How a spike of a series is found from a search start on (`find_rise`):

1. Through its 90% level: if the series first reaches 90% at evaluation c, the rise from the
   lowest value within `window` steps before c (not before the start) to the highest within
   `window` steps after c (`rule = "through_90"`): the rise by which the sets are learned,
   however long the plateau before it. (On the authors' run the var-restricted mean first
   rises with the first spike, sits near 0.73 for 8 000 steps and is learned only later; the
   earlier rise is larger within any window, so the steepest window alone would report it.)
2. Otherwise (no 90% after the start, or that rise gains less than `min_gain`): the window of
   at most `window` steps with the largest gain (`rule = "steepest"`).

A rise counts as a spike only if it gains at least `min_gain` (default 0.2); else the entry is
None. Each spike reports its window (`start_step`, `end_step`, `gain`), its jump (the
consecutive pair of evaluations with the largest increase: `jump_start_step`, `jump_end_step`,
`jump_gain`) and `plateau_step` (the first evaluation from the jump on with 90% of the gain).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Rise:
    start_step: int  # first step of the spike's window
    end_step: int  # last step of the spike's window
    gain: float  # accuracy gained inside it
    reached_90_step: int | None  # first evaluation step at >= 90%
    jump_start_step: int | None = None  # the consecutive pair of evaluations in the window
    jump_end_step: int | None = None  # with the largest increase ...
    jump_gain: float | None = None  # ... and that increase
    plateau_step: int | None = None  # first evaluation from the jump on with 90% of the gain
    rule: str = "steepest"  # "through_90" or "steepest" (see the module docstring)


@dataclass
class Phases:
    zero_var_learned_step: int | None
    first_spike: Rise | None  # variable routing (non-restricted variable sets)
    second_spike: Rise | None  # var-restricted sets
    variable_series: str
    restricted_series: str

    def to_dict(self) -> dict:
        return asdict(self)


VARIABLE_SETS = ("1var/ind", "1var/pair", "2var/ind", "2var/pair")
RESTRICTED_SETS = ("1var/var", "1var/both", "2var/var", "2var/both")
LEVEL = 0.9


def mean_series(records: list[dict], names: tuple[str, ...]) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for r in records:
        present = [r["acc"][n] for n in names if n in r["acc"]]
        if present:
            steps.append(r["step"])
            values.append(sum(present) / len(present))
    return steps, values


def first_crossing(
    steps: list[int], values: list[float], level: float, start: int | None = None
) -> int | None:
    """The first step (at or after `start`) whose value is >= level."""
    for s, v in zip(steps, values, strict=True):
        if v >= level and (start is None or s >= start):
            return s
    return None


def _complete(steps: list[int], values: list[float], i: int, j: int, rule: str) -> Rise:
    """The Rise over evaluations i..j: its jump and plateau filled in."""
    k = max(range(i, j), key=lambda m: (values[m + 1] - values[m], -m))
    target = values[i] + LEVEL * (values[j] - values[i])
    plateau = next((steps[m] for m in range(k + 1, len(steps)) if values[m] >= target), None)
    return Rise(
        start_step=steps[i], end_step=steps[j], gain=values[j] - values[i],
        reached_90_step=first_crossing(steps, values, LEVEL), jump_start_step=steps[k],
        jump_end_step=steps[k + 1], jump_gain=values[k + 1] - values[k], plateau_step=plateau,
        rule=rule,
    )  # fmt: skip


def _steepest(steps, values, window: int, start: int) -> tuple[float, int, int] | None:
    best = None
    for i in range(len(steps)):
        if steps[i] < start:
            continue
        j = i
        while j + 1 < len(steps) and steps[j + 1] - steps[i] <= window:
            j += 1
        if j == i:
            continue
        gain = values[j] - values[i]
        if best is None or gain > best[0]:
            best = (gain, i, j)
    return best


def steepest_rise(
    steps: list[int], values: list[float], window: int, min_gain: float, start: int = 0
) -> Rise | None:
    """The window of at most `window` steps, beginning at or after `start`, over which
    `values` gains the most (None if it gains less than `min_gain`)."""
    best = _steepest(steps, values, window, start)
    if best is None or best[0] < min_gain:
        return None
    return _complete(steps, values, best[1], best[2], "steepest")


def rise_through_level(
    steps: list[int], values: list[float], window: int, min_gain: float, start: int = 0,
    level: float = LEVEL,
) -> Rise | None:  # fmt: skip
    """The rise through the first evaluation c at or after `start` at >= `level`: from the
    lowest value within `window` steps before c (not before `start`) to the highest within
    `window` steps after c, `window` at least two evaluation intervals (None: no crossing, or
    a gain below `min_gain`)."""
    c = next((m for m, s in enumerate(steps) if s >= start and values[m] >= level), None)
    if c is None:
        return None
    # at least two evaluation intervals each side, so a coarse log still sees the plateau
    reach = max(window, 2 * (steps[c] - steps[c - 1])) if c > 0 else window
    before = [m for m in range(c + 1) if steps[m] >= max(start, steps[c] - reach)]
    after = [m for m in range(c, len(steps)) if steps[m] <= steps[c] + reach]
    i = min(before, key=lambda m: (values[m], -m))  # the lowest; the latest of equals
    j = max(after, key=lambda m: (values[m], -m))  # the highest; the earliest of equals
    if j <= i or values[j] - values[i] < min_gain:
        return None
    return _complete(steps, values, i, j, "through_90")


def find_rise(
    steps: list[int], values: list[float], window: int, min_gain: float, start: int = 0
) -> Rise | None:
    """The spike of a series from `start` on: the rise through its 90% level, else the
    steepest window (see the module docstring)."""
    rise = rise_through_level(steps, values, window, min_gain, start)
    return rise if rise is not None else steepest_rise(steps, values, window, min_gain, start)


def detect_phases(
    records: list[dict], window: int = 1000, min_gain: float = 0.2, sets=None
) -> Phases:
    """The phases of a metrics log. sets: the series to read (a task family's `phase_sets`:
    zero, variable, restricted; default the paper's, 0var/ind, VARIABLE_SETS, RESTRICTED_SETS)."""
    zero_sets = ("0var/ind",) if sets is None else tuple(sets.zero)
    variable_sets = VARIABLE_SETS if sets is None else tuple(sets.variable)
    restricted_sets = RESTRICTED_SETS if sets is None else tuple(sets.restricted)
    steps0, zero = mean_series(records, zero_sets)
    sv, var = mean_series(records, variable_sets)
    sr, restricted = mean_series(records, restricted_sets)
    zero_learned = first_crossing(steps0, zero, LEVEL)
    first = find_rise(sv, var, window, min_gain, start=zero_learned or 0)
    if first is not None:
        second_start = first.plateau_step if first.plateau_step is not None else first.end_step
    else:
        second_start = zero_learned or 0
    second = find_rise(sr, restricted, window, min_gain, start=second_start)
    return Phases(
        zero_var_learned_step=zero_learned,
        first_spike=first,
        second_spike=second,
        variable_series="mean of " + ", ".join(variable_sets),
        restricted_series="mean of " + ", ".join(restricted_sets),
    )
