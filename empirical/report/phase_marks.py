"""The one way every figure marks a run's phases (empirical.runs.phases): a spike by its
jump (`jump_start_step -> jump_end_step`, never the detector's search window), one colour per
phase in every figure (PHASE_COLORS; docs/analysis.md, "Conventions").

    draw_phase_marks(ax, phases)        # a shaded jump and a line per phase, with legend labels
    phase_mark_list(phases)             # the marks, for a figure that draws its own

`phases` is a `Phases` (the detector's result), the dict of summary.json's "phases", or None.
"""

from __future__ import annotations

from dataclasses import dataclass

from empirical.report.figures import OKABE_ITO

__all__ = ["PHASE_COLORS", "PhaseMark", "draw_phase_marks", "phase_mark_list", "step_text"]

PHASE_COLORS = {
    "zero_var": OKABE_ITO["blue"],
    "first_spike": OKABE_ITO["vermillion"],
    "second_spike": OKABE_ITO["purple"],
}
_NAMES = {
    "zero_var": "0-var learned (>= 90%)",
    "first_spike": "first spike (variables routed)",
    "second_spike": "second spike (untrained positions)",
}


def step_text(step: int) -> str:
    """A step number as the docs write it: thousands apart by a space (5 301)."""
    return f"{int(step):,}".replace(",", " ")


@dataclass(frozen=True)
class PhaseMark:
    key: str  # "zero_var", "first_spike" or "second_spike"
    start: int  # the jump's first evaluation (the 0-var step for "zero_var")
    end: int  # the jump's second evaluation (= start for "zero_var")
    color: str

    @property
    def label(self) -> str:
        """e.g. "first spike (variables routed): step 5 600 -> 5 700"."""
        where = step_text(self.start)
        if self.end != self.start:
            where += f" -> {step_text(self.end)}"
        return f"{_NAMES[self.key]}: step {where}"


def _get(obj, key):
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def phase_mark_list(phases) -> list[PhaseMark]:
    """The marks of the phases found (none for a phase the detector did not find)."""
    marks = []
    zero = _get(phases, "zero_var_learned_step")
    if zero is not None:
        marks.append(PhaseMark("zero_var", int(zero), int(zero), PHASE_COLORS["zero_var"]))
    for key in ("first_spike", "second_spike"):
        rise = _get(phases, key)
        if rise is None:
            continue
        start = _get(rise, "jump_start_step")
        end = _get(rise, "jump_end_step")
        if start is None or end is None:  # an old summary: the window is all there is
            start, end = _get(rise, "start_step"), _get(rise, "end_step")
        marks.append(PhaseMark(key, int(start), int(end), PHASE_COLORS[key]))
    return marks


def draw_phase_marks(ax, phases, *, label: bool = True, lines: bool = True) -> list[PhaseMark]:
    """Shade each spike's jump and draw a dotted line at its end (at the step for 0-var), in
    the phase's colour; `label`: legend entries with the steps. Returns the marks drawn."""
    marks = phase_mark_list(phases)
    for mark in marks:
        if mark.end > mark.start:
            ax.axvspan(mark.start, mark.end, color=mark.color, alpha=0.3, lw=0)
        if lines:
            ax.axvline(mark.end, color=mark.color, ls=":", lw=1.4,
                       label=mark.label if label else None)  # fmt: skip
    return marks
