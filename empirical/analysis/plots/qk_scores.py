"""Figures of the QK circuits (paper Section 5): layer-1 scores on every pair of embeddings
with the paper's three effects (Figure 6), numbers' positional preference (Figure 7a), and
layer-2 QK on layer-1-OV'd variables (Figure 7b)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from empirical.report.figures import DIVERGING, SEQUENTIAL
from empirical.report.style import CYCLE, C, label_matrix_axes, save


# -- Figure 6 ---------------------------------------------------------------------------
def plot_qk1_embeddings(qk1: dict, path=None, title: str = "", *, fmt=None):
    T = np.asarray(qk1["scores"], dtype=float)
    labels = qk1["labels"]
    V, p = qk1["n_tokens"], qk1["p"]
    N = len(labels)
    fig = plt.figure(figsize=(19, 17.5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.15, 0.85])
    ax, ax2 = top.subplots(1, 2)
    vmax = float(np.abs(T).max()) or 1.0
    im = ax.imshow(T, cmap=DIVERGING, vmin=-vmax, vmax=vmax)
    # one label per block where rows are too thin for one each: numbers every p // 8, the
    # variables and the three symbols as one label each, positions every other one
    step = max(1, p // 8)
    K = qk1["K"]
    ticks = list(range(0, p, step)) + [p + (K - 1) / 2, p + K + 1] + list(range(V, N, 2))
    names = [labels[i] for i in range(0, p, step)]
    names += [f"{labels[p]}..{labels[p + K - 1]}" if K > 1 else labels[p], "+ = pad"]
    names += [labels[i] for i in range(V, N, 2)]
    ax.set_xticks(ticks, names, rotation=90, fontsize=8)
    ax.set_yticks(ticks, names, fontsize=8)
    for b in (p, p + K, V):
        ax.axhline(b - 0.5, color="k", lw=0.6)
        ax.axvline(b - 0.5, color="k", lw=0.6)
    ax.set_xlabel("key embedding (numbers | variables, +, =, pad | positions)")
    ax.set_ylabel("query embedding")
    ax.set_title("(a) All pairs: token x token, token x position, position x position", fontsize=10)
    top.colorbar(im, ax=ax, fraction=0.046, pad=0.02, shrink=0.8, label="layer-1 score")
    # zoom: numbers averaged into one row/column
    keep = list(range(p, N))
    Z = np.zeros((len(keep) + 1, len(keep) + 1))
    Z[0, 0] = T[:p, :p].mean()
    Z[0, 1:] = T[:p][:, keep].mean(0)
    Z[1:, 0] = T[keep][:, :p].mean(1)
    Z[1:, 1:] = T[np.ix_(keep, keep)]
    zl = ["numbers (mean)"] + [labels[i] for i in keep]
    vz = float(np.abs(Z).max()) or 1.0
    im2 = ax2.imshow(Z, cmap=DIVERGING, vmin=-vz, vmax=vz)
    label_matrix_axes(ax2, zl, rotation=90, fontsize=8)
    ax2.set_xlabel("key embedding")
    ax2.set_ylabel("query embedding")
    eq = labels.index("=") - p + 1
    L = N - V
    ax2.add_patch(Rectangle((len(zl) - 3 - 0.5, eq - 0.5), 2, 1, fill=False, ec="k", lw=2.5))
    # purple: numbers -> variables; orange: positions 0..L-5 -> variables
    ax2.add_patch(Rectangle((0.5, -0.5), K, 1, fill=False, ec=C["purple"], lw=2.5))
    ax2.add_patch(Rectangle((0.5, V - p + 1 - 0.5), K, L - 4, fill=False, ec=C["orange"], lw=2.5))
    ax2.add_patch(Rectangle((V - p + 1 - 0.5, V - p + 1 - 0.5), L, L, fill=False,
                            ec=C["vermillion"], lw=2.5, ls="--"))  # fmt: skip
    ax2.set_title(
        f"(b) Zoom (numbers averaged). Black: `=` token -> pos {L - 3}, {L - 2} "
        f"(`=` prefers positions {qk1['eq_top2_positions']});\n"
        f"purple: numbers -> variables; orange: positions 0-{L - 5} -> variables; "
        "red dashed: position x position",
        fontsize=10,
    )
    top.colorbar(im2, ax=ax2, fraction=0.046, pad=0.02, shrink=0.8, label="layer-1 score")
    _plot_figure6_effects(bottom, qk1, T)
    fig.suptitle(title)
    return save(fig, path, fmt)


def _plot_figure6_effects(sub, qk1: dict, T: np.ndarray):
    """Bottom row of the Figure 6 plot: the paper's three effects, with their numbers."""
    labels = qk1["labels"]
    V, p, K = qk1["n_tokens"], qk1["p"], qk1["K"]
    L = len(labels) - V
    region = L - 4
    ax, ax2, ax3 = sub.subplots(1, 3, gridspec_kw={"width_ratios": [1.1, 1.1, 1.0]})
    # (c) number queries: mean score per key token (numbers averaged)
    keys = ["numbers\n(mean)"] + labels[p:V]
    rows = T[:p, :V]
    means = np.concatenate([[rows[:, :p].mean()], rows[:, p:V].mean(0)])
    spread = np.concatenate([[rows[:, :p].std()], rows[:, p:V].std(0)])
    colors = [C["grey"]] + [C["purple"]] * K + [C["grey"]] * 3
    ax.bar(range(len(keys)), means, yerr=spread, color=colors, capsize=2)
    ax.set_xticks(range(len(keys)), keys, fontsize=8)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("key token")
    ax.set_ylabel("layer-1 score of a number query\n(mean +- sd over the p numbers)")
    ax.set_title(
        f"(c) Numbers -> variables (purple): mean gap {qk1['num_to_var_gap']:.2f}; "
        f"top key is a variable\nfor {100 * qk1['num_top_key_is_var']:.0f}% of numbers",
        fontsize=10,
    )
    ax.grid(alpha=0.3, axis="y")
    # (d) position queries 0..L-5 against key tokens
    Z = np.concatenate([T[V : V + region, :p].mean(1, keepdims=True), T[V : V + region, p:V]], 1)
    vz = float(np.abs(Z).max()) or 1.0
    im = ax2.imshow(Z, cmap=DIVERGING, vmin=-vz, vmax=vz, aspect="auto")
    ax2.set_xticks(range(len(keys)), keys, fontsize=8)
    ax2.set_yticks(range(region), [f"pos {t}" for t in range(region)], fontsize=8)
    ax2.add_patch(Rectangle((0.5, -0.5), K, region, fill=False, ec=C["orange"], lw=2.5))
    ax2.set_xlabel("key token")
    ax2.set_ylabel("query position (assignment region)")
    ax2.set_title(
        f"(d) Positions 0-{region - 1} -> variables (orange): mean gap "
        f"{qk1['pos_to_var_gap']:.2f};\ntop key is a variable for "
        f"{100 * qk1['pos_top_key_is_var']:.0f}% of positions",
        fontsize=10,
    )
    sub.colorbar(im, ax=ax2, label="layer-1 score (W_pos[t] W_QK W_E[key])")
    # (e) position x position, per query row over visible keys
    PP = T[V:, V:]
    shown = sorted({3, region // 2, region - 1, L - 1})
    for i, t in enumerate(shown):
        ax3.plot(
            range(t + 1), PP[t, : t + 1], "o-", ms=3, color=CYCLE[i % len(CYCLE)],
            label=f"query pos {t}",
        )  # fmt: skip
    ax3.set_xlabel("key position s (s <= query position)")
    ax3.set_ylabel("W_pos[t] W_QK W_pos[s]")
    ax3.set_xticks(range(L))
    ax3.set_title(
        f"(e) Position x position rises to the right (red dashed):\nrank correlation with s "
        f"{qk1['pos_pos_rank_corr_region']:.2f} (queries 2-{region - 1}), "
        f"{qk1['pos_pos_rank_corr']:.2f} (all)",
        fontsize=10,
    )
    ax3.legend(fontsize=8, loc="upper left", framealpha=0.9)
    ax3.grid(alpha=0.3)


# -- Figure 7a / 7b ---------------------------------------------------------------------
def plot_qk1_positional(pref: dict, path=None, title: str = "", *, fmt=None):
    ts = pref["positions"]
    S = np.asarray(pref["mean_scores"], dtype=float)[:, : max(ts) + 1]  # keys s <= t
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(13, 6.2), gridspec_kw={"width_ratios": [3, 2]}, layout="constrained"
    )
    im = ax.imshow(np.ma.masked_invalid(S), cmap=SEQUENTIAL, aspect="auto")
    ax.set_yticks(range(len(ts)), [str(t) for t in ts])
    ax.set_xticks(range(S.shape[1]))
    ax.set_xlabel("key position s (valid: s < t, s != t-2; blank otherwise)")
    ax.set_ylabel("position t of the number (query)")
    for i, t in enumerate(ts):
        ax.add_patch(Rectangle((t - 1 - 0.5, i - 0.5), 1, 1, fill=False, ec="k", lw=2))
        ax.plot(pref["argmax_of_mean"][i], i, "*", color=C["vermillion"], mec="w", ms=11)
    ax.plot(
        [], [], "*", color=C["vermillion"], ms=11,
        label="argmax over valid s (score averaged over numbers)",
    )  # fmt: skip
    ax.add_patch(Rectangle((0, 0), 0, 0, fill=False, ec="k", lw=2, label="s = t-1 (the variable)"))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    ax.set_title("(W_E[n] + W_pos[t]) W_QK^1 W_pos[s], mean over numbers n", fontsize=10)
    fig.colorbar(im, ax=ax, label="layer-1 score")
    frac = [100 * pref["fraction_by_position"][t] for t in ts]
    scored = set(pref["positions_scored"])
    colors = [C["blue"] if t in scored else "0.75" for t in ts]
    ax2.bar([str(t) for t in ts], frac, color=colors)
    ax2.legend(
        [Rectangle((0, 0), 1, 1, fc=C["blue"]), Rectangle((0, 0), 1, 1, fc="0.75")],
        ["scored positions", "only s = t-1 is valid (not scored)"],
        fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
    )  # fmt: skip
    ax2.set_xlabel("position t of the number")
    ax2.set_ylabel("numbers n whose best valid s is t-1 (%)")
    ax2.set_ylim(0, 105)
    ax2.set_title(
        f"Previous-token preference: {100 * pref['fraction']:.1f}% of (n, t), "
        f"t = {min(scored)}..{max(scored)}",
        fontsize=10,
    )
    fig.suptitle(title)
    return save(fig, path, fmt)


def plot_qk2_identity(ident: dict, path=None, title: str = "", *, fmt=None):
    S = np.asarray(ident["matrix"], dtype=float)
    letters = ident["labels"]
    fig, ax = plt.subplots(figsize=(6.8, 6), layout="constrained")
    vmax = float(np.abs(S).max()) or 1.0
    im = ax.imshow(S, cmap=DIVERGING, vmin=-vmax, vmax=vmax)
    label_matrix_axes(ax, [f"{v}" for v in letters])
    ax.set_xlabel("key: number bound to variable v (nbar + ebar_v)")
    ax.set_ylabel("query: `=` after copying operand u\n(W_E[=] + W_pos + ebar_u)")
    for i, j in enumerate(ident["row_argmax"]):
        ax.plot(j, i, "k*", mec="w", ms=11)
    ax.set_title(
        f"{title}\nlayer-2 QK on layer-1-OV'd variables: identity {ident['identity_score']:.2f}, "
        f"margin {ident['margin_mean']:.2f}\n(stars: each row's argmax)",
        fontsize=10,
    )
    fig.colorbar(im, ax=ax, label="layer-2 score")
    return save(fig, path, fmt)
