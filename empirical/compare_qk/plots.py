"""Figures of the comparison (matplotlib, Agg): each function writes one PNG, returns its path."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

VARIANT_STYLE = {
    "grad_ce": ("tab:blue", "-gradient (cross-entropy, merged W_QK)"),
    "grad_lin": ("tab:orange", "-gradient (first-order loss, xi->0)"),
    "sgd_factored": ("tab:green", "SGD on W_Q, W_K (induced dW_QK)"),
    "diff": ("tab:gray", "snapshot change"),
    "diff_perp": ("tab:red", "snapshot change, decay removed"),
}


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def phase_marks(ax, phases: dict | None, label: bool = True) -> None:
    """Vertical lines: 0-var learned (black dashed), first / second spike windows (shaded)."""
    if not phases:
        return
    z = phases.get("zero_var_learned_step")
    if z is not None:
        ax.axvline(z, color="k", ls="--", lw=1, label="0-var >= 90%" if label else None)
    for key, color, name in (("first_spike", "tab:purple", "1st spike"),
                             ("second_spike", "tab:brown", "2nd spike")):  # fmt: skip
        s = phases.get(key)
        if s:
            ax.axvspan(s["start_step"], s["end_step"], color=color, alpha=0.15,
                       label=name if label else None)  # fmt: skip


def _series(result, frame, variant, *keys):
    xs, ys = [], []
    for r in result["steps"]:
        v = r["comparison"][frame].get(variant)
        if v is None:
            continue
        for k in keys:
            v = v[k]
        xs.append(r["step"])
        ys.append(np.nan if v is None else v)
    return xs, ys


def plot_cosines(result, path, title: str) -> Path:
    """cos(predicted G1, observed) over steps: whole block and bar_v x bar_v, both frames."""
    fig, axes = plt.subplots(2, 2, figsize=(13, 8), sharex=True)
    for i, frame in enumerate(("orth", "raw")):
        for j, (sub, name) in enumerate((("all", "whole block"), ("barv_barv", "bar_v x bar_v"))):
            ax = axes[i, j]
            for var, (color, lab) in VARIANT_STYLE.items():
                xs, ys = _series(result, frame, var, "cos", sub)
                if xs:
                    ax.plot(xs, ys, "o-", ms=3, color=color, label=lab)
            n95 = result["null95"][sub]
            ax.axhspan(-n95, n95, color="0.85", label="95% of random blocks")
            ax.axhline(0, color="k", lw=0.5)
            phase_marks(ax, result.get("phases"), label=(i == 0 and j == 0))
            ax.set_ylim(-1.05, 1.05)
            ax.set_title(f"{name}, {frame} frame")
            ax.set_ylabel("cosine(predicted, observed)")
            if i == 1:
                ax.set_xlabel("training step")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.06))
    fig.suptitle(title)
    return _save(fig, path)


def plot_structure(result, path, title: str) -> Path:
    """Identity score of the bar_v block (observed updates and current weights), and the
    sign agreement of the attenuation entries, orth frame."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), sharex=True)
    frame = "orth"
    for var, (color, lab) in VARIANT_STYLE.items():
        xs, ys = _series(result, frame, var, "identity", "row_argmax_on_diag")
        if xs:
            axes[0].plot(xs, ys, "o-", ms=3, color=color, label=lab)
        xs, ys = _series(result, frame, var, "identity", "diag_margin_over_std")
        if xs:
            axes[1].plot(xs, ys, "o-", ms=3, color=color, label=lab)
        xs, ys = _series(result, frame, var, "attenuation", "fraction")
        if xs:
            axes[2].plot(xs, ys, "o-", ms=3, color=color, label=lab)
    steps = [r["step"] for r in result["steps"]]
    wid = [r["comparison"][frame]["weights_identity"] for r in result["steps"]]
    axes[0].plot(
        steps, [w["row_argmax_on_diag"] for w in wid], "k:", label="current W_QK^2 (state)"
    )
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
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, bbox_to_anchor=(0.5, -0.1))
    fig.suptitle(title + " (orth frame)")
    return _save(fig, path)


