"""`python -m empirical graph-mechanism RUN_DIR [--n 200]`: a recurrent graph run's heads and
MLP per iteration (empirical.studies.graph.mechanism; docs/graph.md, "The mechanism"). Writes
RUN_DIR/analysis/graph_mechanism.json, graph_mechanism.md and the figures head_groups.png,
ov_factors.png, mlp_spectrum.png, and prints the summary. Options:
empirical.studies.graph.options.GraphMechanismOptions.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import torch

from disentangled.errors import UsageError
from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.report.tables import markdown_table, pct
from empirical.report.writer import Figure, Json, Report, print_report, write_report
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir
from empirical.studies.graph.mechanism import (
    fetch_attention,
    head_groups,
    mlp_spectrum,
    ov_by_factor,
    position_preferences,
    renamable,
)
from empirical.studies.graph.options import GraphMechanismOptions
from empirical.task.eval_sets import load_eval_sets


def mechanism(opts: GraphMechanismOptions) -> dict:
    run = RunDir(opts.run_dir)
    model, vocab = load_run(run.path)
    sets = load_eval_sets(run.eval_sets)
    task = run.read_config().task
    sizes = {n: int(n.removeprefix("graph/n")) for n in sets}
    # the largest graphs of the trained range, or the smallest beyond it, whose nodes have
    # operands that can be renamed (a graph of 3 nodes may have none)
    trained = sorted((n for n in sets if sizes[n] <= task.graph_max_nodes), key=sizes.get)[::-1]
    beyond = sorted((n for n in sets if sizes[n] > task.graph_max_nodes), key=sizes.get)
    name = next((n for n in trained + beyond if renamable(vocab, sets[n][: opts.n])), None)
    if name is None:
        raise UsageError(
            f"graph-mechanism {opts.run_dir}: no graph of its evaluation sets "
            f"({', '.join(sets)}) has a node whose operands can be renamed (an earlier name "
            "not among them); evaluate larger graphs (task.graph_eval_nodes)"
        )
    batch = sets[name][: opts.n]
    iterations = int(batch.target_depths.max()) + 1
    ops = [op for op in ("+", "-") if op in task.graph_operations]
    return {
        "run": str(run.path), "set": name, "iterations": iterations,
        "heads": head_groups(model, vocab, batch, iterations),
        "fetch": fetch_attention(model, vocab, batch),
        "ov": ov_by_factor(model, vocab),
        "positions": position_preferences(model),
        "mlp": {op: mlp_spectrum(model, vocab, op) for op in ops},
    }  # fmt: skip


def markdown(result: dict) -> str:
    heads = result["heads"]
    k = heads["operands"]
    lines = [f"# Mechanism per iteration: {result['run']}", "",
             f"Head groups on {heads['rows']} graphs of {result['set']} (the last {k}-operand "
             "node of each; each operand renamed in turn): the share of a head's attention "
             "change at the node due to each slot.", ""]  # fmt: skip
    header = "iteration | layer | head | " + " | ".join(f"slot {j}" for j in range(k)) + \
        " | group | change"  # fmt: skip
    rows = []
    for t, per_t in enumerate(heads["share"]):
        for layer, per_layer in enumerate(per_t):
            for h, share in enumerate(per_layer):
                total = sum(heads["change"][t][layer][h])
                rows.append(f"{t} | {layer} | {h} | " + " | ".join(pct(s) for s in share) +
                            f" | {heads['group'][t][layer][h]} | {total:.3g}")  # fmt: skip
    lines += markdown_table(header, rows)
    lines += ["", "OV per factor: the gain of the factor's centred embeddings through W_V W_O "
              "over a random direction's (> 1: carried more; the same weights every "
              "iteration).", ""]  # fmt: skip
    factors = result["ov"]["factors"]
    rows = [f"{layer} | {h} | " + " | ".join(f"{r[f]:.2f}" for f in factors)
            for layer, per_layer in enumerate(result["ov"]["ratio"])
            for h, r in enumerate(per_layer)]  # fmt: skip
    lines += markdown_table("layer | head | " + " | ".join(factors), rows)
    fetch = result["fetch"]
    lines += ["", f"The fetch: each head's attention at the iteration that resolves a "
              f"computed node ({fetch['operands']} operands of {result['set']}'s nodes). From "
              "the node: on an operand's definition (the seed's induction heads), on the latest "
              "definition when it is not an operand (recency), on one other definition. From "
              "the operand's own occurrence in the clause: on its definition (the same name "
              "written earlier), on one other definition.", ""]  # fmt: skip
    keys = ("operand", "latest", "other", "at_use_operand", "at_use_other")
    rows = [f"{layer} | {h} | " + " | ".join(f"{fetch[k][layer][h]:.3f}" for k in keys)
            for layer in range(len(fetch["operand"]))
            for h in range(len(fetch["operand"][layer]))]  # fmt: skip
    lines += markdown_table("layer | head | from the node: operand | latest | other | from the "
                            "occurrence: its definition | other", rows)  # fmt: skip
    if result.get("positions"):
        lines += ["", f"Relative positions: each head's score bias by distance (relative_gain "
                  f"{result['positions']['gain']:g} x b_rel): the distance it favours, that "
                  "bias, its margin over the median distance's (~5 lets a head look at one key "
                  "among dozens).", ""]  # fmt: skip
        rows = [f"{layer} | {h} | {c['distance']} | {c['bias']:.2f} | {c['margin']:.2f}"
                for layer, per in enumerate(result["positions"]["heads"])
                for h, c in enumerate(per)]  # fmt: skip
        lines += markdown_table("layer | head | distance | bias | margin", rows)
    lines += ["", "The last block's MLP on the probe `x -> x0; y -> x1; x0 op x1 -> x2;`, "
              "iteration 1: shares of the 2-D DFT power over (x, y).", ""]  # fmt: skip
    rows = [f"{op} | {where} | {pct(s['dc'])} | {pct(s['diagonal'])} | {pct(s['rest'])} | "
            f"{pct(m['probe_accuracy'])}"
            for op, m in result["mlp"].items() for where, s in
            (("input", m["input"]), ("output", m["output"]))]  # fmt: skip
    lines += markdown_table("op | MLP | (0,0) | diagonal | rest | probe accuracy", rows)
    return "\n".join(lines) + "\n"


def plot_groups(result: dict):
    share = np.array(result["heads"]["share"])  # [t, layer, head, slot]
    T, layers, heads, k = share.shape
    fig, axes = plt.subplots(layers, T, figsize=(1.9 * T + 1, 1.8 * layers + 0.8),
                             squeeze=False, layout="constrained")  # fmt: skip
    for layer in range(layers):
        for t in range(T):
            ax = axes[layer][t]
            im = ax.imshow(share[t, layer], vmin=0, vmax=1, cmap="viridis", aspect="auto")
            ax.set_title(f"iteration {t}, layer {layer}", fontsize=8)
            ax.set_xlabel("perturbed operand slot", fontsize=7)
            ax.set_ylabel("head", fontsize=7)
            ax.set_xticks(range(k))
            ax.set_yticks(range(heads))
    fig.colorbar(im, ax=axes, label="share of the head's attention change")
    fig.suptitle("Head groups by operand slot, per iteration")
    return fig


def plot_ov(result: dict):
    ratio = result["ov"]["ratio"]
    labels = [f"L{layer}H{h}" for layer, per in enumerate(ratio) for h in range(len(per))]
    factors = result["ov"]["factors"]
    values = np.array([[r[f] for f in factors] for per in ratio for r in per])
    fig, ax = plt.subplots(figsize=(1 + 0.6 * len(labels), 3.4), layout="constrained")
    width = 0.8 / len(factors)
    for i, f in enumerate(factors):
        ax.bar(np.arange(len(labels)) + i * width, values[:, i], width, label=f)
    ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels)
    ax.set_xlabel("layer and head")
    ax.axhline(1, color="k", lw=0.6, ls="--")
    ax.set_ylabel("gain over a random direction")
    ax.legend(title="factor f", fontsize=7)
    ax.set_title("What each head's OV copies, per factor of the discrete state")
    return fig


def plot_spectrum(result: dict):
    ops = list(result["mlp"])
    fig, axes = plt.subplots(len(ops), 2, figsize=(7, 3.2 * len(ops)), squeeze=False,
                             layout="constrained")  # fmt: skip
    for i, op in enumerate(ops):
        for j, where in enumerate(("input", "output")):
            power = result["mlp"][op][where]["_power"].numpy()
            ax = axes[i][j]
            im = ax.imshow(np.log10(power / power.sum() + 1e-9), cmap="magma", origin="lower")
            ax.set_title(f"x0 {op} x1: MLP {where}", fontsize=9)
            ax.set_xlabel("frequency over y")
            ax.set_ylabel("frequency over x")
            fig.colorbar(im, ax=ax, label="log10 share of power")
    fig.suptitle("The MLP over operand values: 2-D DFT power (iteration 1)")
    return fig


def run(opts: GraphMechanismOptions) -> int:
    with torch.no_grad():
        result = mechanism(opts)
    use_cli_backend()
    report = Report({
        "graph_mechanism.json": Json(result, newline=True),
        "graph_mechanism.md": markdown(result),
        "head_groups": Figure(lambda: plot_groups(result)),
        "ov_factors": Figure(lambda: plot_ov(result)),
        "mlp_spectrum": Figure(lambda: plot_spectrum(result)),
    }, summary="graph_mechanism.md")  # fmt: skip
    out = opts.out or RunDir(opts.run_dir).analysis_dir()
    paths = write_report(report, out, figures=opts.figures)
    print_report(report, paths, quiet=False)
    return 0


main = command_main(GraphMechanismOptions, run)

if __name__ == "__main__":
    sys.exit(main())
