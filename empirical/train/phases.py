"""Detect the paper's three training phases (Section 6) from a run's metrics log.

- phase 1 ends when 0-var addition is learned: the first evaluation where the 0-var
  in-distribution accuracy reaches 90% (`zero_var_learned`);
- the first spike: the sharpest rise of variable-operand accuracy (the mean over the 1-var and
  2-var in-distribution and pair-restricted sets) from the end of phase 1 on, i.e. the window
  of `window` steps with the largest gain, and the first step where it reaches 90%;
- the second spike: the same for var-restricted accuracy (mean over the `*/var` and `*/both`
  sets), from the start of the first spike on.

Searching each spike only after the previous event keeps the early rise that comes with 0-var
addition (variable sequences whose answer needs no routing, e.g. by chance) from being taken
for the routing spike.

A rise counts as a spike only if it gains at least `min_gain` (default 0.2) within the window;
otherwise the entry is None and the summary says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Rise:
    start_step: int  # first step of the steepest window
    end_step: int  # last step of the steepest window
    gain: float  # accuracy gained inside it
    reached_90_step: int | None  # first evaluation step at >= 90%


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


def mean_series(records: list[dict], names: tuple[str, ...]) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for r in records:
        present = [r["acc"][n] for n in names if n in r["acc"]]
        if present:
            steps.append(r["step"])
            values.append(sum(present) / len(present))
    return steps, values


def first_crossing(steps: list[int], values: list[float], level: float) -> int | None:
    for s, v in zip(steps, values, strict=True):
        if v >= level:
            return s
    return None


def steepest_rise(
    steps: list[int], values: list[float], window: int, min_gain: float, start: int = 0
) -> Rise | None:
    """The window of at most `window` steps, beginning at or after `start`, over which
    `values` gains the most."""
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
            best = (gain, steps[i], steps[j])
    if best is None or best[0] < min_gain:
        return None
    return Rise(best[1], best[2], best[0], first_crossing(steps, values, 0.9))


def detect_phases(records: list[dict], window: int = 1000, min_gain: float = 0.2) -> Phases:
    steps0, zero = mean_series(records, ("0var/ind",))
    sv, var = mean_series(records, VARIABLE_SETS)
    sr, restricted = mean_series(records, RESTRICTED_SETS)
    zero_learned = first_crossing(steps0, zero, 0.9)
    first = steepest_rise(sv, var, window, min_gain, start=zero_learned or 0)
    second = steepest_rise(sr, restricted, window, min_gain, start=first.start_step if first else 0)
    return Phases(
        zero_var_learned_step=zero_learned,
        first_spike=first,
        second_spike=second,
        variable_series="mean of " + ", ".join(VARIABLE_SETS),
        restricted_series="mean of " + ", ".join(RESTRICTED_SETS),
    )
