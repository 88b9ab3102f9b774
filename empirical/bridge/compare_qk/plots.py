"""Figures of the comparison along training: `plot_cosines` (cosines with G1), `plot_terms`
(the all-assignment term), `plot_structure` (the bar_v block) and `plot_assumptions`; one
snapshot's figures are in `step_plots`. Each returns the Figure, open (`outputs.report` declares
them, empirical.report.writer saves and closes them). Selects no backend; Okabe & Ito colours."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from empirical.report.phase_marks import PHASE_COLORS
from empirical.report.style import C, phase_marks

VARIANT_STYLE = {
    "grad_ce": (C["blue"], "-gradient (cross-entropy, merged W_QK)"),
    "grad_lin": (C["orange"], "-gradient (first-order loss, xi->0)"),
    "sgd_factored": (C["green"], "SGD on W_Q, W_K (induced dW_QK)"),
    "diff": (C["grey"], "snapshot change"),
    "diff_nodecay": (C["vermillion"], "snapshot change, weight decay removed"),
}
LINE_COLORS = [C[k] for k in ("blue", "orange", "green", "vermillion", "purple", "sky", "black")]


def _x(r: dict, mid: bool):
    """Where a record is drawn: its step, or (`mid`) the middle of its update's interval."""
    nxt = r.get("next_step")
    return 0.5 * (r["step"] + nxt) if mid and nxt is not None else r["step"]


def _series(result, frame, variant, *keys, mid: bool = False):
    """(xs, ys): comparison[frame][variant][*keys] at the snapshots that have the variant
    (nan for None); `mid`: drawn at the middle of the update's interval."""
    xs, ys = [], []
    for r in result["steps"]:
        v = r["comparison"][frame].get(variant)
        if v is None:
            continue
        for k in keys:
            v = v[k]
        xs.append(_x(r, mid))
        ys.append(np.nan if v is None else v)
    return xs, ys


COS_LINES = {  # variant -> (colour, marker, label); updates are drawn at their mid-interval
    "grad_ce": (C["blue"], "o", "(i) -gradient, cross-entropy on 1-var data"),
    "grad_lin": (C["orange"], "s", "(ii) -gradient, first-order term"),
    "diff": (C["black"], "^", "(iii) observed update to the next snapshot"),
    "diff_nodecay": (C["vermillion"], "v", "(iii') observed update, weight decay removed"),
}


# the spike windows in the first and second spikes' colours (empirical.report.phase_marks),
# then others
SPIKE_COLORS = [PHASE_COLORS["first_spike"], PHASE_COLORS["second_spike"], C["green"], C["orange"]]


def _lanes(windows: list[tuple[str, int, int]]) -> list[list[tuple[str, int, int]]]:
    """Greedy packing of windows into lanes whose windows do not overlap (touching is fine)."""
    lanes: list[list[tuple[str, int, int]]] = []
    for w in sorted(windows, key=lambda w: (w[1], -(w[2] - w[1]))):
        for lane in lanes:
            if all(w[1] >= o[2] or w[2] <= o[1] for o in lane):
                lane.append(w)
                break
        else:
            lanes.append([w])
    return lanes


def window_marks(ax, result, label: bool = True, lo=None, hi=None, top: float = 1.0,
                 step: float = 0.1) -> float:  # fmt: skip
    """Mark the comparison's windows (result["windows"]): windows named spike* shaded over the
    whole height (labelled for the legend), the others as labelled bars above `top`, one lane
    per set of non-overlapping windows (lane k at y = top + (k + 1) * step, data units).
    Returns the y the bars reach (for the axis limit)."""
    wins = [(n, e["lo"], e["hi"]) for n, e in (result.get("windows") or {}).items()]
    spikes = [w for w in wins if w[0].startswith("spike")]
    for k, (name, a, b) in enumerate(spikes):
        if lo is not None and (b < lo or a > hi):
            continue
        n = int(name[5:]) - 1 if name[5:].isdigit() else k  # spike1 / spike2: by number
        ax.axvspan(a, b, color=SPIKE_COLORS[n % len(SPIKE_COLORS)], alpha=0.25, lw=0,
                   label=f"window {name} ({a}-{b})" if label else None)  # fmt: skip
    others = [w for w in wins if not w[0].startswith("spike")]
    lanes = _lanes(others)
    x0, x1 = (lo, hi) if lo is not None else (None, None)
    steps = [r["step"] for r in result.get("steps", [])]
    span = (x1 - x0) if x0 is not None else (max(steps) - min(steps) if steps else 1) or 1
    for k, lane in enumerate(lanes):
        y = top + (k + 1) * step
        for name, a, b in lane:
            if x0 is not None and (b < x0 or a > x1):
                continue
            ax.plot([a, b], [y, y], "-", color="0.35", lw=2.5, solid_capstyle="butt")
            for x in (a, b):
                ax.plot([x, x], [y - step * 0.3, y + step * 0.3], "-", color="0.35", lw=1)
            ca, cb = (max(a, x0), min(b, x1)) if x0 is not None else (a, b)
            if (cb - ca) >= 0.08 * span:  # a name only where it fits
                ax.text(0.5 * (ca + cb), y + step * 0.12, name, ha="center", va="bottom",
                        fontsize=8, color="0.15", clip_on=True)  # fmt: skip
    return top + (len(lanes) + 0.9) * step if lanes else top


