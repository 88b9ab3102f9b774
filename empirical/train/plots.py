"""The paper's Figure 2 for one run: accuracy of every evaluation set over training."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from empirical.train.phases import Phases  # noqa: E402

KIND_COLORS = {
    "0var": "tab:blue",
    "1var": "tab:orange",
    "2var": "tab:green",
    "curated": "tab:purple",
}
SPLIT_STYLES = {"ind": "-", "pair": "--", "var": ":", "both": "-.", "": "-"}


def plot_training_curves(
    records: list[dict], phases: Phases | None, path: str | Path, title: str
) -> Path:
    names = sorted({n for r in records for n in r["acc"]})
    fig, (ax, ax_loss) = plt.subplots(
        2, 1, figsize=(10, 8), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for name in names:
        steps = [r["step"] for r in records if name in r["acc"]]
        acc = [100 * r["acc"][name] for r in records if name in r["acc"]]
        kind, _, split = name.partition("/")
        style = (
            SPLIT_STYLES.get(split, "-")
            if kind != "curated"
            else ("-" if "novel" in split else "--")
        )
        ax.plot(steps, acc, style, color=KIND_COLORS.get(kind, "gray"), label=name, lw=1.4)
    if phases is not None:
        marks = []
        if phases.zero_var_learned_step is not None:
            marks.append((phases.zero_var_learned_step, "0-var >= 90%", "tab:blue"))
        if phases.first_spike is not None:
            s = phases.first_spike
            marks.append(((s.start_step + s.end_step) / 2, "first spike (variables)", "tab:red"))
        if phases.second_spike is not None:
            s = phases.second_spike
            marks.append(((s.start_step + s.end_step) / 2, "second spike (var-restricted)", "k"))
        for i, (x, label, color) in enumerate(marks):
            for a in (ax, ax_loss):
                a.axvline(x, color=color, ls=":", lw=1.2)
            ax.text(x, 101 + 2.3 * i, f" {label}", fontsize=8, color=color, ha="left", va="bottom")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 110)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="lower right", title="evaluation set (kind/split)")
    steps = [r["step"] for r in records if r.get("train_loss") is not None]
    losses = [r["train_loss"] for r in records if r.get("train_loss") is not None]
    ax_loss.plot(steps, losses, color="k", lw=1.2, label="training loss (mean since last eval)")
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("cross-entropy")
    ax_loss.grid(alpha=0.3)
    ax_loss.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
