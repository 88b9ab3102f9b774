"""Where a chain run's attention goes, layer by layer, on the chain construction's targets
(docs/chain.md, "Mechanisms, a first look"): per layer (`blocks.{l}.attn.hook_pattern`), the
mean weight of the query `=` on the operands, on each hop's right-hand side and on the
distractors; of each right-hand side on its own variable (binding); and of a pointer's token
on its target's earlier assignment, against `pointer: uniform` (no preference).

    table = chain_attention(model, vocab, tokens)              # {measure: [per layer]}
    history = chain_attention_over_training(run_dir, tokens)   # the same at every snapshot
    report(...)                                               # what chain-attention writes
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from empirical.report.figures import OKABE_ITO, save_figure
from empirical.report.writer import Figure, Json, Report
from empirical.runs.load import load_run
from empirical.runs.phases import first_crossing
from empirical.runs.rundir import RunDir

__all__ = ["chain_attention", "chain_attention_over_training", "chain_structure",
           "plot_chain_attention", "plot_chain_attention_over_training", "report"]  # fmt: skip


def chain_structure(vocab, ids) -> dict:
    """The operand chains and the assignments of one sequence (token ids [L]): `assign`
    [(lhs_pos, rhs_pos, var, value_id)], `chains` per variable operand [assignment index,
    ...] from the operand's own assignment to the number, `on_chain` the assignment indices
    on any operand chain, `off_chain` the others (distractors), `index_of_var` each assigned
    variable's assignment index."""
    assigns, a, b = vocab._parse_ids(ids)
    by_var = {v: k for k, (v, _, _) in enumerate(assigns)}
    chains = []
    for t in (a, b):
        chain, seen = [], set()
        while t >= vocab.p and (t - vocab.p) in by_var and (t - vocab.p) not in seen:
            seen.add(t - vocab.p)
            k = by_var[t - vocab.p]
            chain.append(k)
            t = assigns[k][1]
        if chain:
            chains.append(chain)
    on_chain = {k for c in chains for k in c}
    return {
        "assign": [(pos, pos + 1, v, value) for v, value, pos in assigns],
        "chains": chains,
        "on_chain": sorted(on_chain),
        "off_chain": [k for k in range(len(assigns)) if k not in on_chain],
        "index_of_var": by_var,
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@torch.no_grad()
def chain_attention(model, vocab, tokens: torch.Tensor, max_hops: int = 4) -> dict[str, list]:
    """Mean attention weight per layer on the targets above, over the sequences `tokens`
    [n, L] (None where a measure has no instance). Returns {measure: [layer 1, ...]} and
    `uniform`: the mean of 1/(visible positions) of the query (no preference)."""
    n_layers = model.cfg.n_layers
    _, cache = model.run_with_cache(
        tokens, names_filter=lambda name: name.endswith("attn.hook_pattern")
    )
    patterns = [cache["pattern", layer][:, 0] for layer in range(n_layers)]  # [n, q, k]
    L = tokens.shape[1]
    q = L - 1
    names = ["query -> operands", *[f"query -> hop {k}" for k in range(1, max_hops + 1)],
             "query -> distractors", "RHS -> own LHS", "pointer -> target's variable",
             "pointer -> target's value", "pointer: uniform"]  # fmt: skip
    sums: dict[str, list[list[float]]] = {m: [[] for _ in range(n_layers)] for m in names}
    for row in range(tokens.shape[0]):
        ids = tokens[row]
        s = chain_structure(vocab, ids)
        assign, by_var = s["assign"], s["index_of_var"]
        for layer, pat in enumerate(patterns):
            att = pat[row]
            sums["query -> operands"][layer].append(float(att[q, L - 3] + att[q, L - 2]))
            for chain in s["chains"]:
                for k, idx in enumerate(chain[:max_hops], start=1):
                    sums[f"query -> hop {k}"][layer].append(float(att[q, assign[idx][1]]))
            off = s["off_chain"]
            if off:
                mass = sum(float(att[q, assign[i][0]] + att[q, assign[i][1]]) for i in off)
                sums["query -> distractors"][layer].append(mass)
            for lhs, rhs, _, _ in assign:
                sums["RHS -> own LHS"][layer].append(float(att[rhs, lhs]))
            for _, rhs, _, value in assign:
                target = by_var.get(value - vocab.p) if value >= vocab.p else None
                if target is not None and assign[target][1] < rhs:
                    t_lhs, t_rhs = assign[target][0], assign[target][1]
                    sums["pointer -> target's variable"][layer].append(float(att[rhs, t_lhs]))
                    sums["pointer -> target's value"][layer].append(float(att[rhs, t_rhs]))
                    sums["pointer: uniform"][layer].append(1.0 / (rhs + 1))
    table = {m: [_mean(v) for v in per_layer] for m, per_layer in sums.items()}
    table = {m: v for m, v in table.items() if any(x is not None for x in v)}
    table["uniform"] = [1.0 / L] * n_layers  # the query sees all L positions
    return table


def plot_chain_attention(table: dict[str, list], path=None, title: str = "", *, fmt=None):
    """Grouped bars: one group per measure, one bar per layer; the query's uniform weight
    (no preference) as a dashed line."""
    measures = [m for m in table if m != "uniform"]
    n_layers = len(table["uniform"])
    colors = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "purple")]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.3 * len(measures) + 3), 4.8), layout="constrained")
    width = 0.8 / n_layers
    x = np.arange(len(measures))
    for layer in range(n_layers):
        values = [table[m][layer] for m in measures]
        ax.bar(x + (layer - (n_layers - 1) / 2) * width,
               [np.nan if v is None else v for v in values], width,
               color=colors[layer % len(colors)], label=f"layer {layer + 1}")  # fmt: skip
    ax.axhline(table["uniform"][0], color="0.3", ls="--", lw=1,
               label=f"query's uniform weight (1/{round(1 / table['uniform'][0])})")  # fmt: skip
    ax.set_xticks(x)
    ax.set_xticklabels(measures, rotation=20, ha="right", fontsize=9)
    ax.set_ylabel("mean attention weight")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or "Attention onto the chain construction's targets, per layer")
    return save_figure(fig, path, fmt)