def zoom_ranges(result, margin: int = 5) -> list[tuple[str, float, float]]:
    """(names, lo, hi): a zoom on each window named spike*, `margin` snapshots either side;
    overlapping zooms are merged (their names joined by '+')."""
    steps = [r["step"] for r in result["steps"]]
    out: list[list] = []
    for name, e in sorted((result.get("windows") or {}).items(), key=lambda kv: kv[1]["lo"]):
        if not name.startswith("spike") or not steps:
            continue
        i0 = max(0, max([k for k, s in enumerate(steps) if s <= e["lo"]] or [0]) - margin)
        i1 = min(len(steps) - 1, min([k for k, s in enumerate(steps) if s >= e["hi"]]
                                     or [len(steps) - 1]) + margin)  # fmt: skip
        if out and steps[i0] <= out[-1][2]:
            out[-1][0] += f"+{name}"
            out[-1][2] = max(out[-1][2], steps[i1])
        else:
            out.append([name, steps[i0], steps[i1]])
    run = (steps[-1] - steps[0]) if steps else 0
    # a zoom that shows most of the run adds nothing to the whole-run panel
    return [tuple(z) for z in out if z[2] - z[1] < 0.5 * run]


def _null_series(result, frame, sub, key="null95_signs"):
    """The update's (diff) per-interval null level in `frame`, drawn at mid-interval."""
    xs, ys = [], []
    for r in result["steps"]:
        v = r["comparison"].get(frame, {}).get("diff")
        if v is None or r.get("next_step") is None:
            continue
        xs.append(_x(r, True))
        y = (v.get(key) or {}).get(sub)
        ys.append(np.nan if y is None else y)
    return xs, ys


def _within(xs, ys, lo, hi):
    """The points with lo <= x <= hi (all of them for lo None: the whole-run panel)."""
    if lo is None:
        return xs, ys
    keep = [k for k, x in enumerate(xs) if lo <= x <= hi]
    return [xs[k] for k in keep], [ys[k] for k in keep]


def _cosine_null(ax, result, frame, sub, lo, hi) -> None:
    """The null levels of a cosine panel: the isotropic null as a grey band (the score frame:
    its Gram null instead), the update's sign-randomised null as a dotted line."""
    if frame != "score":
        n95 = result["null95"][sub]
        label = f"isotropic null: 95% of random directions (|cos| < {n95:.2f})"
        ax.axhspan(-n95, n95, color="0.8", alpha=0.7, label=label)
    else:
        xs, ys = _within(*_null_series(result, frame, sub, "null95_gram"), lo, hi)
        ys = np.array(ys, float)
        ax.fill_between(xs, -ys, ys, color="0.8", alpha=0.7,
                        label="Gram null of the update (95%)")  # fmt: skip
    xs, ys = _within(*_null_series(result, frame, sub), lo, hi)
    if xs:
        ax.plot(xs, ys, ":", color="0.3", lw=1, label="update's sign-randomised null (95%)")


