"""Figures of the analysis, each titled, with labelled axes and legends.

Every function returns the matplotlib Figure; given a `path` it also writes it (png, pdf or
svg: the suffix, or `fmt`) and closes it (empirical.figures.save_figure). Importing this module
selects no backend. Colour maps: viridis / cividis for magnitudes, RdBu for signed values;
line colours from Okabe & Ito's colour-blind-safe palette.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from empirical.analysis.authors import base_name
from empirical.analysis.progress import MEASURE_NAMES, MEASURES
from empirical.figures import DIVERGING, OKABE_ITO, SEQUENTIAL, save_figure
from empirical.phase_marks import draw_phase_marks
from empirical.plain_names import measure_label as plain_measure_label

DPI = 110
C = OKABE_ITO
# one colour per series (measures, variables), none of them yellow on white
CYCLE = [C[k] for k in ("blue", "orange", "green", "vermillion", "purple", "sky", "black")]
CYCLE += ["#882255", "#44AA99", "#999933", "#661100", "#6699CC"]


def _save(fig, path, fmt=None):
    return save_figure(fig, path, fmt, dpi=DPI)


def _phase_marks(ax, phases, label: bool = True):
    """The phases' jumps, as every figure marks them (empirical.phase_marks)."""
    draw_phase_marks(ax, phases, label=label)


# -- Figure 4 ---------------------------------------------------------------------------


def plot_attention_examples(examples: list[dict], path=None, title: str = "", *, fmt=None):
    n = len(examples)
    fig, axes = plt.subplots(2, n, figsize=(5.4 * n + 1, 11), squeeze=False, layout="constrained")
    for j, ex in enumerate(examples):
        labels = ex["labels"]
        for layer in range(2):
            ax = axes[layer, j]
            pat = np.asarray(ex["pattern"][layer], dtype=float)
            im = ax.imshow(pat, cmap=SEQUENTIAL, vmin=0, vmax=1)
            L = len(labels)
            ax.set_xticks(range(L))
            ax.set_xticklabels(labels, rotation=90, fontsize=8)
            ax.set_yticks(range(L))
            ax.set_yticklabels(labels, fontsize=8)
            ax.set_xlabel("key (position:token)")
            ax.set_ylabel("query (position:token)")
            for p in ex["value_positions"]:
                ax.add_patch(
                    Rectangle((p - 0.5, L - 1.5), 1, 1, fill=False, ec=C["vermillion"], lw=2)
                )
            ax.set_title(
                f"layer {layer + 1}, {ex['kind'].replace('var', '-var')}\n"
                f"{ex['text']}  (answer {ex['answer']}, predicted {ex['prediction']})",
                fontsize=9,
            )
    fig.suptitle(title + "\n(red boxes: the operands' value positions in the `=` row)")
    fig.colorbar(im, ax=axes, shrink=0.5, label="attention weight")
    return _save(fig, path, fmt)


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
    ax.set_xticks(range(1, len(ticks) + 1))
    ax.set_xticklabels(ticks, fontsize=8)
    ax.set_ylabel("cosine similarity")
    ax.set_title("MLP input at `=` vs (W_E[x] + W_E[y]) W_OV^2\n(matched operands vs shuffled)")
    ax.axhline(0, color="k", lw=0.5)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(
        [
            Rectangle((0, 0), 1, 1, fc=C["blue"], alpha=0.6),
            Rectangle((0, 0), 1, 1, fc=C["grey"], alpha=0.6),
        ],
        ["this sequence's operand values", "another sequence's values"],
        fontsize=8,
        loc="best",
        framealpha=0.9,
    )
    # each series binned over its own range (40 bins): a fixed [-1, 1] grid put a sharp
    # cosine peak (0.99 and up) into one or two bins
    def bins(values) -> np.ndarray:
        return np.histogram_bin_edges(np.asarray(values, dtype=float), bins=40)

    ax2.hist(
        np.asarray(same["samples"]["matched"]),
        bins=bins(same["samples"]["matched"]),
        alpha=0.6,
        color=C["blue"],
        label=f"same addition (mean {same['matched']['mean']:.3f})",
        density=True,
    )
    ax2.hist(
        np.asarray(same["samples"]["mismatched"]),
        bins=bins(same["samples"]["mismatched"]),
        alpha=0.6,
        color=C["grey"],
        label=f"different sum (mean {same['mismatched']['mean']:.3f})",
        density=True,
    )
    ax2.set_xlabel("cosine of MLP inputs: variable form vs direct form")
    ax2.set_ylabel("density")
    ax2.set_title("Same addition with variables vs with numbers (Fig. 5a)")
    ax2.legend(fontsize=8, loc="upper left", framealpha=0.9)
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    return _save(fig, path, fmt)


