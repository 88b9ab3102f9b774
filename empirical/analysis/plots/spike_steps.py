"""Figures of two snapshots around a spike (paper Section 6): the first spike (Figure 8) and
the second (Figures 9c / 9d), each step's numbers side by side."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from empirical.report.figures import DIVERGING
from empirical.report.style import (
    AFTER,
    BEFORE,
    C,
    attention_heatmap,
    label_matrix_axes,
    save,
)


def _pattern_panel(ax, pattern, labels, value_positions, title):
    L = len(labels)
    im = attention_heatmap(ax, pattern, labels)
    # the `=` row's operand positions (black) and value positions (red)
    ax.add_patch(Rectangle((L - 3 - 0.5, L - 1.5), 2, 1, fill=False, ec="w", lw=2.5))
    for p in value_positions:
        if p < L - 3:
            ax.add_patch(Rectangle((p - 0.5, L - 1.5), 1, 1, fill=False, ec=C["vermillion"], lw=2))
    ax.set_title(title, fontsize=10)
    return im


def _paired_bars(ax, groups, before, after, steps, ylabel, title, ylim=(0, 1.05)):
    x = np.arange(len(groups))
    ax.bar(x - 0.2, before, 0.4, color=BEFORE, label=f"step {steps[0]} (before)")
    ax.bar(x + 0.2, after, 0.4, color=AFTER, label=f"step {steps[1]} (after)")
    for xi, (b, a) in enumerate(zip(before, after, strict=True)):
        ax.text(xi - 0.2, b + 0.01, f"{b:.2f}", ha="center", va="bottom", fontsize=8)
        ax.text(xi + 0.2, a + 0.01, f"{a:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, groups, fontsize=9)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)


def plot_first_spike_comparison(cmp: dict, path=None, title: str = "", *, fmt=None):
    """Figure 8: the model just before and just after the first spike."""
    a, b = cmp["steps"]
    sa, sb = cmp["states"][a], cmp["states"][b]
    ex = cmp["example"]
    letters = cmp["letters"]
    fig, axes = plt.subplots(2, 3, figsize=(20, 13.5), layout="constrained")
    for j, (step, st, when) in enumerate(((a, sa, "before"), (b, sb, "after"))):
        im = _pattern_panel(
            axes[0, j], st["example_pattern1"], ex["labels"], ex["value_positions"],
            f"({'ab'[j]}) step {step} ({when} the spike): layer-1 attention\n{ex['text']}\n"
            f"answer {ex['answer']}, predicted {st['example_prediction']}; white box: `=` -> "
            "operand positions,\nred box: `=` -> the variable's value",
        )  # fmt: skip
    fig.colorbar(im, ax=axes[0, :2], shrink=0.7, label="layer-1 attention weight")
    groups = ["variable operand", "number operand", "elsewhere"]
    keys = ("l1_eq_on_variable_operand", "l1_eq_on_number_operand", "l1_eq_elsewhere")
    _paired_bars(
        axes[0, 2], groups, [sa[k] for k in keys], [sb[k] for k in keys], (a, b),
        "mean layer-1 attention from `=`",
        f"(c) `=` in layer 1, over {sa['n_1var']} 1-var probe sequences:\nwhere its attention goes",
    )  # fmt: skip
    S = [np.asarray(st["S_authors"], dtype=float) for st in (sa, sb)]
    vmax = max(float(np.nanmax(np.abs(m), initial=0.0)) for m in S) or 1.0  # NaN: HYLA
    for j, (step, st, M) in enumerate(((a, sa, S[0]), (b, sb, S[1]))):
        ax = axes[1, j]
        im2 = ax.imshow(M, cmap=DIVERGING, vmin=-vmax, vmax=vmax)
        label_matrix_axes(ax, letters)
        ax.set_xlabel("key: variable v after layer-1 OV (ebar_v)")
        ax.set_ylabel("query: variable u after layer-1 OV (ebar_u)")
        for i, k in enumerate(M.argmax(-1) if np.isfinite(M).all() else []):
            ax.plot(k, i, "k*", mec="w", ms=10)
        ax.set_title(
            f"({'de'[j]}) step {step}: variable matrix ebar_u W_QK^2 ebar_v\n"
            f"(layer-2 QK on layer-1-OV'd variables; stars: row argmax)\n"
            f"argmax on the diagonal in {100 * st['identity_authors']:.0f}% of rows, "
            f"mean diagonal margin {st['diag_margin_authors']:.2f}",
            fontsize=10,
        )
    fig.colorbar(im2, ax=axes[1, :2], shrink=0.7, label="layer-2 score (shared scale)")
    groups = ["identity\n(authors' matrix)", "identity\n(ours, with `=`)",
              "1-var accuracy\n(probe)"]  # fmt: skip
    keys = ("identity_authors", "identity_ours", "accuracy_1var")
    _paired_bars(axes[1, 2], groups, [sa[k] for k in keys], [sb[k] for k in keys], (a, b),
                 "fraction", "(f) Diagonal structure and 1-var accuracy")  # fmt: skip
    fig.suptitle(
        title + f"\nFrom step {a} to {b}: `=`'s layer-1 attention on the variable operand of 1-var "
        f"sequences {sa['l1_eq_on_variable_operand']:.2f} -> "
        f"{sb['l1_eq_on_variable_operand']:.2f} (on the number operand "
        f"{sa['l1_eq_on_number_operand']:.2f} -> {sb['l1_eq_on_number_operand']:.2f}); "
        f"diagonal rows of the variable matrix {100 * sa['identity_authors']:.0f}% -> "
        f"{100 * sb['identity_authors']:.0f}%; 1-var accuracy {100 * sa['accuracy_1var']:.0f}% "
        f"-> {100 * sb['accuracy_1var']:.0f}%",
        fontsize=11,
    )
    return save(fig, path, fmt)


def _per_variable_bars(ax, cmp: dict, letters, key: str, ylabel: str, text: str):
    """One quantity per variable as the second operand, before and after; the variables
    never second in training shaded, bold and with their values written."""
    a, b = cmp["steps"]
    sa, sb = cmp["states"][a], cmp["states"][b]
    restricted = set(cmp["restricted"])
    before = [sa["per_variable"][v][key] for v in letters]
    after = [sb["per_variable"][v][key] for v in letters]
    x = np.arange(len(letters))
    for i, v in enumerate(letters):
        if v in restricted:
            ax.axvspan(i - 0.5, i + 0.5, color=C["grey"], alpha=0.25, lw=0)
    ax.bar(x - 0.2, before, 0.4, color=BEFORE, label=f"step {a} (before)")
    ax.bar(x + 0.2, after, 0.4, color=AFTER, label=f"step {b} (after)")
    for i, v in enumerate(letters):
        if v in restricted:
            for dx, y in ((-0.2, before[i]), (0.2, after[i])):
                ax.text(
                    i + dx, y + 0.015, f"{y:.2f}", ha="center", va="bottom", fontsize=8,
                    rotation=90,
                )  # fmt: skip
    ax.add_patch(Rectangle((0, 0), 0, 0, color=C["grey"], alpha=0.25,
                           label="never second in training"))  # fmt: skip
    ax.set_xticks(x, letters)
    for tick, v in zip(ax.get_xticklabels(), letters, strict=True):
        if v in restricted:
            tick.set_fontweight("bold")
    ax.set_xlabel("variable as the second operand (position L-2)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.15)
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(text, fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)


def _example_eq_rows(axes, cmp: dict):
    """The `=` row of each layer on the example, before and after, the key each should
    attend to (layer 1: the variable operand; layer 2: its number) in red."""
    a, b = cmp["steps"]
    sa, sb = cmp["states"][a], cmp["states"][b]
    ex = cmp["example"]
    labels = ex["labels"]
    L = len(labels)
    x = np.arange(L)
    rows = zip(axes, ("example_eq_layer1", "example_eq_layer2"), (1, 2), strict=True)
    for ax, key, layer in rows:
        ax.bar(x - 0.2, np.asarray(sa[key], dtype=float), 0.4, color=BEFORE,
               label=f"step {a} (before)")  # fmt: skip
        ax.bar(x + 0.2, np.asarray(sb[key], dtype=float), 0.4, color=AFTER,
               label=f"step {b} (after)")  # fmt: skip
        ax.set_xticks(x, labels, rotation=90, fontsize=8)
        target = L - 2 if layer == 1 else ex["value_positions"][1]
        ax.get_xticklabels()[target].set_color(C["vermillion"])
        ax.get_xticklabels()[target].set_fontweight("bold")
        ax.set_xlabel("key (position:token); red: " + (
            "the variable operand" if layer == 1 else "its assigned number"))  # fmt: skip
        ax.set_ylabel(f"layer-{layer} attention from `=`")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
        preds = f"predicted {sa['example_prediction']} -> {sb['example_prediction']}"
        ax.set_title(
            f"({'fg'[layer - 1]}) `=` row of layer {layer} on {ex['text']}\n"
            f"({cmp['letter']} as second operand; answer {ex['answer']}, {preds})",
            fontsize=10,
        )


def _restricted_change(cmp: dict, letters) -> str:
    """The title's line on the example's restricted variable, step a -> b, beside the mean
    of the trained variables ("" when it is not in both steps)."""
    a, b = cmp["steps"]
    sa, sb = cmp["states"][a], cmp["states"][b]
    v = cmp["letter"]
    pa, pb = sa["per_variable"].get(v), sb["per_variable"].get(v)
    others = [u for u in letters if u not in set(cmp["restricted"])]

    def mean_other(st, key):
        vals = [st["per_variable"][u][key] for u in others]
        return sum(vals) / len(vals) if vals else float("nan")

    if not (pa and pb):
        return ""
    return (
        f"\n{v} as the second operand, step {a} -> {b}: layer-1 `=` -> L-2 "
        f"{pa['l1_eq_to_second']:.2f} -> {pb['l1_eq_to_second']:.2f} (other variables "
        f"{mean_other(sa, 'l1_eq_to_second'):.2f} -> {mean_other(sb, 'l1_eq_to_second'):.2f}); "
        f"layer-2 `=` -> its number {pa['l2_eq_to_second_value']:.2f} -> "
        f"{pb['l2_eq_to_second_value']:.2f} (others "
        f"{mean_other(sa, 'l2_eq_to_second_value'):.2f} -> "
        f"{mean_other(sb, 'l2_eq_to_second_value'):.2f}); accuracy "
        f"{100 * pa['accuracy']:.0f}% -> {100 * pb['accuracy']:.0f}%"
    )


def plot_second_spike_comparison(cmp: dict, path=None, title: str = "", *, fmt=None):
    """Figures 9c / 9d: variables as the second operand just before and after the second
    spike."""
    a, b = cmp["steps"]
    sa, sb = cmp["states"][a], cmp["states"][b]
    letters = [v for v in sa["per_variable"] if v in sb["per_variable"]]
    fig = plt.figure(figsize=(20, 12.5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1])
    quantities = (
        ("l1_eq_to_second", "mean layer-1 attention `=` -> position L-2",
         f"(c, Fig. 9c) layer 1: `=` attends to the variable at L-2 (position "
         f"{len(sa['example_eq_layer1']) - 2})"),
        ("l2_eq_to_second_value", "mean layer-2 attention `=` -> its assigned number",
         "(d, Fig. 9d) layer 2: `=` attends to the number\nassigned to the second operand"),
        ("accuracy", "accuracy", "(e) accuracy with the variable as second operand"),
    )  # fmt: skip
    for ax, (key, ylabel, text) in zip(top.subplots(1, 3), quantities, strict=True):
        _per_variable_bars(ax, cmp, letters, key, ylabel, text)
    _example_eq_rows(bottom.subplots(1, 2), cmp)
    fig.suptitle(title + _restricted_change(cmp, letters), fontsize=11)
    return save(fig, path, fmt)