def _cosine_panel(ax, result, frame, sub, lo=None, hi=None, label=False) -> None:
    """One panel of `plot_cosines`: the cosines of sub-block `sub` over the whole run (lo
    None) or a zoom lo..hi, with the null levels and the windows (labelled where `label`)."""
    _cosine_null(ax, result, frame, sub, lo, hi)
    ax.axhline(0, color="k", lw=0.5)
    ytop = window_marks(ax, result, label=label, lo=lo, hi=hi, top=1.0, step=0.17)
    for var, (color, marker, lab) in COS_LINES.items():
        xs, ys = _within(*_series(result, frame, var, "cos", sub, mid=var.startswith("diff")),
                         lo, hi)  # fmt: skip
        if xs:
            ax.plot(xs, ys, "-", marker=marker, ms=3.5 if lo is None else 5, lw=1,
                    color=color, label=lab)  # fmt: skip
    ax.set_ylim(-1.05, max(1.05, ytop))
    ax.set_yticks(np.linspace(-1, 1, 9))


def plot_cosines(result, title: str = "", *, frame: str | None = None):
    """cos(predicted G1, observed) over steps, whole block (top) and bar_v x bar_v block
    (bottom), in `frame` (default: the headline frame): the whole run, then a zoom on each
    spike window; windows shaded, null levels as in `_cosine_null`."""
    frame = frame or result.get("frame", "orth")
    zooms = zoom_ranges(result)
    ncol = 1 + len(zooms)
    fig, axes = plt.subplots(
        2, ncol, figsize=(7.5 + 4.8 * len(zooms), 8.5), layout="constrained", squeeze=False,
        gridspec_kw={"width_ratios": [1.6] + [1] * len(zooms)},
    )  # fmt: skip
    for i, (sub, name) in enumerate((("all", "whole block"), ("barv_barv", "bar_v x bar_v block"))):
        for j in range(ncol):
            ax = axes[i, j]
            lo, hi = (None, None) if j == 0 else zooms[j - 1][1:]
            _cosine_panel(ax, result, frame, sub, lo, hi, label=(i == 0 and j == 0))
            if lo is not None:
                ax.set_xlim(lo, hi)
                ax.set_title(f"{name}: zoom on {zooms[j - 1][0]} ({lo}-{hi})", fontsize=10)
            else:
                ax.set_title(f"{name}, {frame} frame", fontsize=11)
                ax.set_ylabel("cosine(G1, observed)")
            if i == 1:
                ax.set_xlabel("training step")
            ax.tick_params(labelsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9)
    pred = result.get("prediction", "closed")
    fig.suptitle(
        (title or "theory's G1 vs the layer-2 QK update")
        + f"\n(G1: {'closed form' if pred == 'closed' else 'theorem model, sampled population'}"
        f" at the a, b measured at each snapshot; updates drawn at the middle of their interval)",
        fontsize=12,
    )
    return fig


TERM_LINES = {  # block -> (colour, style, label, line width, alpha)
    "pred": (C["black"], "--", "G1 at the measured a, b (theory)", 1.5, 1.0),
    "weights": (C["blue"], "-", "current layer-2 W_QK (the state), its scores (raw)", 2.4, 1.0),
    "grad_ce": (C["orange"], "-", "-gradient, cross-entropy on 1-var data", 0.9, 0.75),
    "grad_lin": (C["green"], ":", "-gradient, first-order term", 0.9, 0.75),
    "diff_nodecay": (C["vermillion"], "-", "observed update (weight decay removed)", 0.9, 0.75),
}
TERM_NAMES = {
    "assignment_wide": "assignment-wide (all assignments)",
    "memory": "associative memory (bound number)",
    "operand_attenuation": "operand positions (W-tilde)",
    "token_attenuation": "variable-token attenuation",
    "residual": "outside the theorem's form",
}


