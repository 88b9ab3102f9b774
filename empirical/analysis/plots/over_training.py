"""Figures over a run's snapshots: the progress measures, ours and the authors', with the
accuracies (Figure 12), and each variable as the second operand (Figure 9)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from empirical.analysis.authors import base_name
from empirical.analysis.progress import MEASURE_NAMES
from empirical.report.style import CYCLE, C, phase_marks, save
from empirical.runs.names import measure_label as plain_measure_label

# -- Figure 12 and Figure 9 -------------------------------------------------------------

ACC_SERIES = (
    ("0var/ind", "0-var accuracy", C["blue"], "-"),
    ("1var/ind", "1-var accuracy", C["orange"], "-"),
    ("2var/ind", "2-var accuracy", C["green"], "-"),
    ("1var/var", "1-var var-restricted", C["orange"], ":"),
    ("2var/var", "2-var var-restricted", C["green"], ":"),
)


def _acc_panel(ax, records, phases):
    if not any(r.get("acc") for r in records or []):
        ax.text(0.5, 0.5, "no accuracy recorded for this run\n(`python -m empirical evaluate "
                "RUN_DIR --all-steps` adds it)", ha="center", va="center",
                transform=ax.transAxes, fontsize=10, color="0.3")  # fmt: skip
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-2, 102)
        return
    for name, label, color, style in ACC_SERIES:
        steps = [r["step"] for r in records if name in r.get("acc", {})]
        if steps:
            acc = [100 * r["acc"][name] for r in records if name in r["acc"]]
            ax.plot(steps, acc, style, color=color, label=label)
    phase_marks(ax, phases)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _measure_panel(ax, history, names, phases, title):
    for name in names:
        i = MEASURE_NAMES.index(base_name(name)) if base_name(name) in MEASURE_NAMES else 0
        color = CYCLE[i % len(CYCLE)]
        ax.plot(history.steps, history.measures[name], "-", color=color, lw=1.6,
                label=plain_measure_label(name))  # fmt: skip
        first = history.crossings.get(name, {}).get("first")
        if first is not None:
            y = history.measures[name][history.steps.index(first)]
            ax.plot(first, y, "o", color=color, ms=6)
    phase_marks(ax, phases, label=False)
    ax.axhline(0.9, color="0.5", ls="--", lw=0.8, label="threshold 0.9 (identity: 1.0)")
    ax.set_ylabel("progress measure")
    ax.set_ylim(-0.02, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="measure (dot: first >= threshold)", title_fontsize=8)  # fmt: skip
    ax.set_title(title, fontsize=10)


def plot_progress(history, records, phases, path=None, title: str = "", *, fmt=None):
    """Figure 12: our seven measures, the authors' definitions of them (when computed; same
    colour per measure), and the accuracies, over training."""
    ours = [n for n in history.measures if "@" not in n]
    theirs = [n for n in history.measures if n.endswith("@authors")]
    n = 2 + bool(theirs)
    fig, axes = plt.subplots(
        n, 1, figsize=(13, 4.4 * n), sharex=True, layout="constrained", squeeze=False
    )
    axes = axes[:, 0]
    _measure_panel(axes[0], history, ours, phases, "Our definitions (docs/analysis.md)")
    if theirs:
        _measure_panel(axes[1], history, theirs, phases, "The authors' definitions (their "
                       "progress_measures.py; same colour = same measure)")  # fmt: skip
    axes[0].set_title(f"{title}\nOur definitions (docs/analysis.md)", fontsize=10)
    _acc_panel(axes[-1], records, phases)
    axes[-1].set_xlabel("training step")
    return save(fig, path, fmt)


def plot_second_spike(
    history, records, phases, r2_letters, path=None, title: str = "", *, fmt=None
):
    fig, axes = plt.subplots(3, 1, figsize=(13, 11), sharex=True, layout="constrained")
    quantities = (
        ("l1_eq_to_second", "layer-1 attention `=` -> position L-2"),
        ("l2_eq_to_second_value", "layer-2 attention `=` -> value of 2nd operand"),
        ("accuracy", "accuracy"),
    )
    for ax, (key, label) in zip(axes, quantities, strict=True):
        for i, (letter, series) in enumerate(history.second_spike.items()):
            restricted = letter in r2_letters
            ax.plot(
                history.steps, series[key], "-" if restricted else "--",
                lw=2.4 if restricted else 1.0, color=CYCLE[i % len(CYCLE)],
                label=f"{letter} second" + (" (never second in training)" if restricted else ""),
            )  # fmt: skip
        phase_marks(ax, phases, label=key == "accuracy")
        ax.set_ylabel(label, fontsize=9)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="variable at position L-2"
    )
    handles = axes[-1].get_legend_handles_labels()[0][len(history.second_spike) :]
    if handles:
        axes[-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[0].set_title(title)
    axes[-1].set_xlabel("training step")
    return save(fig, path, fmt)