def plot_assumptions(result, path, title: str) -> Path:
    """The theorem's assumptions measured over training."""
    R = result["steps"]
    steps = [r["step"] for r in R]
    fig, axes = plt.subplots(2, 2, figsize=(13, 8), sharex=True)
    ax = axes[0, 0]
    emb = [r["assumptions"]["embeddings"] for r in R]
    ax.plot(
        steps,
        [e["embeddings_max_abs_cos_excluding_cooccurring"] for e in emb],
        label="max |cos|, W_E & W_pos rows (without +/pos12, =/pos15)",
    )
    ax.plot(
        steps, [abs(e["cos_plus_pos_plus"]) for e in emb], ls=":", label="|cos(W_E[+], W_pos[12])|"
    )
    ax.plot(steps, [abs(e["cos_eq_pos_eq"]) for e in emb], ls=":", label="|cos(W_E[=], W_pos[15])|")
    ax.plot(
        steps, [e["embeddings"]["mean_abs_cos"] for e in emb], label="mean |cos|, W_E & W_pos rows"
    )
    ax.plot(steps, [e["ebar"]["max_abs_cos"] for e in emb], label="max |cos| among ebar_v")
    ax.plot(steps, [e["ebar"]["mean_abs_cos"] for e in emb], label="mean |cos| among ebar_v")
    ax.plot(
        steps,
        [e["ebar_vs_embeddings_max_abs_cos"] for e in emb],
        label="max |cos| ebar vs embeddings",
    )
    ax.axhline(
        emb[0]["random_baseline_abs_cos"], color="0.5", ls=":", label="random vectors (mean |cos|)"
    )
    ax.set_title("orthogonal embeddings? (0 = orthogonal)")
    ax.set_ylabel("|cosine|")
    ax = axes[0, 1]
    A = [r["assumptions"] for r in R]
    for key, lab in (
        ("l1_eq_to_operands_mass", "L1: `=` -> positions 13, 14 (mass)"),
        ("l1_num_to_prev_mass", "L1: number -> previous token (mass)"),
        ("l1_num_to_prev_argmax", "L1: number -> previous token (argmax)"),
        ("query_added_cos_ebar", "cos(L1 output at `=`, ebar_v)"),
        ("number_added_cos_ebar", "cos(L1 output at number, ebar_u)"),
    ):
        ax.plot(steps, [a[key] for a in A], label=lab)
    ax.set_title("first layer in place? (theory: 1)")
    ax.set_ylabel("value")
    ax = axes[1, 0]
    ax.plot(steps, [a["ov2_mlp2_accuracy"] for a in A], "k-", label="isolated OV2-MLP2 accuracy")
    ax.plot(
        steps,
        [a.get("oracle_routing_accuracy", np.nan) for a in A],
        "m-",
        label="batch accuracy with ideal layer-2 routing",
    )
    for name, color in (
        ("0var/ind", "tab:blue"),
        ("1var/ind", "tab:orange"),
        ("2var/ind", "tab:green"),
    ):
        ys = [r["metrics_acc"].get(name, np.nan) for r in R]
        ax.plot(steps, ys, color=color, ls="--", label=f"model accuracy {name}")
    ax.plot(
        steps,
        [r["batch_accuracy"] for r in R],
        color="tab:red",
        ls=":",
        label="accuracy on the comparison batch",
    )
    ax.set_title("MLP in place? / accuracy")
    ax.set_ylabel("accuracy")
    ax.set_xlabel("training step")
    ax = axes[1, 1]
    att = [r["attention"] for r in R]
    ax.plot(steps, [a["a_operands"] for a in att], "k-", label="a (per operand position 13, 14)")
    ax.plot(steps, [a["a_values"] for a in att], "k--", label="a (per value position)")
    for key in (
        "number_operand",
        "variable_operand",
        "bound_number",
        "other_assigned_numbers",
        "self",
    ):
        ax.plot(steps, [a["mass"][key] for a in att], lw=1, label=f"mass: {key.replace('_', ' ')}")
    ax.set_title("layer-2 attention of `=` on 1-var sequences")
    ax.set_ylabel("attention")
    ax.set_xlabel("training step")
    for ax in axes.ravel():
        phase_marks(ax, result.get("phases"), label=False)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return _save(fig, path)


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


def plot_blocks(blocks: dict, rows, cols, L: int, path, title: str) -> Path:
    """Heat maps (each scaled to max |entry| 1) of the prediction and observed blocks."""
    keys = [k for k in ("pred", "orth/grad_ce", "orth/grad_lin", "orth/diff_perp", "raw/grad_ce")
            if k in blocks]  # fmt: skip
    fig, axes = plt.subplots(len(keys), 1, figsize=(12, 2.3 * len(keys) + 0.5))
    axes = np.atleast_1d(axes)
    for ax, k in zip(axes, keys, strict=True):
        names, C = condensed(blocks[k], rows, cols, L)
        m = np.nanmax(np.abs(C)) or 1.0
        im = ax.imshow(C / m, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        ax.set_xticks(range(len(names)), names, rotation=60, fontsize=7)
        ax.set_title({"pred": "predicted G1 (theory)"}.get(k, f"observed: {k}"), fontsize=9)
        ax.set_ylabel("query")
        fig.colorbar(im, ax=ax, fraction=0.02, label="/ max |entry|")
    axes[-1].set_xlabel("key component")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_one_step(one: dict, path, title: str) -> Path:
    """Accuracy (and the batch's loss) after one step on layer-2 W_Q, W_K from 1-var data,
    per family, against the RMS change of `=`'s layer-2 scores the step causes."""
    fams = one["families"]
    sets = [k for k in ("0var/ind", "1var/ind", "2var/ind") if k in one["before"]]
    panels = sets + [k for k in ("2var_value_attention", "batch_loss") if k in one["before"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.5))
    colors = {"sgd": "tab:green", "grad_merged": "tab:blue", "predicted_orth": "tab:red",
              "predicted_raw": "tab:purple", "random_orth": "tab:gray"}  # fmt: skip
    for ax, name in zip(axes, panels, strict=True):
        for fam, color in colors.items():
            if fam in fams:
                xs = [r["rms_dscore"] for r in fams[fam]]
                ax.plot(xs, [r[name] for r in fams[fam]], "o-", color=color, ms=4, label=fam)
        ax.axhline(one["before"][name], color="k", ls="--", label="before")
        ax.set_xscale("log")
        ax.set_xlabel("RMS change of `=`'s layer-2 scores")
        if name == "batch_loss":
            ax.set_ylabel("cross-entropy on the step's 1-var batch")
            ax.set_title("loss on the data of the step")
        elif name == "2var_value_attention":
            ax.set_ylabel("layer-2 attention of `=` on the value positions")
            ax.set_title("2var/ind: attention to the operands' values")
            ax.set_ylim(-0.02, 1.02)
        else:
            ax.set_ylabel(f"accuracy {name}")
            ax.set_title(name)
            ax.set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)