def plot_terms(result, title: str = ""):
    """The all-assignment (assignment-wide) term's share over steps (left: G1, gradients and
    updates in the result's headline frame, the state by its scores) and the state's scores
    split over the theorem's terms (right), windows shaded."""
    fig, axes = plt.subplots(1, 2, figsize=(17, 5.8), layout="constrained")
    ax = axes[0]
    ytop = window_marks(ax, result, label=True, top=1.0, step=0.09)
    for blk, (color, ls, lab, lw, alpha) in TERM_LINES.items():
        xs, ys = [], []
        for r in result["steps"]:
            t = (r.get("terms") or {}).get(blk)
            if t is not None:
                xs.append(_x(r, blk.startswith("diff")))
                v = t.get("aw_share_vs_memory")
                ys.append(np.nan if v is None else v)
        if xs:
            ax.plot(xs, ys, ls, color=color, marker="o", ms=2.5 if lw < 2 else 3.5, lw=lw,
                    alpha=alpha, label=lab, zorder=3 if blk == "weights" else 2)  # fmt: skip
    ax.set_ylim(-0.02, max(1.02, ytop))
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_xlabel("training step")
    ax.set_ylabel("assignment-wide / (assignment-wide + memory) energy")
    ax.set_title("share of the all-assignment term (1 = all of it raises every assignment)",
                 fontsize=10)  # fmt: skip
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower left", ncol=4, fontsize=8)
    ax = axes[1]
    steps = [r["step"] for r in result["steps"]]
    shares = {k: [(r.get("terms") or {}).get("weights", {}).get("share", {}).get(k, np.nan)
                  for r in result["steps"]] for k in TERM_NAMES}  # fmt: skip
    colors = [C["orange"], C["blue"], C["green"], C["purple"], C["grey"]]
    ax.stackplot(steps, *[np.nan_to_num(np.array(v, float)) for v in shares.values()],
                 colors=colors, alpha=0.85, labels=list(TERM_NAMES.values()))  # fmt: skip
    ytop = window_marks(ax, result, label=False, top=1.0, step=0.09)
    ax.set_ylim(0, max(1.0, ytop))
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_xlabel("training step")
    ax.set_ylabel("fraction of |W_QK block|^2")
    frame = result.get("frame", "orth")
    ax.set_title("the state W_QK's scores (raw) split into the theorem's terms", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle((title or "the theorem's all-assignment term along training")
                 + f" ({frame} frame)")  # fmt: skip
    return fig


def plot_structure(result, title: str = ""):
    """Identity score of the bar_v block (observed updates and current weights), and the
    sign agreement of the attenuation entries, in the result's headline frame."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2), sharex=True, layout="constrained")
    frame = result.get("frame", "orth")
    keys = (("identity", "row_argmax_on_diag"), ("identity", "diag_margin_over_std"),
            ("attenuation", "fraction"))  # fmt: skip
    for var, (color, lab) in VARIANT_STYLE.items():
        for ax, ks in zip(axes, keys, strict=True):
            xs, ys = _series(result, frame, var, *ks)
            if xs:
                ax.plot(xs, ys, "o-", ms=3, color=color, label=lab)
    steps = [r["step"] for r in result["steps"]]
    wid = [r["comparison"][frame]["weights_identity"] for r in result["steps"]]
    axes[0].plot(steps, [w["row_argmax_on_diag"] for w in wid], "k:",
                 label="current W_QK^2 (state)")  # fmt: skip
    axes[1].plot(steps, [w["diag_margin_over_std"] for w in wid], "k:", label="current W_QK^2")
    K = result["task"]["K"]
    axes[0].axhline(1 / K, color="0.6", lw=0.8, label=f"chance 1/K = {1 / K:.2f}")
    axes[2].axhline(0.5, color="0.6", lw=0.8, label="chance")
    for ax, t, yl in (
        (axes[0], "bar_v block: rows with argmax on the diagonal", "fraction of rows"),
        (axes[1], "bar_v block: (mean diag - mean off) / std", "margin / std"),
        (axes[2], "attenuation entries with the theorem's sign", "fraction of entries"),
    ):
        phase_marks(ax, result.get("phases"), label=ax is axes[0])
        ax.set_title(t, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel(yl)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8)
    fig.suptitle(title + f" ({frame} frame)")
    return fig


def _embeddings_panel(ax, steps, R) -> None:
    """How orthogonal the embeddings and the ebar vectors are (theory: 0)."""
    emb = [r["assumptions"]["embeddings"] for r in R]
    ax.plot(steps, [e["embeddings_max_abs_cos_excluding_cooccurring"] for e in emb],
            label="max |cos|, W_E & W_pos rows (without +/pos12, =/pos15)")  # fmt: skip
    for key, lab in (("cos_plus_pos_plus", "|cos(W_E[+], W_pos[12])|"),
                     ("cos_eq_pos_eq", "|cos(W_E[=], W_pos[15])|")):  # fmt: skip
        ax.plot(steps, [abs(e[key]) for e in emb], ls=":", label=lab)
    for group, key, lab in (("embeddings", "mean_abs_cos", "mean |cos|, W_E & W_pos rows"),
                            ("ebar", "max_abs_cos", "max |cos| among ebar_v"),
                            ("ebar", "mean_abs_cos", "mean |cos| among ebar_v")):  # fmt: skip
        ax.plot(steps, [e[group][key] for e in emb], label=lab)
    ax.plot(steps, [e["ebar_vs_embeddings_max_abs_cos"] for e in emb],
            label="max |cos| ebar vs embeddings")  # fmt: skip
    ax.axhline(emb[0]["random_baseline_abs_cos"], color="0.5", ls=":",
               label="random vectors (mean |cos|)")  # fmt: skip
    ax.set_title("orthogonal embeddings? (0 = orthogonal)")
    ax.set_ylabel("|cosine|")


def _layer1_panel(ax, steps, A) -> None:
    """Layer 1's routing and what it writes (theory: 1)."""
    for key, lab in (
        ("l1_eq_to_operands_mass", "L1: '=' -> positions 13, 14 (mass)"),
        ("l1_num_to_prev_mass", "L1: number -> previous token (mass)"),
        ("l1_num_to_prev_argmax", "L1: number -> previous token (argmax)"),
        ("query_added_cos_ebar", "cos(L1 output at '=', ebar_v)"),
        ("number_added_cos_ebar", "cos(L1 output at number, ebar_u)"),
    ):
        ax.plot(steps, [a[key] for a in A], label=lab)
    ax.set_title("first layer in place? (theory: 1)")
    ax.set_ylabel("value")


def _accuracy_panel(ax, steps, R, A) -> None:
    """The isolated OV-MLP, ideal routing, the model's accuracies and the batch's."""
    ax.plot(steps, [a["ov2_mlp2_accuracy"] for a in A], "k-", label="isolated OV2-MLP2 accuracy")
    ax.plot(steps, [a.get("oracle_routing_accuracy", np.nan) for a in A], "-", color=C["purple"],
            label="batch accuracy with ideal layer-2 routing")  # fmt: skip
    for name, color in (("0var/ind", C["blue"]), ("1var/ind", C["orange"]),
                        ("2var/ind", C["green"])):  # fmt: skip
        ys = [r["metrics_acc"].get(name, np.nan) for r in R]
        ax.plot(steps, ys, color=color, ls="--", label=f"model accuracy {name}")
    ax.plot(steps, [r["batch_accuracy"] for r in R], color=C["vermillion"], ls=":",
            label="accuracy on the comparison batch")  # fmt: skip
    ax.set_title("MLP in place? / accuracy")
    ax.set_ylabel("accuracy")
    ax.set_xlabel("training step")


def _attention_panel(ax, steps, R) -> None:
    """Layer 2's attention of `=` on 1-var sequences: a, and its mass by target."""
    att = [r["attention"] for r in R]
    ax.plot(steps, [a["a_operands"] for a in att], "k-", label="a (per operand position 13, 14)")
    ax.plot(steps, [a["a_values"] for a in att], "k--", label="a (per value position)")
    for key in ("number_operand", "variable_operand", "bound_number", "other_assigned_numbers",
                "self"):  # fmt: skip
        ax.plot(steps, [a["mass"][key] for a in att], lw=1, label=f"mass: {key.replace('_', ' ')}")
    ax.set_title("layer-2 attention of '=' on 1-var sequences")
    ax.set_ylabel("attention")
    ax.set_xlabel("training step")


def plot_assumptions(result, title: str = ""):
    """The theorem's assumptions measured over training: orthogonal embeddings, layer 1 in
    place, the MLP and the accuracies, layer 2's attention."""
    R = result["steps"]
    steps = [r["step"] for r in R]
    fig, axes = plt.subplots(2, 2, figsize=(18, 9.5), sharex=True, layout="constrained")
    for ax in axes.ravel():
        ax.set_prop_cycle(color=LINE_COLORS)
    A = [r["assumptions"] for r in R]
    _embeddings_panel(axes[0, 0], steps, R)
    _layer1_panel(axes[0, 1], steps, A)
    _accuracy_panel(axes[1, 0], steps, R, A)
    _attention_panel(axes[1, 1], steps, R)
    for ax in axes.ravel():
        phase_marks(ax, result.get("phases"), label=False)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), framealpha=0.9)
    fig.suptitle(title)
    return fig