# -- probes and the isolated circuit ------------------------------------------------------


def plot_probes_and_circuit(
    probes: dict, isolated: dict, p: int, path=None, title: str = "", *, fmt=None
):
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [3, 2]}, layout="constrained"
    )
    groups = ["all"] + list(probes["resid_mid"]["test_acc_by_kind"])
    x = np.arange(len(groups))
    for i, (name, label, color) in enumerate(
        (
            ("resid_mid", "before layer-2 MLP (resid_mid)", C["orange"]),
            ("resid_post", "after layer-2 MLP (resid_post)", C["blue"]),
        )
    ):
        vals = [probes[name]["test_acc"]] + list(probes[name]["test_acc_by_kind"].values())
        ax.bar(x + (i - 0.5) * 0.38, [100 * v for v in vals], 0.38, label=label, color=color)
    ax.axhline(100 / p, color="k", ls="--", lw=1, label=f"chance (1/{p})")
    ax.set_xticks(x)
    ax.set_xticklabels([g.replace("var", "-var") for g in groups])
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
    return _save(fig, path, fmt)


# -- Figure 11 and the frequency spectrum ------------------------------------------------


def plot_fourier_neuron(fit, model_pre, path=None, title: str = "", r2_model=None, *, fmt=None):
    n = fit.best_neuron
    k = int(fit.freq[n])
    panels = [("pre-activation on the isolated OV-MLP input", fit.pre)]
    panels.append(
        (
            f"fitted c + A_x cos(w x + phi_x) + A_y cos(w y + phi_y)\n"
            f"k = {k}, R^2 = {fit.r2[n]:.3f}",
            fit.fitted,
        )
    )
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
    return _save(fig, path, fmt)


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
    return _save(fig, path, fmt)


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
    ax.set_xticks(ticks)
    ax.set_xticklabels(names, rotation=90, fontsize=8)
    ax.set_yticks(ticks)
    ax.set_yticklabels(names, fontsize=8)
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
    ax2.set_xticks(range(len(zl)))
    ax2.set_xticklabels(zl, rotation=90, fontsize=8)
    ax2.set_yticks(range(len(zl)))
    ax2.set_yticklabels(zl, fontsize=8)
    ax2.set_xlabel("key embedding")
    ax2.set_ylabel("query embedding")
    eq = labels.index("=") - p + 1
    L = N - V
    K = qk1["K"]
    ax2.add_patch(Rectangle((len(zl) - 3 - 0.5, eq - 0.5), 2, 1, fill=False, ec="k", lw=2.5))
    # purple: numbers -> variables; orange: positions 0..L-5 -> variables
    ax2.add_patch(Rectangle((0.5, -0.5), K, 1, fill=False, ec=C["purple"], lw=2.5))
    ax2.add_patch(Rectangle((0.5, V - p + 1 - 0.5), K, L - 4, fill=False, ec=C["orange"], lw=2.5))
    ax2.add_patch(
        Rectangle(
            (V - p + 1 - 0.5, V - p + 1 - 0.5), L, L, fill=False, ec=C["vermillion"], lw=2.5,
            ls="--",
        )
    )  # fmt: skip
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
    return _save(fig, path, fmt)


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
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(keys, fontsize=8)
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
    ax2.set_xticks(range(len(keys)))
    ax2.set_xticklabels(keys, fontsize=8)
    ax2.set_yticks(range(region))
    ax2.set_yticklabels([f"pos {t}" for t in range(region)], fontsize=8)
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
    ax.set_yticks(range(len(ts)))
    ax.set_yticklabels([str(t) for t in ts])
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
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.13),
        ncol=2,
    )
    ax2.set_xlabel("position t of the number")
    ax2.set_ylabel("numbers n whose best valid s is t-1 (%)")
    ax2.set_ylim(0, 105)
    ax2.set_title(
        f"Previous-token preference: {100 * pref['fraction']:.1f}% of (n, t), "
        f"t = {min(scored)}..{max(scored)}",
        fontsize=10,
    )
    fig.suptitle(title)
    return _save(fig, path, fmt)


