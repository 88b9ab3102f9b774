"""The race's files, declared once (`report`): race.json (every number; the issue's schema),
summary.md (the table) and race.png (each configuration in the criterion's plane, coloured by
its outcome); written by empirical.report.writer."""

from __future__ import annotations

import matplotlib.pyplot as plt

from empirical.bridge.ladder_dynamics.outputs import steps_text
from empirical.report.figures import OKABE_ITO
from empirical.report.writer import Figure, Json, Report


def _t(x) -> str:
    return "inf" if x is None else f"{x:.3g}"


def summary_markdown(result: dict) -> str:
    acc, n = result["accuracy"], result["counts"]
    pct = lambda a: "-" if a is None else f"{a:.0%}"  # noqa: E731
    lo, hi = result["tau_interval"]
    lines = [
        "# The race: does the memory lower the 1-var loss before the inputs do?",
        "",
        f"Criterion (docs/race.md): {result['criterion']}.",
        "",
        f"tau = {result['tau']:.3g} (fitted on the fit half; every tau in ({lo:.3g}, "
        f"{'inf' if hi is None else format(hi, '.3g')}) scores the same there). Accuracy: "
        f"**test {pct(acc['test'])}** of {n['test']}, fit {pct(acc['fit'])} of {n['fit']}, "
        f"all {pct(acc['all'])}.",
        "",
        "| configuration | split | T_mem | T_in | T_mem / (tau T_in) | winner | predicted | "
        "composed (seeds) | 2-var >= 0.99 at step | right |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in result["configs"]:
        sz = c["step_zero"]
        lines.append(
            f"| {c['name']} | {c['split']} | {_t(sz['T_mem'])} | {_t(sz['T_in'])} | "
            f"{_t(c['ratio'])} | {c['winner']} | {'yes' if c['predicted'] else 'no'} | "
            f"{'yes' if c['composed'] else 'no'} ({c['seeds_composed']}/{c['seeds']}) | "
            f"{steps_text(c['emergence_steps'])} | "
            f"{'yes' if c['predicted'] == c['composed'] else '**no**'} |"
        )
    lines += [
        "",
        "T_mem, T_in in steps (inf: never); composed: 2-var accuracy >= 0.99 on the whole 2-var "
        "population at an evaluation within the run, on the majority of the seeds.",
        "",
        f"Wall time of this invocation: {result['seconds']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def _clip(x, lo: float, hi: float) -> float:
    return hi if x is None or x > hi else max(x, lo)


def plot_race(result: dict):
    """x: T_mem / (tau T_in) (left of 1: the memory wins); y: T_mem / S (below 1: in
    budget); colour: the outcome; marker: the split; a cross: mispredicted."""
    fig, ax = plt.subplots(figsize=(10, 7), layout="constrained")
    lo, hi = 1e-4, 1e4
    for c in result["configs"]:
        sz = c["step_zero"]
        x = _clip(c["ratio"], lo, hi) if c["ratio"] != 0 else lo
        y = _clip(None if sz["T_mem"] is None else sz["T_mem"] / c["steps"], 1e-3, 1e3)
        colour = OKABE_ITO["blue"] if c["composed"] else OKABE_ITO["vermillion"]
        marker = "o" if c["split"] == "fit" else "s"
        ax.scatter(x, y, color=colour, marker=marker, s=60, zorder=3,
                   edgecolors="black" if c["predicted"] != c["composed"] else "none")  # fmt: skip
        if c["predicted"] != c["composed"]:
            ax.scatter(x, y, color="black", marker="x", s=90, zorder=4)
        ax.annotate(c["name"], (x, y), fontsize=6.5, xytext=(4, 3), textcoords="offset points")
    ax.axvline(1, color="grey", ls="--", lw=1)
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set(xscale="log", yscale="log", xlim=(lo / 2, hi * 2), ylim=(5e-4, 2e3),
           xlabel="T_mem / (tau T_in)   (< 1: the memory wins the race; clipped at the edges)",
           ylabel="T_mem / S   (< 1: the memory composes within the run)",
           title=f"The race at step 0 (tau = {result['tau']:.3g}): each configuration, "
                 "coloured by its outcome")  # fmt: skip
    handles = [
        plt.Line2D([], [], color=OKABE_ITO["blue"], marker="o", ls="", label="composed"),
        plt.Line2D([], [], color=OKABE_ITO["vermillion"], marker="o", ls="",
                   label="not composed"),
        plt.Line2D([], [], color="grey", marker="o", ls="", label="fit half"),
        plt.Line2D([], [], color="grey", marker="s", ls="", label="test half"),
        plt.Line2D([], [], color="black", marker="x", ls="", label="mispredicted"),
    ]  # fmt: skip
    ax.legend(handles=handles, loc="lower right", fontsize=9)
    return fig


def report(result: dict) -> Report:
    """race.json (infinite and NaN floats as null: "never", "none"), summary.md and the
    figure `race` (write_report's format)."""
    return Report({
        "race.json": Json(result, indent=1),
        "summary.md": summary_markdown(result),
        "race": Figure(lambda: plot_race(result)),
    })  # fmt: skip
