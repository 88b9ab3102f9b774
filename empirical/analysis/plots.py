"""Figures of the analysis (PNG), each titled, with labelled axes and legends."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from empirical.analysis.progress import MEASURES  # noqa: E402

DPI = 110


def _save(fig, path) -> Path:
    path = Path(path)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _phase_marks(ax, phases, label: bool = True):
    """Vertical lines at the detected phase changes (empirical.train.phases)."""
    if phases is None:
        return
    marks = []
    if phases.zero_var_learned_step is not None:
        marks.append((phases.zero_var_learned_step, "0-var >= 90%", "tab:blue", None))
    if phases.first_spike is not None:
        s = phases.first_spike
        marks.append((s.start_step, "first spike", "tab:red", s.end_step))
    if phases.second_spike is not None:
        s = phases.second_spike
        marks.append((s.start_step, "second spike", "k", s.end_step))
    for x, text, color, end in marks:
        if end is not None and end > x:
            ax.axvspan(x, end, color=color, alpha=0.08, lw=0)
        ax.axvline(x, color=color, ls=":", lw=1.2, label=f"{text} (step {x})" if label else None)


# -- Figure 4 ---------------------------------------------------------------------------


def plot_attention_examples(examples: list[dict], path, title: str) -> Path:
    n = len(examples)
    fig, axes = plt.subplots(2, n, figsize=(5.2 * n, 10.5), squeeze=False)
    for j, ex in enumerate(examples):
        labels = ex["labels"]
        for layer in range(2):
            ax = axes[layer, j]
            pat = np.asarray(ex["pattern"][layer], dtype=float)
            im = ax.imshow(pat, cmap="Blues", vmin=0, vmax=1)
            L = len(labels)
            ax.set_xticks(range(L))
            ax.set_xticklabels(labels, rotation=90, fontsize=7)
            ax.set_yticks(range(L))
            ax.set_yticklabels(labels, fontsize=7)
            ax.set_xlabel("key (position:token)")
            ax.set_ylabel("query (position:token)")
            for p in ex["value_positions"]:
                ax.add_patch(Rectangle((p - 0.5, L - 1.5), 1, 1, fill=False, ec="tab:red", lw=1.5))
            ax.set_title(
                f"layer {layer + 1}, {ex['kind'].replace('var', '-var')}\n"
                f"{ex['text']}  (answer {ex['answer']}, predicted {ex['prediction']})",
                fontsize=8,
            )
    fig.suptitle(title + "\n(red boxes: the operands' value positions in the `=` row)")
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    fig.colorbar(im, cax=fig.add_axes((0.94, 0.25, 0.012, 0.5)), label="attention weight")
    return _save(fig, path)


# -- Figure 5 / 5a ----------------------------------------------------------------------


def plot_ov_mlp_cosine(cos: dict, same: dict, path, title: str) -> Path:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    kinds = list(cos["samples"])
    data, ticks, colors = [], [], []
    for k in kinds:
        for which, color in (("matched", "tab:green"), ("shuffled", "tab:gray")):
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
            Rectangle((0, 0), 1, 1, fc="tab:green", alpha=0.6),
            Rectangle((0, 0), 1, 1, fc="tab:gray"),
        ],
        ["this sequence's operand values", "another sequence's values"],
        fontsize=8,
        loc="lower left",
    )
    bins = np.linspace(-1, 1, 81)
    ax2.hist(
        np.asarray(same["samples"]["matched"]),
        bins=bins,
        alpha=0.6,
        color="tab:green",
        label=f"same addition (mean {same['matched']['mean']:.3f})",
        density=True,
    )
    ax2.hist(
        np.asarray(same["samples"]["mismatched"]),
        bins=bins,
        alpha=0.6,
        color="tab:gray",
        label=f"different sum (mean {same['mismatched']['mean']:.3f})",
        density=True,
    )
    ax2.set_xlabel("cosine of MLP inputs: variable form vs direct form")
    ax2.set_ylabel("density")
    ax2.set_title("Same addition with variables vs with numbers (Fig. 5a)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


# -- probes and the isolated circuit ------------------------------------------------------


def plot_probes_and_circuit(probes: dict, isolated: dict, p: int, path, title: str) -> Path:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    groups = ["all"] + list(probes["resid_mid"]["test_acc_by_kind"])
    x = np.arange(len(groups))
    for i, (name, label, color) in enumerate(
        (
            ("resid_mid", "before layer-2 MLP (resid_mid)", "tab:orange"),
            ("resid_post", "after layer-2 MLP (resid_post)", "tab:blue"),
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
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    correct = np.asarray(isolated["correct"], dtype=float)
    ax2.imshow(correct, cmap="RdYlGn", vmin=0, vmax=1, origin="lower")
    ax2.set_xlabel("second operand value y")
    ax2.set_ylabel("first operand value x")
    ax2.set_title(
        f"Isolated OV-MLP circuit: correct (green) on\n"
        f"{100 * isolated['accuracy']:.2f}% of all {p}x{p} pairs"
    )
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


# -- Figure 11 and the frequency spectrum ------------------------------------------------


def plot_fourier_neuron(fit, model_pre, path, title: str, r2_model=None) -> Path:
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
    fig, axes = plt.subplots(2, len(panels), figsize=(4.8 * len(panels) + 1, 9.6), squeeze=False)
    vmax = max(float(np.abs(a).max()) for _, a in panels) or 1.0
    for j, (name, arr) in enumerate(panels):
        for i, grid in enumerate((arr, arr[np.ix_(order, order)])):
            ax = axes[i, j]
            im = ax.imshow(grid, cmap="RdBu_r", vmin=-vmax, vmax=vmax, origin="lower")
            suffix = f", sorted by {k}*operand mod p" if i else ""
            ax.set_xlabel(f"operand y{suffix}")
            ax.set_ylabel(f"operand x{suffix}")
            ax.set_title(
                name if i == 0 else f"{name.splitlines()[0]}\n(reordered by {k}x mod p)", fontsize=9
            )
    fig.suptitle(f"{title}: layer-2 MLP neuron {n} (best Fourier fit)")
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    fig.colorbar(im, cax=fig.add_axes((0.94, 0.25, 0.012, 0.5)), label="pre-activation")
    return _save(fig, path)


def plot_fourier_spectrum(fit, path, title: str) -> Path:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    active = fit.variance > 1e-6 * max(float(fit.variance.max()), 1e-30)
    ax.hist(fit.r2[active], bins=np.linspace(0, 1, 41), color="tab:blue")
    ax.axvline(
        fit.r2_threshold, color="k", ls="--", label=f"well-fitted: R^2 >= {fit.r2_threshold}"
    )
    ax.set_xlabel("R^2 of the best single-frequency Gromov fit")
    ax.set_ylabel("neurons")
    ax.set_title(f"Fit quality of {int(active.sum())} active neurons")
    ax.legend(fontsize=8)
    ks = np.arange(1, fit.p // 2 + 1)
    counts = [fit.freq_counts.get(int(k), 0) for k in ks]
    colors = ["tab:red" if int(k) in fit.key_frequencies else "tab:gray" for k in ks]
    ax2.bar(ks, counts, color=colors)
    ax2.set_xlabel("dominant frequency k (w = 2 pi k / p)")
    ax2.set_ylabel("well-fitted neurons")
    ax2.set_title(f"Dominant frequencies (red: key frequencies {fit.key_frequencies})")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


# -- Figure 6 ---------------------------------------------------------------------------


def plot_qk1_embeddings(qk1: dict, path, title: str) -> Path:
    T = np.asarray(qk1["scores"], dtype=float)
    labels = qk1["labels"]
    V, p = qk1["n_tokens"], qk1["p"]
    N = len(labels)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(16, 7.5), gridspec_kw={"width_ratios": [1, 1]})
    vmax = float(np.abs(T).max()) or 1.0
    im = ax.imshow(T, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    step = max(1, p // 8)
    ticks = list(range(0, p, step)) + list(range(p, V)) + list(range(V, N, 2))
    ax.set_xticks(ticks)
    ax.set_xticklabels([labels[i] for i in ticks], rotation=90, fontsize=6)
    ax.set_yticks(ticks)
    ax.set_yticklabels([labels[i] for i in ticks], fontsize=6)
    for b in (p, V):
        ax.axhline(b - 0.5, color="k", lw=0.6)
        ax.axvline(b - 0.5, color="k", lw=0.6)
    ax.set_xlabel("key embedding (numbers | variables, +, =, pad | positions)")
    ax.set_ylabel("query embedding")
    ax.set_title("All pairs: token x token, token x position, position x position")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="layer-1 score")
    # zoom: numbers averaged into one row/column
    keep = list(range(p, N))
    Z = np.zeros((len(keep) + 1, len(keep) + 1))
    Z[0, 0] = T[:p, :p].mean()
    Z[0, 1:] = T[:p][:, keep].mean(0)
    Z[1:, 0] = T[keep][:, :p].mean(1)
    Z[1:, 1:] = T[np.ix_(keep, keep)]
    zl = ["numbers (mean)"] + [labels[i] for i in keep]
    vz = float(np.abs(Z).max()) or 1.0
    im2 = ax2.imshow(Z, cmap="RdBu_r", vmin=-vz, vmax=vz)
    ax2.set_xticks(range(len(zl)))
    ax2.set_xticklabels(zl, rotation=90, fontsize=7)
    ax2.set_yticks(range(len(zl)))
    ax2.set_yticklabels(zl, fontsize=7)
    ax2.set_xlabel("key embedding")
    ax2.set_ylabel("query embedding")
    eq = labels.index("=") - p + 1
    L = N - V
    ax2.add_patch(Rectangle((len(zl) - 3 - 0.5, eq - 0.5), 2, 1, fill=False, ec="k", lw=1.5))
    ax2.set_title(
        f"Zoom (numbers averaged). Black box: `=` token -> pos {L - 3}, {L - 2}; "
        f"`=` prefers positions {qk1['eq_top2_positions']}",
        fontsize=9,
    )
    fig.colorbar(im2, ax=ax2, fraction=0.046, pad=0.04, label="layer-1 score")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


# -- Figure 7a / 7b ---------------------------------------------------------------------


def plot_qk1_positional(pref: dict, path, title: str) -> Path:
    ts = pref["positions"]
    S = np.asarray(pref["mean_scores"], dtype=float)[:, : max(ts) + 1]  # keys s <= t
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.6), gridspec_kw={"width_ratios": [3, 2]})
    im = ax.imshow(np.ma.masked_invalid(S), cmap="viridis", aspect="auto")
    ax.set_yticks(range(len(ts)))
    ax.set_yticklabels([str(t) for t in ts])
    ax.set_xticks(range(S.shape[1]))
    ax.set_xlabel("key position s (valid: s < t, s != t-2; blank otherwise)")
    ax.set_ylabel("position t of the number (query)")
    for i, t in enumerate(ts):
        ax.add_patch(Rectangle((t - 1 - 0.5, i - 0.5), 1, 1, fill=False, ec="k", lw=2))
        ax.plot(pref["argmax_of_mean"][i], i, "r*", ms=9)
    ax.plot([], [], "r*", ms=9, label="argmax over valid s (score averaged over numbers)")
    ax.add_patch(Rectangle((0, 0), 0, 0, fill=False, ec="k", lw=2, label="s = t-1 (the variable)"))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    ax.set_title("(W_E[n] + W_pos[t]) W_QK^1 W_pos[s], mean over numbers n")
    fig.colorbar(im, ax=ax, label="layer-1 score")
    frac = [100 * pref["fraction_by_position"][t] for t in ts]
    scored = set(pref["positions_scored"])
    colors = ["tab:blue" if t in scored else "0.75" for t in ts]
    ax2.bar([str(t) for t in ts], frac, color=colors)
    ax2.bar([], [], color="0.75", label="only s = t-1 is valid (not scored)")
    ax2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    ax2.set_xlabel("position t of the number")
    ax2.set_ylabel("numbers n whose best valid s is t-1 (%)")
    ax2.set_ylim(0, 105)
    ax2.set_title(
        f"Previous-token preference: {100 * pref['fraction']:.1f}% of (n, t), "
        f"t = {min(scored)}..{max(scored)}"
    )
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_qk2_identity(ident: dict, path, title: str) -> Path:
    S = np.asarray(ident["matrix"], dtype=float)
    letters = ident["labels"]
    fig, ax = plt.subplots(figsize=(5.8, 5))
    im = ax.imshow(S, cmap="RdBu_r", vmin=-np.abs(S).max(), vmax=np.abs(S).max())
    ax.set_xticks(range(len(letters)))
    ax.set_xticklabels([f"{v}" for v in letters])
    ax.set_yticks(range(len(letters)))
    ax.set_yticklabels([f"{u}" for u in letters])
    ax.set_xlabel("key: number bound to variable v (nbar + ebar_v)")
    ax.set_ylabel("query: `=` after copying operand u (W_E[=] + W_pos + ebar_u)")
    for i, j in enumerate(ident["row_argmax"]):
        ax.plot(j, i, "k*", ms=10)
    ax.plot([], [], "k*", label="row argmax")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(
        f"{title}\nlayer-2 QK on layer-1-OV'd variables: identity {ident['identity_score']:.2f}, "
        f"margin {ident['margin_mean']:.2f}",
        fontsize=9,
    )
    fig.colorbar(im, ax=ax, label="layer-2 score")
    fig.tight_layout()
    return _save(fig, path)


# -- Figure 12 and Figure 9 -------------------------------------------------------------

ACC_SERIES = (
    ("0var/ind", "0-var accuracy", "tab:blue", "-"),
    ("1var/ind", "1-var accuracy", "tab:orange", "-"),
    ("2var/ind", "2-var accuracy", "tab:green", "-"),
    ("1var/var", "1-var var-restricted", "tab:orange", ":"),
    ("2var/var", "2-var var-restricted", "tab:green", ":"),
)


def _acc_panel(ax, records, phases):
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


def plot_progress(history, records, phases, path, title: str) -> Path:
    fig, (ax, ax_acc) = plt.subplots(2, 1, figsize=(13, 9), sharex=True)
    cmap = plt.get_cmap("tab10")
    for i, name in enumerate(history.measures):
        color = cmap(i)
        ax.plot(history.steps, history.measures[name], "-", color=color, lw=1.6, label=name)
        first = history.crossings[name]["first"]
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
    ax.set_title(title)
    _acc_panel(ax_acc, records, phases)
    ax_acc.set_xlabel("training step")
    fig.tight_layout()
    return _save(fig, path)


def plot_second_spike(history, records, phases, r2_letters, path, title: str) -> Path:
    fig, axes = plt.subplots(3, 1, figsize=(13, 11), sharex=True)
    quantities = (
        ("l1_eq_to_second", "layer-1 attention `=` -> position L-2"),
        ("l2_eq_to_second_value", "layer-2 attention `=` -> value of 2nd operand"),
        ("accuracy", "accuracy"),
    )
    cmap = plt.get_cmap("tab10")
    for ax, (key, label) in zip(axes, quantities, strict=True):
        for i, (letter, series) in enumerate(history.second_spike.items()):
            restricted = letter in r2_letters
            ax.plot(
                history.steps,
                series[key],
                "-" if restricted else "--",
                lw=2.4 if restricted else 1.0,
                color=cmap(i),
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
    fig.tight_layout()
    return _save(fig, path)


def measure_label(name: str) -> str:
    return f"{name} (threshold {MEASURES[name][0]:g})"