def plot_qk2_identity(ident: dict, path=None, title: str = "", *, fmt=None):
    S = np.asarray(ident["matrix"], dtype=float)
    letters = ident["labels"]
    fig, ax = plt.subplots(figsize=(6.8, 6), layout="constrained")
    vmax = float(np.abs(S).max()) or 1.0
    im = ax.imshow(S, cmap=DIVERGING, vmin=-vmax, vmax=vmax)
    ax.set_xticks(range(len(letters)))
    ax.set_xticklabels([f"{v}" for v in letters])
    ax.set_yticks(range(len(letters)))
    ax.set_yticklabels([f"{u}" for u in letters])
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
    return _save(fig, path, fmt)


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
    _phase_marks(ax, phases)
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
    _phase_marks(ax, phases, label=False)
    ax.axhline(0.9, color="0.5", ls="--", lw=0.8, label="threshold 0.9 (identity: 1.0)")
    ax.set_ylabel("progress measure")
    ax.set_ylim(-0.02, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title="measure (dot: first >= threshold)",
        title_fontsize=8,
    )
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
        _measure_panel(
            axes[1],
            history,
            theirs,
            phases,
            "The authors' definitions (their progress_measures.py; same colour = same measure)",
        )
    axes[0].set_title(f"{title}\nOur definitions (docs/analysis.md)", fontsize=10)
    _acc_panel(axes[-1], records, phases)
    axes[-1].set_xlabel("training step")
    return _save(fig, path, fmt)


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
                history.steps,
                series[key],
                "-" if restricted else "--",
                lw=2.4 if restricted else 1.0,
                color=CYCLE[i % len(CYCLE)],
                label=f"{letter} second" + (" (never second in training)" if restricted else ""),
            )
        _phase_marks(ax, phases, label=key == "accuracy")
        ax.set_ylabel(label, fontsize=9)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="variable at position L-2"
    )
    handles = [h for h in axes[-1].get_legend_handles_labels()[0][len(history.second_spike) :]]
    if handles:
        axes[-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[0].set_title(title)
    axes[-1].set_xlabel("training step")
    return _save(fig, path, fmt)


def measure_label(name: str) -> str:
    return f"{name} (threshold {MEASURES[name][0]:g})"


# -- Figure 8 and Figure 9c / 9d: before vs after a spike ----------------------------------

BEFORE, AFTER = C["orange"], C["blue"]


def _pattern_panel(ax, pattern, labels, value_positions, title):
    pat = np.asarray(pattern, dtype=float)
    L = len(labels)
    im = ax.imshow(pat, cmap=SEQUENTIAL, vmin=0, vmax=1)
    ax.set_xticks(range(L))
    ax.set_xticklabels(labels, rotation=90, fontsize=8)
    ax.set_yticks(range(L))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("key (position:token)")
    ax.set_ylabel("query (position:token)")
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
    ax.set_xticks(x)
    ax.set_xticklabels(groups, fontsize=9)
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
            axes[0, j],
            st["example_pattern1"],
            ex["labels"],
            ex["value_positions"],
            f"({'ab'[j]}) step {step} ({when} the spike): layer-1 attention\n{ex['text']}\n"
            f"answer {ex['answer']}, predicted {st['example_prediction']}; white box: `=` -> "
            "operand positions,\nred box: `=` -> the variable's value",
        )
    fig.colorbar(im, ax=axes[0, :2], shrink=0.7, label="layer-1 attention weight")
    groups = ["variable operand", "number operand", "elsewhere"]
    keys = ("l1_eq_on_variable_operand", "l1_eq_on_number_operand", "l1_eq_elsewhere")
    _paired_bars(
        axes[0, 2],
        groups,
        [sa[k] for k in keys],
        [sb[k] for k in keys],
        (a, b),
        "mean layer-1 attention from `=`",
        f"(c) `=` in layer 1, over {sa['n_1var']} 1-var probe sequences:\nwhere its attention goes",
    )
    S = [np.asarray(st["S_authors"], dtype=float) for st in (sa, sb)]
    vmax = max(float(np.abs(m).max()) for m in S) or 1.0
    for j, (step, st, M) in enumerate(((a, sa, S[0]), (b, sb, S[1]))):
        ax = axes[1, j]
        im2 = ax.imshow(M, cmap=DIVERGING, vmin=-vmax, vmax=vmax)
        ax.set_xticks(range(len(letters)))
        ax.set_xticklabels(letters)
        ax.set_yticks(range(len(letters)))
        ax.set_yticklabels(letters)
        ax.set_xlabel("key: variable v after layer-1 OV (ebar_v)")
        ax.set_ylabel("query: variable u after layer-1 OV (ebar_u)")
        for i, k in enumerate(M.argmax(-1)):
            ax.plot(k, i, "k*", mec="w", ms=10)
        ax.set_title(
            f"({'de'[j]}) step {step}: variable matrix ebar_u W_QK^2 ebar_v\n"
            f"(layer-2 QK on layer-1-OV'd variables; stars: row argmax)\n"
            f"argmax on the diagonal in {100 * st['identity_authors']:.0f}% of rows, "
            f"mean diagonal margin {st['diag_margin_authors']:.2f}",
            fontsize=10,
        )
    fig.colorbar(im2, ax=axes[1, :2], shrink=0.7, label="layer-2 score (shared scale)")
    groups = [
        "identity\n(authors' matrix)",
        "identity\n(ours, with `=`)",
        "1-var accuracy\n(probe)",
    ]
    keys = ("identity_authors", "identity_ours", "accuracy_1var")
    _paired_bars(
        axes[1, 2],
        groups,
        [sa[k] for k in keys],
        [sb[k] for k in keys],
        (a, b),
        "fraction",
        "(f) Diagonal structure and 1-var accuracy",
    )
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
    return _save(fig, path, fmt)


