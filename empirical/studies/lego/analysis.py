"""Association attention of a lego run (docs/lego.md, "The association attention"): per layer
(the heads' mean, and the best head) the attention weight from a clause onto the clause that
defines the variable it names (`named -> its clause`), backwards (`defined -> naming clause`),
from the query onto its clause and onto the clauses 1..3 hops down its chain, each where the
target is visible (the model is causal), against its chance level 1 / (position + 1).

    table = association_attention(model, vocab, tokens)      # {measure: {...per layer}}
    history = association_over_training(run_dir, tokens)    # the same at every snapshot
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from empirical.report.figures import OKABE_ITO, save_figure
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir

__all__ = ["MEASURES", "association_attention", "association_over_training", "plot_association"]

HOPS_DOWN = 3  # `query -> k hops down` for k = 1..this
MEASURES = ("named -> its clause", "defined -> naming clause", "query -> its clause",
            *(f"query -> {k} hop{'s' if k > 1 else ''} down" for k in range(1, HOPS_DOWN + 1)))
# fmt: skip


def _instances(vocab, ids) -> dict[str, list[tuple[int, int]]]:
    """Per measure, the (from position, target clause's position) pairs of one sequence
    where the target is visible from the position."""
    clauses, q = vocab.clauses(ids)
    at = {v: pos for pos, v, _, _ in clauses}
    naming = {named: pos for pos, _, _, named in clauses if named >= 0}
    out: dict[str, list[tuple[int, int]]] = {m: [] for m in MEASURES}
    L = vocab.L
    for pos, v, _, named in clauses:
        if named >= 0 and at.get(named, L) < pos:
            out["named -> its clause"].append((pos, at[named]))
        if naming.get(v, L) < pos:
            out["defined -> naming clause"].append((pos, naming[v]))
    if q in at:
        out["query -> its clause"].append((L - 1, at[q]))
    named_of = {v: named for _, v, _, named in clauses}
    v = named_of.get(q, -1)
    for k in range(1, HOPS_DOWN + 1):  # the clauses on the query's chain, towards its root
        if v < 0 or v not in at:
            break
        out[f"query -> {k} hop{'s' if k > 1 else ''} down"].append((L - 1, at[v]))
        v = named_of.get(v, -1)
    return out


@torch.no_grad()
def association_attention(model, vocab, tokens: torch.Tensor) -> dict[str, dict]:
    """{measure: {"mean": [per layer], "best_head": [per layer], "chance": float, "n": int}}
    over the sequences `tokens` [n, L]: the attention weight on the target clause (the
    heads' mean, and the largest of one head), None where a measure has no instance."""
    n_layers = model.cfg.n_layers
    _, cache = model.run_with_cache(
        tokens, names_filter=lambda name: name.endswith("attn.hook_pattern")
    )
    patterns = [cache["pattern", layer] for layer in range(n_layers)]  # [n, head, q, k]
    rows, frm, tgt, which = [], [], [], []
    for row in range(tokens.shape[0]):
        for m, pairs in _instances(vocab, tokens[row]).items():
            for f, t in pairs:
                rows.append(row)
                frm.append(f)
                tgt.append(t)
                which.append(MEASURES.index(m))
    out = {}
    index = torch.tensor(which, dtype=torch.long)
    r, f, t = (torch.tensor(x, dtype=torch.long) for x in (rows, frm, tgt))
    for i, m in enumerate(MEASURES):
        sel = index == i
        if not bool(sel.any()):
            out[m] = {"mean": [None] * n_layers, "best_head": [None] * n_layers,
                      "chance": None, "n": 0}  # fmt: skip
            continue
        rs, fs, ts = r[sel], f[sel], t[sel]
        mean, best = [], []
        for pat in patterns:
            weight = pat[rs, :, fs, ts]  # [k, head]
            per_head = weight.double().mean(0)
            mean.append(float(per_head.mean()))
            best.append(float(per_head.max()))
        chance = float((1.0 / (fs.double() + 1)).mean())
        out[m] = {"mean": mean, "best_head": best, "chance": chance, "n": int(sel.sum())}
    return out


@torch.no_grad()
def association_over_training(run_dir, tokens: torch.Tensor) -> dict:
    """`association_attention` at every snapshot of the run: {"steps", "tables"}."""
    run = RunDir(run_dir).require_run()
    steps = run.snapshot_steps()
    tables = [association_attention(*load_run(run.path, step=step), tokens) for step in steps]
    return {"steps": steps, "tables": tables}


def plot_association(table: dict, history: dict | None, path=None, title: str = "", *,
                     fmt=None):  # fmt: skip
    """Left: each measure per layer (the heads' mean; its chance level as a black tick).
    Right (with `history`): `named -> its clause` and `query -> its clause` per layer over
    the snapshots, their chance levels as horizontal lines."""
    colors = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "purple")]
    n_layers = len(next(iter(table.values()))["mean"])
    panels = 2 if history and history["steps"] else 1
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 4.8), layout="constrained",
                             squeeze=False)  # fmt: skip
    ax = axes[0, 0]
    width = 0.8 / n_layers
    measures = [m for m in MEASURES if table[m]["n"]]  # those with an instance in the set
    x = np.arange(len(measures))
    for layer in range(n_layers):
        values = [table[m]["mean"][layer] for m in measures]
        ax.bar(x + (layer - (n_layers - 1) / 2) * width,
               [np.nan if v is None else v for v in values], width,
               color=colors[layer % len(colors)], label=f"layer {layer + 1}")  # fmt: skip
    chance = [table[m]["chance"] for m in measures]
    ax.scatter(x, chance, marker="_", s=900, color="k", zorder=3, label="chance (uniform)")
    ax.set_xticks(x)
    ax.set_xticklabels(measures, rotation=15, ha="right", fontsize=9)
    ax.set_ylabel("attention weight on the target clause")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("per layer (final weights)", fontsize=10)
    if panels == 2:
        ax = axes[0, 1]
        steps = history["steps"]
        for k, (m, style) in enumerate((("named -> its clause", "-o"),
                                        ("query -> its clause", "--s"))):  # fmt: skip
            for layer in range(n_layers):
                series = [t[m]["mean"][layer] for t in history["tables"]]
                ax.plot(steps, [np.nan if v is None else v for v in series], style, ms=3,
                        color=colors[layer % len(colors)],
                        label=f"{m}, layer {layer + 1}")  # fmt: skip
            levels = [t[m]["chance"] for t in history["tables"] if t[m]["chance"] is not None]
            if levels:
                ax.axhline(levels[-1], color="0.3", ls=":" if k else "--", lw=1,
                           label=f"{m}: chance")  # fmt: skip
        ax.set_xlabel("training step (snapshots)")
        ax.set_ylabel("attention weight on the target clause")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title("over training (the heads' mean)", fontsize=10)
    fig.suptitle(title or "Association attention: onto the clause that defines a variable")
    return save_figure(fig, path, fmt)
