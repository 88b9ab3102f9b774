"""The codes' figures (docs/heads.md): the 2-d view coloured by form, the probe against its
controls and the model per set, the probe over training against the spikes, and over runs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from empirical.analysis.codes.extract import FORMS
from empirical.analysis.codes.probe import GOAL, HELD_OUT_SETS
from empirical.report.style import CYCLE, phase_marks

MARKERS = {"train": "o", "curated/novel_orderings": "s", "curated/held_out_pairs": "D",
           "1var/var": "^", "1var/both": "v", "2var/var": "P", "2var/both": "X"}  # fmt: skip


def plot_view(result: dict, title: str):
    """The codes at `=` on the training codes' first two principal components, one colour
    per form, one marker per set (the training sequences small and light)."""
    view = result["structure"]["_view"]
    fig, ax = plt.subplots(figsize=(8.5, 7), layout="constrained")
    for name, (Z, y) in view.items():
        if name not in MARKERS:
            continue
        Z, y = np.asarray(Z), np.asarray(y)
        train = name == "train"
        for f, form in enumerate(FORMS):
            m = y == f
            if m.any():
                ax.scatter(Z[m, 0], Z[m, 1], s=6 if train else 18, alpha=0.25 if train else 0.7,
                           color=CYCLE[f], marker=MARKERS[name], linewidths=0,
                           label=f"{form} ({'training' if train else name})")  # fmt: skip
    ax.set_xlabel("principal component 1 of the training codes (standardised)")
    ax.set_ylabel("principal component 2")
    sil = result["structure"]["silhouette"]
    ax.set_title(f"{title}\ncodes at `=`, coloured by form; silhouette of the forms "
                 f"{'-' if sil is None else f'{sil:.2f}'}", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, markerscale=1.5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def plot_probe(result: dict, title: str):
    """Per set: the form probe on the codes, its controls and the model's own accuracy."""
    form = result["probe"]["form"]
    names = [n for n in result["model_accuracy"]]
    series = [("probe on the codes", form["probe"]), ("codes at step 0", form.get("initial_codes")),
              ("shuffled labels", form["shuffled_labels"]), ("majority class", form["majority"]),
              ("the model (answer accuracy)", result["model_accuracy"])]  # fmt: skip
    series = [(label, values) for label, values in series if values is not None]
    fig, ax = plt.subplots(figsize=(11, 5), layout="constrained")
    width = 0.8 / len(series)
    x = np.arange(len(names))
    for i, (label, values) in enumerate(series):
        heights = [np.nan if values.get(n) is None else values[n] for n in names]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, heights, width, label=label,
               color=CYCLE[i])  # fmt: skip
    ax.axhline(GOAL, color="k", ls=":", lw=1, label=f"goal {GOAL:.0%}")
    ax.set_xticks(x, [n + (" *" if n in HELD_OUT_SETS else "") for n in names], rotation=20,
                  fontsize=9)  # fmt: skip
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_xlabel("evaluation set (* held-out composition)")
    ax.set_title(f"{title}\nlinear probe for the form from the codes at `=` (trained on trained "
                 "forms) against its controls", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, ncol=3, loc="lower left")
    return fig


def plot_timeline(result: dict, title: str):
    """The form probe's accuracy on the held-out sets over training, the model's accuracy on
    them (metrics.jsonl), and the run's jumps."""
    tl = result["timeline"]
    fig, ax = plt.subplots(figsize=(10, 5), layout="constrained")
    ax.plot(tl["steps"], [np.nan if v is None else v for v in tl["held_out_mean"]], "k-",
            lw=2.2, label="form probe on the codes, mean over held-out sets")  # fmt: skip
    records = [r for r in result.get("_metrics", []) if "acc" in r]
    for i, name in enumerate(n for n in ("1var/ind", *HELD_OUT_SETS) if records
                             and n in records[-1]["acc"]):  # fmt: skip
        ax.plot([r["step"] for r in records], [r["acc"].get(name, np.nan) for r in records],
                color=CYCLE[i % len(CYCLE)], lw=0.9, alpha=0.8, label=f"model on {name}")
    phase_marks(ax, result.get("_phases") or None)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("training step")
    ax.set_ylabel("accuracy")
    appears = tl["appears_step"]
    ax.set_title(f"{title}\ncodes appear (probe >= {GOAL:.0%} from then on) at step "
                 f"{'never' if appears is None else appears}", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def plot_runs(summary: dict, title: str):
    """One panel per variant; per held-out set three bars: the form probe's median accuracy
    over the variant's runs, the nearest-centroid rule's (the trivial rule the probe must
    beat: each held-out code given the form of the nearest training form's mean code) and the
    model's own, each with its range over the runs; the probe's goal as a line."""
    variants = list(summary)
    cols = min(len(variants), 3)
    rows = -(-len(variants) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows + 0.8), sharey=True,
                             layout="constrained", squeeze=False)  # fmt: skip
    x = np.arange(len(HELD_OUT_SETS))
    bars = (("probe", "form probe on the codes", 1.0),
            ("nearest_centroid", "nearest centroid (trivial rule)", 0.6),
            ("model", "the model's own accuracy", 0.3))  # fmt: skip
    width = 0.8 / len(bars)
    for ax, (name, v) in zip(list(axes.flat)[: len(variants)], summary.items(), strict=True):
        for j, (key, label, alpha) in enumerate(bars):
            stats = [v["sets"][s].get(key) for s in HELD_OUT_SETS]
            med = [np.nan if st is None else st["median"] for st in stats]
            err = [[0 if st is None else st["median"] - st["min"] for st in stats],
                   [0 if st is None else st["max"] - st["median"] for st in stats]]  # fmt: skip
            ax.bar(x + (j - 1) * width, med, width, yerr=err if len(v["runs"]) > 1 else None,
                   capsize=2, color=CYCLE[j],
                   alpha=alpha, label=label)  # fmt: skip
        ax.axhline(GOAL, color="k", ls=":", lw=1, label=f"goal: {GOAL:.0%}")
        n = len(v["runs"])
        ax.set_title(f"{name} ({n} run{'s' if n != 1 else ''}"
                     f"{': median and range' if n > 1 else ''})", fontsize=10)  # fmt: skip
        ax.set_xticks(x, [s.replace("curated/", "") for s in HELD_OUT_SETS], rotation=30,
                      fontsize=8, ha="right")  # fmt: skip
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("held-out composition", fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy")
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig

