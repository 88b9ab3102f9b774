"""The paper's Figure 2 for one run: accuracy of every evaluation set over training.

`plot_training_curves` returns the matplotlib Figure and writes it only when given a path
(png, pdf or svg); importing this module selects no matplotlib backend.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt

from empirical.figures import OKABE_ITO, save_figure
from empirical.train.phases import Phases

KIND_COLORS = {
    "0var": OKABE_ITO["blue"],
    "1var": OKABE_ITO["orange"],
    "2var": OKABE_ITO["green"],
    "curated": OKABE_ITO["purple"],
}
SPLIT_STYLES = {"ind": "-", "pair": "--", "var": ":", "both": "-.", "": "-"}


def plot_training_curves(
    records: list[dict],
    phases: Phases | None,
    path: str | os.PathLike | None = None,
    title: str = "",
    *,
    sizes: dict[str, int] | None = None,
    chance: float | None = None,
    fmt: str | None = None,
):
    """Accuracy (%) of every evaluation set over training steps, and the training loss.

    sizes: sequences per evaluation set: each curve gets a shaded 95% Wilson interval (what
    the finite set leaves uncertain; empirical.stats). chance: accuracy of a uniform guess
    (1/p), drawn as a line. Returns the Figure; writes it to `path` (then closes it) if given."""
    from empirical.stats import wilson_band

    names = sorted({n for r in records for n in r["acc"]})
    fig, (ax, ax_loss) = plt.subplots(
        2,
        1,
        figsize=(12.5, 8.5),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1]},
        layout="constrained",
    )
    for name in names:
        steps = [r["step"] for r in records if name in r["acc"]]
        acc = [r["acc"][name] for r in records if name in r["acc"]]
        kind, _, split = name.partition("/")
        style = (
            SPLIT_STYLES.get(split, "-")
            if kind != "curated"
            else ("-" if "novel" in split else "--")
        )
        color = KIND_COLORS.get(kind, OKABE_ITO["grey"])
        ax.plot(steps, [100 * a for a in acc], style, color=color, label=name, lw=1.4)
        n = (sizes or {}).get(name)
        if n:
            low, high = wilson_band(acc, n)
            ax.fill_between(steps, 100 * low, 100 * high, color=color, alpha=0.15, lw=0)
    if chance is not None:
        ax.axhline(
            100 * chance,
            color="0.35",
            ls=(0, (1, 3)),
            lw=1.2,
            label=f"chance ({100 * chance:.1f}%)",
        )
    if phases is not None:
        marks = []
        if phases.zero_var_learned_step is not None:
            marks.append((phases.zero_var_learned_step, "0-var >= 90%", OKABE_ITO["blue"]))
        if phases.first_spike is not None:
            s = phases.first_spike
            marks.append(
                (
                    (s.start_step + s.end_step) / 2,
                    "first spike (variables)",
                    OKABE_ITO["vermillion"],
                )
            )
        if phases.second_spike is not None:
            s = phases.second_spike
            marks.append(((s.start_step + s.end_step) / 2, "second spike (var-restricted)", "k"))
        for i, (x, label, color) in enumerate(marks):
            for a in (ax, ax_loss):
                a.axvline(x, color=color, ls=":", lw=1.2)
            ax.text(x, 101 + 2.6 * i, f" {label}", fontsize=8, color=color, ha="left", va="bottom")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 112)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    band = " (band: 95% interval over the set's sequences)" if sizes else ""
    ax.legend(
        fontsize=8,
        ncol=1,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title=f"evaluation set (kind/split){band}".replace(" (band", "\n(band"),
        title_fontsize=8,
    )
    steps = [r["step"] for r in records if r.get("train_loss") is not None]
    losses = [r["train_loss"] for r in records if r.get("train_loss") is not None]
    label = "training loss (mean since last eval)"
    if not losses:  # e.g. an imported run: its evaluations are all there is
        steps = [r["step"] for r in records if r.get("loss")]
        losses = [sum(r["loss"].values()) / len(r["loss"]) for r in records if r.get("loss")]
        label = "evaluation loss (mean over the sets;\nno training loss recorded)"
    ax_loss.plot(steps, losses, color="k", lw=1.2, label=label)
    positive = [x for x in losses if x > 0]
    if positive and max(positive) / min(positive) > 10:  # a log axis only when it spans decades
        ax_loss.set_yscale("log")
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("cross-entropy")
    ax_loss.grid(alpha=0.3)
    ax_loss.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, fmt)


def plot_runs(
    runs: list[tuple[str, list[dict], Phases | None]],
    sets: list[str],
    path: str | os.PathLike | None = None,
    title: str = "",
    *,
    fmt: str | None = None,
):
    """Several runs side by side: one panel per evaluation set, one curve per run (accuracy
    over training steps), each run's detected spikes (the phase detector's largest jumps)
    marked on its curve. runs: (label, metrics records, phases). Returns the Figure; writes it
    to `path` (then closes it) if given."""
    palette = [OKABE_ITO[c] for c in ("black", "orange", "sky", "green", "vermillion", "purple")]
    fig, axes = plt.subplots(
        len(sets), 1, figsize=(10, 2.9 * len(sets) + 0.8), sharex=True, layout="constrained"
    )
    axes = [axes] if len(sets) == 1 else list(axes)
    for ax, name in zip(axes, sets, strict=True):
        for i, (label, records, phases) in enumerate(runs):
            color = palette[i % len(palette)]
            steps = [r["step"] for r in records if name in r.get("acc", {})]
            acc = [100 * r["acc"][name] for r in records if name in r.get("acc", {})]
            ax.plot(steps, acc, color=color, lw=1.4, label=label)
            for key, marker in (("first_spike", "o"), ("second_spike", "s")):
                rise = getattr(phases, key, None) if phases is not None else None
                end = getattr(rise, "jump_end_step", None) if rise is not None else None
                if end is not None and end in steps:
                    ax.plot(end, acc[steps.index(end)], marker, color=color, ms=7, mec="white")
        ax.set_ylabel(f"{name}\naccuracy (%)")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("training step")
    handles, labels = axes[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    handles += [
        Line2D([], [], marker="o", ls="", color="grey", label="first spike (largest jump)"),
        Line2D([], [], marker="s", ls="", color="grey", label="second spike (largest jump)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=9)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, fmt)