def plot_second_spike_comparison(cmp: dict, path=None, title: str = "", *, fmt=None):
    """Figures 9c / 9d: variables as the second operand just before and after the second
    spike."""
    a, b = cmp["steps"]
    sa, sb = cmp["states"][a], cmp["states"][b]
    letters = [v for v in sa["per_variable"] if v in sb["per_variable"]]
    restricted = set(cmp["restricted"])
    fig = plt.figure(figsize=(20, 12.5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1])
    axes = top.subplots(1, 3)
    quantities = (
        ("l1_eq_to_second", "mean layer-1 attention `=` -> position L-2",
         f"(c, Fig. 9c) layer 1: `=` attends to the variable at L-2 (position "
         f"{len(sa['example_eq_layer1']) - 2})"),
        ("l2_eq_to_second_value", "mean layer-2 attention `=` -> its assigned number",
         "(d, Fig. 9d) layer 2: `=` attends to the number\nassigned to the second operand"),
        ("accuracy", "accuracy", "(e) accuracy with the variable as second operand"),
    )  # fmt: skip
    for ax, (key, ylabel, text) in zip(axes, quantities, strict=True):
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
        ax.add_patch(
            Rectangle((0, 0), 0, 0, color=C["grey"], alpha=0.25, label="never second in training")
        )
        ax.set_xticks(x)
        ax.set_xticklabels(letters)
        for tick, v in zip(ax.get_xticklabels(), letters, strict=True):
            if v in restricted:
                tick.set_fontweight("bold")
        ax.set_xlabel("variable as the second operand (position L-2)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1.15)
        ax.grid(alpha=0.3, axis="y")
        ax.set_title(text, fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)
    ex = cmp["example"]
    labels = ex["labels"]
    L = len(labels)
    ax1, ax2 = bottom.subplots(1, 2)
    x = np.arange(L)
    for ax, key, layer in ((ax1, "example_eq_layer1", 1), (ax2, "example_eq_layer2", 2)):
        ax.bar(
            x - 0.2, np.asarray(sa[key], dtype=float), 0.4, color=BEFORE, label=f"step {a} (before)"
        )
        ax.bar(x + 0.2, np.asarray(sb[key], dtype=float), 0.4, color=AFTER,
               label=f"step {b} (after)")  # fmt: skip
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=90, fontsize=8)
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
    v = cmp["letter"]
    pa, pb = sa["per_variable"].get(v), sb["per_variable"].get(v)
    others = [u for u in letters if u not in restricted]

    def mean_other(st, key):
        vals = [st["per_variable"][u][key] for u in others]
        return sum(vals) / len(vals) if vals else float("nan")

    change = ""
    if pa and pb:
        change = (
            f"\n{v} as the second operand, step {a} -> {b}: layer-1 `=` -> L-2 "
            f"{pa['l1_eq_to_second']:.2f} -> {pb['l1_eq_to_second']:.2f} (other variables "
            f"{mean_other(sa, 'l1_eq_to_second'):.2f} -> {mean_other(sb, 'l1_eq_to_second'):.2f}); "
            f"layer-2 `=` -> its number {pa['l2_eq_to_second_value']:.2f} -> "
            f"{pb['l2_eq_to_second_value']:.2f} (others "
            f"{mean_other(sa, 'l2_eq_to_second_value'):.2f} -> "
            f"{mean_other(sb, 'l2_eq_to_second_value'):.2f}); accuracy "
            f"{100 * pa['accuracy']:.0f}% -> {100 * pb['accuracy']:.0f}%"
        )
    fig.suptitle(title + change, fontsize=11)
    return _save(fig, path, fmt)
