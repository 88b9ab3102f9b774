"""Figures of the model's mechanism (paper Section 5): attention patterns (Figure 4), the
OV-MLP cosines (Figures 5, 5a), the answer probes and the isolated OV-MLP circuit, and the
layer-2 MLP's Fourier features (Figure 11, the frequency spectrum)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from empirical.report.figures import DIVERGING, SEQUENTIAL
from empirical.report.style import C, attention_heatmap, save


# -- Figure 4 ---------------------------------------------------------------------------
def plot_attention_examples(examples: list[dict], path=None, title: str = "", *, fmt=None):
    n = len(examples)
    fig, axes = plt.subplots(2, n, figsize=(5.4 * n + 1, 11), squeeze=False, layout="constrained")
    for j, ex in enumerate(examples):
        labels = ex["labels"]
        for layer in range(2):
            ax = axes[layer, j]
            im = attention_heatmap(ax, ex["pattern"][layer], labels)
            L = len(labels)
            for p in ex["value_positions"]:
                ax.add_patch(Rectangle((p - 0.5, L - 1.5), 1, 1, fill=False, ec=C["vermillion"],
                                       lw=2))  # fmt: skip
            ax.set_title(
                f"layer {layer + 1}, {ex['kind'].replace('var', '-var')}\n"
                f"{ex['text']}  (answer {ex['answer']}, predicted {ex['prediction']})",
                fontsize=9,
            )
    fig.suptitle(title + "\n(red boxes: the operands' value positions in the `=` row)")
    signed = any(float(np.min(np.asarray(ex["pattern"], dtype=float))) < 0 for ex in examples)
    label = "attention code (signed: normalised across heads)" if signed else "attention weight"
    fig.colorbar(im, ax=axes, shrink=0.5, label=label)
    return save(fig, path, fmt)


# -- Figure 5 / 5a ----------------------------------------------------------------------
def plot_ov_mlp_cosine(cos: dict, same: dict, path=None, title: str = "", *, fmt=None):
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    kinds = list(cos["samples"])
    data, ticks, colors = [], [], []
    for k in kinds:
        for which, color in (("matched", C["blue"]), ("shuffled", C["grey"])):
            data.append(np.asarray(cos["samples"][k][which], dtype=float))
            ticks.append(f"{k.replace('var', '-var')}\n{which}")
            colors.append(color)
    box = ax.boxplot(data, patch_artist=True, showfliers=False)
    for patch, color in zip(box["boxes"], colors, strict=True):
        patch.set_facecolor(color)
        patch.set_alpha(0.6)
    ax.set_xticks(range(1, len(ticks) + 1), ticks, fontsize=8)
    ax.set_ylabel("cosine similarity")
    ax.set_title("MLP input at `=` vs (W_E[x] + W_E[y]) W_OV^2\n(matched operands vs shuffled)")
    ax.axhline(0, color="k", lw=0.5)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(
        [Rectangle((0, 0), 1, 1, fc=C["blue"], alpha=0.6),
         Rectangle((0, 0), 1, 1, fc=C["grey"], alpha=0.6)],
        ["this sequence's operand values", "another sequence's values"],
        fontsize=8, loc="best", framealpha=0.9,
    )  # fmt: skip

    for which, color, name in (
        ("matched", C["blue"], "same addition"),
        ("mismatched", C["grey"], "different sum"),
    ):
        values = same["samples"][which]
        # each series binned over its own range (40 bins): a fixed [-1, 1] grid put a sharp
        # cosine peak (0.99 and up) into one or two bins
        edges = np.histogram_bin_edges(np.asarray(values, dtype=float), bins=40)
        ax2.hist(np.asarray(values), bins=edges, alpha=0.6, color=color, density=True,
                 label=f"{name} (mean {same[which]['mean']:.3f})")  # fmt: skip
    ax2.set_xlabel("cosine of MLP inputs: variable form vs direct form")
    ax2.set_ylabel("density")
    ax2.set_title("Same addition with variables vs with numbers (Fig. 5a)")
    ax2.legend(fontsize=8, loc="upper left", framealpha=0.9)
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    return save(fig, path, fmt)


# -- probes and the isolated circuit ------------------------------------------------------
def plot_probes_and_circuit(
    probes: dict, isolated: dict, p: int, path=None, title: str = "", *, fmt=None
):
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [3, 2]}, layout="constrained"
    )
    groups = ["all"] + list(probes["resid_mid"]["test_acc_by_kind"])
    x = np.arange(len(groups))
    for i, (name, label, color) in enumerate((
        ("resid_mid", "before layer-2 MLP (resid_mid)", C["orange"]),
        ("resid_post", "after layer-2 MLP (resid_post)", C["blue"]),
    )):  # fmt: skip
        vals = [probes[name]["test_acc"]] + list(probes[name]["test_acc_by_kind"].values())
        ax.bar(x + (i - 0.5) * 0.38, [100 * v for v in vals], 0.38, label=label, color=color)
    ax.axhline(100 / p, color="k", ls="--", lw=1, label=f"chance (1/{p})")
    ax.set_xticks(x, [g.replace("var", "-var") for g in groups])
    ax.set_ylabel("held-out probe accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Linear probes for the answer at `=`")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.12), ncol=3, framealpha=0.9)
    ax.grid(alpha=0.3, axis="y")
    correct = np.asarray(isolated["correct"], dtype=float)
    ax2.imshow(correct, cmap=SEQUENTIAL, vmin=0, vmax=1, origin="lower")
    ax2.set_xlabel("second operand value y")
    ax2.set_ylabel("first operand value x")
    ax2.set_title(
        f"Isolated OV-MLP circuit: correct (yellow) / wrong (dark)\n"
        f"on {100 * isolated['accuracy']:.2f}% of all {p}x{p} pairs correct"
    )
    fig.suptitle(title)
    return save(fig, path, fmt)


# -- Figure 11 and the frequency spectrum ------------------------------------------------
def plot_fourier_neuron(fit, model_pre, path=None, title: str = "", r2_model=None, *, fmt=None):
    n = fit.best_neuron
    k = int(fit.freq[n])
    panels = [
        ("pre-activation on the isolated OV-MLP input", fit.pre),
        (f"fitted c + A_x cos(w x + phi_x) + A_y cos(w y + phi_y)\nk = {k}, R^2 = {fit.r2[n]:.3f}",
         fit.fitted),
    ]  # fmt: skip
    if model_pre is not None:
        extra = "" if r2_model is None else f"\nR^2 of the same-frequency fit: {r2_model:.3f}"
        panels.append((f"full model, 0-var sequences `+ x y =`{extra}", model_pre))
    # second row: operands ordered by k*x mod p, so that frequency k becomes one period
    order = np.argsort((k * np.arange(fit.p)) % fit.p)
    fig, axes = plt.subplots(
        2, len(panels), figsize=(4.8 * len(panels) + 1.5, 9.8), squeeze=False, layout="constrained"
    )
    vmax = max(float(np.abs(a).max()) for _, a in panels) or 1.0
    for j, (name, arr) in enumerate(panels):
        for i, grid in enumerate((arr, arr[np.ix_(order, order)])):
            ax = axes[i, j]
            im = ax.imshow(grid, cmap=DIVERGING, vmin=-vmax, vmax=vmax, origin="lower")
            suffix = f", sorted by {k}*operand mod p" if i else ""
            ax.set_xlabel(f"operand y{suffix}")
            ax.set_ylabel(f"operand x{suffix}")
            ax.set_title(
                name if i == 0 else f"{name.splitlines()[0]}\n(reordered by {k}x mod p)", fontsize=9
            )
    fig.suptitle(f"{title}: layer-2 MLP neuron {n} (best Fourier fit)")
    fig.colorbar(im, ax=axes, shrink=0.5, label="pre-activation")
    return save(fig, path, fmt)


def plot_fourier_spectrum(fit, path=None, title: str = "", *, fmt=None):
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
    active = fit.variance > 1e-6 * max(float(fit.variance.max()), 1e-30)
    ax.hist(fit.r2[active], bins=np.linspace(0, 1, 41), color=C["blue"])
    ax.axvline(
        fit.r2_threshold, color="k", ls="--", label=f"well-fitted: R^2 >= {fit.r2_threshold}"
    )
    ax.set_xlabel("R^2 of the best single-frequency Gromov fit")
    ax.set_ylabel("neurons")
    ax.set_title(f"Fit quality of {int(active.sum())} active neurons")
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    ks = np.arange(1, fit.p // 2 + 1)
    counts = [fit.freq_counts.get(int(k), 0) for k in ks]
    colors = [C["vermillion"] if int(k) in fit.key_frequencies else C["grey"] for k in ks]
    ax2.bar(ks, counts, color=colors)
    ax2.set_xlabel("dominant frequency k (w = 2 pi k / p)")
    ax2.set_ylabel("well-fitted neurons")
    ax2.set_title(f"Dominant frequencies (red: key frequencies {fit.key_frequencies})", fontsize=10)
    fig.suptitle(title)
    return save(fig, path, fmt)
