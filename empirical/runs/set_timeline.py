"""When each evaluation set is learned, and in how many spikes: a run's timeline per set,
for any task family's sets (the phase detector, empirical.runs.phases, reads the paper's).

    timeline = set_timeline(records)            # records: metrics.jsonl's, in step order
    timeline["chain/1var_h2"]["first_90"]       # first evaluation at >= 90%
    timeline["chain/1var_h2"]["spikes"]         # [{"jump_start_step", "jump_end_step", ...}]

A set's spikes: the window of at most `window` steps with the largest gain (`steepest_rise`),
if it gains at least `min_gain`; then the same before and after that window, recursively, so
that separate rises count separately. Each is reported by its jump, as every figure does.
"""

from __future__ import annotations

from empirical.report.phase_marks import step_text
from empirical.report.tables import markdown_table
from empirical.runs.phases import Rise, first_crossing, steepest_rise

__all__ = ["format_timeline", "set_timeline"]


def _rises(steps: list[int], values: list[float], window: int, min_gain: float) -> list[Rise]:
    """Every separate rise of the series, in step order (the module docstring)."""
    if len(steps) < 2:
        return []
    rise = steepest_rise(steps, values, window, min_gain)
    if rise is None:
        return []
    i, j = steps.index(rise.start_step), steps.index(rise.end_step)
    before = _rises(steps[: i + 1], values[: i + 1], window, min_gain)
    after = _rises(steps[j:], values[j:], window, min_gain)
    return [*before, rise, *after]


def set_timeline(
    records: list[dict], window: int = 1000, min_gain: float = 0.15, max_spikes: int = 4
) -> dict[str, dict]:
    """Per evaluation set: `first_90`, `first_99` (first evaluation step at that accuracy, or
    None), `final` (the last accuracy) and `spikes` (at most `max_spikes`, in step order)."""
    names = sorted({n for r in records for n in r["acc"]})
    out = {}
    for name in names:
        steps = [r["step"] for r in records if name in r["acc"]]
        values = [r["acc"][name] for r in records if name in r["acc"]]
        rises = sorted(_rises(steps, values, window, min_gain), key=lambda r: -r.gain)
        spikes = [
            {
                "jump_start_step": r.jump_start_step,
                "jump_end_step": r.jump_end_step,
                "jump_gain": r.jump_gain,
                "window": [r.start_step, r.end_step],
                "gain": r.gain,
            }
            for r in sorted(rises[:max_spikes], key=lambda r: r.start_step)
        ]
        out[name] = {
            "first_90": first_crossing(steps, values, 0.9),
            "first_99": first_crossing(steps, values, 0.99),
            "final": values[-1] if values else None,
            "spikes": spikes,
        }
    return out


def format_timeline(timeline: dict[str, dict]) -> list[str]:
    """A markdown table: set, first step at >= 90% / 99%, final accuracy, the spikes."""
    def step(s):
        return "not reached" if s is None else step_text(s)

    rows = []
    for name, t in timeline.items():
        spikes = "; ".join(
            f"{step_text(s['jump_start_step'])} -> {step_text(s['jump_end_step'])} "
            f"(+{100 * s['gain']:.0f} points)"
            for s in t["spikes"]
        )
        final = "-" if t["final"] is None else f"{100 * t['final']:.1f}%"
        rows.append(f"{name} | {step(t['first_90'])} | {step(t['first_99'])} | {final} | "
                    f"{spikes or 'none'}")
    return markdown_table("set | >= 90% at | >= 99% at | final | spikes (jump, gain in the window)",
                          rows)