@torch.no_grad()
def chain_attention_over_training(run_dir, tokens: torch.Tensor) -> dict:
    """`chain_attention` at every snapshot of the run: {"steps": [...], "tables": [...]}, so
    the order in which the layers' attention forms can be read against the accuracy."""
    run = RunDir(run_dir).require_run()
    steps = run.snapshot_steps()
    tables = [chain_attention(*load_run(run.path, step=step), tokens) for step in steps]
    return {"steps": steps, "tables": tables}


def key_series(history: dict) -> dict[str, list]:
    """The construction's steps as series over training: layer 1's query on the operands,
    the middle layers' binding and their query on hop 1, the last layer's query on the
    number (the last hop; the largest hop count present)."""
    tables = history["tables"]
    n = len(tables[0]["uniform"]) if tables else 0
    last_hop = max((m for m in tables[0] if m.startswith("query -> hop")), default=None,
                   key=lambda m: int(m.rsplit(" ", 1)[1]))  # fmt: skip
    series = {"layer 1: query -> operands": [t["query -> operands"][0] for t in tables]}
    for layer in range(1, n - 1):
        series[f"layer {layer + 1}: RHS -> own LHS (binding)"] = [
            t["RHS -> own LHS"][layer] for t in tables
        ]
        series[f"layer {layer + 1}: query -> hop 1"] = [t["query -> hop 1"][layer] for t in tables]
    if last_hop is not None:
        series[f"layer {n}: query -> the number ({last_hop.split(' -> ')[1]})"] = [
            t[last_hop][n - 1] for t in tables
        ]
    return series


def formation_steps(steps: list[int], series: dict[str, list], fraction: float = 0.5) -> dict:
    """When each key measure forms: {name: {"step", "start", "peak", "peak_step"}}, "step" the
    first snapshot at which the measure has made `fraction` of its rise from the first
    snapshot to its peak (None where it never rises). The order of these steps is the
    order in which the construction's hops are learned (spec/chain.md, question 3: the
    last hop's memory before the middle hop's), at the snapshots' resolution."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction = {fraction!r} must be in (0, 1]")
    out = {}
    for name, values in series.items():
        known = [(t, v) for t, v in zip(steps, values, strict=True) if v is not None]
        if not known:
            out[name] = {"step": None, "start": None, "peak": None, "peak_step": None}
            continue
        start = known[0][1]
        peak_step, peak = max(known, key=lambda tv: tv[1])
        level = start + fraction * (peak - start)
        steps_k, values_k = [t for t, _ in known], [v for _, v in known]
        step = first_crossing(steps_k, values_k, level) if peak > start else None
        out[name] = {"step": step, "start": start, "peak": peak, "peak_step": peak_step}
    return out


def plot_chain_attention_over_training(history: dict, path=None, title: str = "", *, fmt=None):
    """The key measures (`key_series`) over the snapshots' steps."""
    colors = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky")]
    fig, ax = plt.subplots(figsize=(10, 4.8), layout="constrained")
    for i, (name, values) in enumerate(key_series(history).items()):
        ax.plot(history["steps"], [float("nan") if v is None else v for v in values], "-o",
                ms=3, color=colors[i % len(colors)], label=name)  # fmt: skip
    ax.set_xlabel("training step (snapshots)")
    ax.set_ylabel("mean attention weight")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title or "The chain construction's attention over training")
    return save_figure(fig, path, fmt)


def report(set_name: str, n: int, where: str, table: dict, label: str,
           history: dict | None = None) -> Report:  # fmt: skip
    """What `chain-attention` writes for `table` (n sequences of `set_name`, weights `where`:
    "step S" or "latest weights"), and with `history` the same over training:
    chain_attention_SET.json and .png (SET with `/` as `_`), chain_attention_SET_steps.json
    and .png."""
    stem = f"chain_attention_{set_name.replace('/', '_')}"
    payload = {"set": set_name, "n": n, "weights": where, "per_layer": table}
    files = {
        f"{stem}.json": Json(payload, indent=2, plain=True),
        stem: Figure(lambda: plot_chain_attention(
            table, None, f"Attention onto the chain's targets per layer ({label}, {set_name}, "
            f"{where})")),
    }  # fmt: skip
    if history is not None:
        series = key_series(history)
        steps = {"set": set_name, "steps": history["steps"], "key_series": series,
                 "formed_at_half_rise": formation_steps(history["steps"], series),
                 "tables": history["tables"]}  # fmt: skip
        files[f"{stem}_steps.json"] = Json(steps, indent=2, plain=True)
        files[f"{stem}_steps"] = Figure(lambda: plot_chain_attention_over_training(
            history, None, f"The chain's attention over training ({label}, {set_name})"))
    return Report(files, summary=None)
