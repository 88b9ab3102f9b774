"""Figures of one snapshot of a comparison: its labelled blocks as heat maps (`plot_blocks`)
and its one-step test (`plot_one_step`); returned open, as in `plots`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from empirical.bridge.compare_qk.frames import READ
from empirical.report.figures import DIVERGING
from empirical.report.style import C


def condensed(M, rows, cols, L: int):
    """[rows, classes]: mean over n{m}; v{u}, `=`, `+`, `pad` each; mean of pos0..L-5;
    pos{L-4..L-1} each; bar_v{u} each."""
    names, out = [], []

    def add(name, idx):
        names.append(name)
        out.append(M[:, idx].mean(1))

    add("n (mean)", [j for j, c in enumerate(cols) if c[0] == "n"])
    for j, c in enumerate(cols):
        if c[0] == "v" or c in ("=", "+", "pad"):
            add(c, [j])
    add(f"pos0-{L - 5}", [cols.index(f"pos{t}") for t in range(L - 4)])
    for t in range(L - 4, L):
        add(f"pos{t}", [cols.index(f"pos{t}")])
    for j, c in enumerate(cols):
        if c.startswith("bar_v"):
            add(c, [j])
    return names, np.stack(out, 1)


def plot_blocks(blocks: dict, rows, cols, L: int, title: str = "", *,
                frame: str = "dual"):  # fmt: skip
    """Heat maps (each scaled to max |entry| 1) of the prediction as `frame` sees it and the
    observed blocks read in that frame."""
    r = READ.get(frame, frame)
    pk = {"dual": "pred_dual", "score": "pred_score"}.get(frame, "pred")
    keys = [k for k in (pk, f"{r}/grad_ce", f"{r}/grad_lin", f"{r}/diff", f"{r}/diff_nodecay")
            if k in blocks]  # fmt: skip
    fig, axes = plt.subplots(
        len(keys), 1, figsize=(13, 2.8 * len(keys) + 1), layout="constrained", squeeze=False
    )
    axes = axes[:, 0]
    for ax, k in zip(axes, keys, strict=True):
        names, M = condensed(blocks[k], rows, cols, L)
        m = np.nanmax(np.abs(M)) or 1.0
        im = ax.imshow(M / m, cmap=DIVERGING, vmin=-1, vmax=1, aspect="auto")
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_title(f"predicted G1 (theory), {frame} frame" if k == pk
                     else f"observed: {k} ({frame} frame)", fontsize=10)  # fmt: skip
        ax.set_ylabel("query")
        fig.colorbar(im, ax=ax, fraction=0.02, label="/ max |entry|")
    axes[-1].set_xlabel("key component")
    fig.suptitle(title)
    return fig


FAMILY_STYLE = {  # one-step family -> (colour, label)
    "sgd": (C["green"], "plain SGD on W_Q, W_K (lr)"),
    "grad_merged": (C["blue"], "along -gradient of W_QK"),
    "predicted_grad": (C["orange"], "gradient step along G1 (Q^T G1 K)"),
    "predicted_orth": (C["vermillion"], "along G1 (orth frame)"),
    "predicted_raw": (C["purple"], "along G1 (raw frame)"),
    "random_orth": (C["grey"], "random direction (control)"),
}


def plot_one_step(one: dict, title: str = ""):
    """Accuracy of every evaluation set (Wilson 95% intervals as error bars) after one step on
    layer-2 W_Q, W_K from 1-var data, per family, against the RMS change of `=`'s layer-2
    scores the step causes; the accuracy before as a dashed line with its interval shaded.
    Last panels: `=`'s attention to the values of 2-var sequences and the batch's loss."""
    fams = one["families"]
    before = one["before"]
    sets = list(one.get("set_sizes") or [k for k in ("0var/ind", "1var/ind", "2var/ind")
                                         if k in before])  # fmt: skip
    panels = sets + [k for k in ("2var_value_attention", "batch_loss") if k in before]
    ncol = min(4, len(panels))
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol, 3.9 * nrow + 1),
                             layout="constrained", squeeze=False)  # fmt: skip
    sizes = one.get("set_sizes", {})
    for k, name in enumerate(panels):
        ax = axes[k // ncol, k % ncol]
        for fam, (color, label) in FAMILY_STYLE.items():
            rows = fams.get(fam)
            if rows is None:
                continue
            xs, ys = [r["rms_dscore"] for r in rows], [r[name] for r in rows]
            if name in sets and all("intervals" in r for r in rows):
                lo = [r[name] - r["intervals"][name]["ci95"][0] for r in rows]
                hi = [r["intervals"][name]["ci95"][1] - r[name] for r in rows]
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", color=color, ms=3.5, lw=1,
                            capsize=2, label=label)  # fmt: skip
            else:
                ax.plot(xs, ys, "o-", color=color, ms=3.5, lw=1, label=label)
        ax.axhline(before[name], color="k", ls="--", lw=1, label="before the step")
        iv = (before.get("intervals") or {}).get(name)
        if iv:
            ax.axhspan(*iv["ci95"], color="k", alpha=0.1, lw=0)
        ax.set_xscale("log")
        ax.tick_params(labelsize=8)
        if k // ncol == nrow - 1 or k + ncol >= len(panels):
            ax.set_xlabel("RMS change of the layer-2 scores of '='", fontsize=9)
        if name == "batch_loss":
            ax.set_ylabel("cross-entropy", fontsize=9)
            ax.set_title("loss on the step's 1-var batch", fontsize=10)
        elif name == "2var_value_attention":
            ax.set_ylabel("attention of '=' on the values", fontsize=9)
            ax.set_title("2var/ind: attention to the operands' values", fontsize=10)
            ax.set_ylim(-0.02, 1.02)
        else:
            ax.set_ylabel("accuracy", fontsize=9)
            ax.set_title(f"{name} (n = {sizes.get(name, '?')})", fontsize=10)
            ax.set_ylim(-0.02, 1.02)
    for k in range(len(panels), nrow * ncol):
        axes[k // ncol, k % ncol].axis("off")
    handles, labs = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labs, loc="outside lower center", ncol=len(labs), fontsize=9)
    fig.suptitle(title + "\n(error bars and grey band: Wilson 95% intervals over the set's "
                 "sequences)")  # fmt: skip
    return fig
