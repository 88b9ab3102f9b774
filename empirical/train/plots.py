"""The paper's Figure 2 for one run: accuracy of every evaluation set over training.

`plot_training_curves` returns the matplotlib Figure and writes it only when given a path
(png, pdf or svg); importing this module selects no matplotlib backend.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from empirical.report.figures import OKABE_ITO, save_figure
from empirical.report.phase_marks import draw_phase_marks
from empirical.report.stats import wilson_band
from empirical.runs.metrics_log import accuracy_series
from empirical.runs.names import legend_label
from empirical.runs.phases import Phases
from empirical.task.registry import panel_of, panel_title

# one colour per split, the same in every panel; one panel per number of variable operands
SPLIT_COLORS = {
    "ind": OKABE_ITO["blue"],
    "pair": OKABE_ITO["orange"],
    "var": OKABE_ITO["green"],
    "both": OKABE_ITO["vermillion"],
}
OTHER_COLORS = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky")]
# the panel of a set and its title are its task family's (empirical.task.registry.panel_of: the
# number of variable operands `0var`, `1var`, `2var`, `curated`, ...; else the set's prefix)


def _panels(names: list[str]) -> list[tuple[str, list[str]]]:
    order = ["0var", "1var", "2var", "curated"]
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(panel_of(name), []).append(name)
    keys = [k for k in order if k in groups] + sorted(k for k in groups if k not in order)
    splits = list(SPLIT_COLORS)  # trained, held-out pair, untrained position, both

    def rank(name: str) -> tuple[int, str]:
        split = name.partition("/")[2]
        return (splits.index(split) if split in splits else len(splits), name)

    return [(k, sorted(groups[k], key=rank)) for k in keys]


def _series_color(name: str, i: int) -> str:
    split = name.partition("/")[2]
    return SPLIT_COLORS.get(split, OTHER_COLORS[i % len(OTHER_COLORS)])


def plot_training_curves(
    records: list[dict], phases: Phases | None, path: str | os.PathLike | None = None,
    title: str = "", *, sizes: dict[str, int] | None = None, chance: float | None = None,
    fmt: str | None = None,
):  # fmt: skip
    """Accuracy (%) of every evaluation set over training steps, one panel per number of
    variable operands (curated and other sets in their own), one colour per split in every
    panel, and the training loss. sizes (sequences per set): a shaded 95% Wilson interval per
    curve; chance: a uniform guess's accuracy, drawn as a line; phases marked as every figure
    marks them. Returns the Figure; writes it to `path` (then closes it) if given."""
    names = sorted({n for r in records for n in r["acc"]})
    panels = _panels(names) or [("", [])]
    fig, axes = plt.subplots(
        len(panels) + 1, 1, figsize=(12.5, 2.5 * len(panels) + 2.4), sharex=True,
        gridspec_kw={"height_ratios": [3] * len(panels) + [2]}, layout="constrained",
        squeeze=False,
    )  # fmt: skip
    axes = list(axes[:, 0])
    ax_loss = axes[-1]
    band = "; bands: 95% interval over the set's sequences" if sizes else ""
    for ax, (key, members) in zip(axes, panels, strict=False):
        for i, name in enumerate(members):
            steps, acc = accuracy_series(records, name)
            color = _series_color(name, i)
            ax.plot(steps, [100 * a for a in acc], color=color, label=legend_label(name), lw=1.4)
            n = (sizes or {}).get(name)
            if n:
                low, high = wilson_band(acc, n)
                ax.fill_between(steps, 100 * low, 100 * high, color=color, alpha=0.15, lw=0)
        if chance is not None:
            ax.axhline(100 * chance, color="0.35", ls=(0, (1, 3)), lw=1.2,
                       label=f"chance ({100 * chance:.1f}%)")  # fmt: skip
        draw_phase_marks(ax, phases, label=ax is axes[0])
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-2, 104)
        ax.grid(alpha=0.3)
        ax.set_title(panel_title(key), fontsize=10, loc="left")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{title}\naccuracy per evaluation set{band}" if title else
                 f"accuracy per evaluation set{band}")  # fmt: skip
    draw_phase_marks(ax_loss, phases, label=False)
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


SPIKE_MARKERS = (("first_spike", "o"), ("second_spike", "s"))  # phase -> its marker in plot_runs


def plot_runs(
    runs: list[tuple[str, list[dict], Phases | None]], sets: list[str],
    path: str | os.PathLike | None = None, title: str = "", *, fmt: str | None = None,
):  # fmt: skip
    """Several runs side by side: one panel per evaluation set, one curve per run (accuracy
    over training steps), each run's detected spikes (the phase detector's largest jumps)
    marked on its curve. runs: (label, metrics records, phases). Returns the Figure; writes it
    to `path` (then closes it) if given."""
    palette = [OKABE_ITO[c] for c in ("black", "orange", "sky", "green", "vermillion", "purple")]
    fig, axes = plt.subplots(
        len(sets), 1, figsize=(10, 2.9 * len(sets) + 0.8), sharex=True, layout="constrained"
    )
    axes = [axes] if len(sets) == 1 else list(axes)
    marked = set()  # the spike markers drawn: only those get a legend entry
    for ax, name in zip(axes, sets, strict=True):
        for i, (label, records, phases) in enumerate(runs):
            color = palette[i % len(palette)]
            steps, acc = accuracy_series(records, name)
            acc = [100 * a for a in acc]
            ax.plot(steps, acc, color=color, lw=1.4, label=label)
            for key, marker in SPIKE_MARKERS:
                rise = getattr(phases, key, None) if phases is not None else None
                end = getattr(rise, "jump_end_step", None) if rise is not None else None
                if end is not None and end in steps:
                    ax.plot(end, acc[steps.index(end)], marker, color=color, ms=7, mec="white")
                    marked.add(key)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(legend_label(name), fontsize=10, loc="left")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("training step")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [
        Line2D([], [], marker=marker, ls="", color="grey",
               label=f"{key.replace('_', ' ')} (largest jump)")
        for key, marker in SPIKE_MARKERS if key in marked
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=9)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, fmt)
