"""The ladder's report: ladder.json, ladder.md (the table by size, the table by depth) and the
figures (accuracy by the graph's size and by node depth, one line per seed, a panel a rung),
declared once as a Report (empirical.report.writer)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from empirical.report.tables import markdown_table, pct
from empirical.report.writer import Figure, Json, Report
from empirical.studies.graph.ladder import COPY_RULES, GAP_CAP, GOAL, MIN_NODES
from empirical.studies.graph.options import LADDER


def _cell(stats: dict) -> str:
    """'99.1% [97.0, 100.0]': the median over seeds and their range."""
    if stats["median"] is None:
        return "-"
    return f"{pct(stats['median'])} [{100 * stats['min']:.1f}, {100 * stats['max']:.1f}]"


def _pooled(stats: dict) -> str:
    if stats["pooled"] is None:
        return "-"
    low, high = stats["pooled_ci95"]
    return f"{pct(stats['pooled'])} [{100 * low:.1f}, {100 * high:.1f}]"


def _inside(n: int, trained: list[int]) -> str:
    """'yes' for a trained size, else how many times the largest trained one ('4x')."""
    return "yes" if trained[0] <= n <= trained[1] else f"{n / trained[1]:.0f}x"


def ladder_markdown(result: dict) -> str:
    """The tables of ladder.md."""
    trained = result["trained_nodes"]
    lines = [
        "# The ablation ladder on the graph family (seed 002)", "",
        f"Config: `{result['config']}`; trained on graphs of {trained[0]}..{trained[1]} nodes; "
        f"seeds {', '.join(map(str, result['seeds']))}; device: {result['device']}.",
        f"Command: `{result['command']}`", "",
        "Per node: the share of nodes whose value is right (at the position of the node's "
        "name); per graph: the share of graphs with every node right. Median over seeds "
        "[min, max]; seeds >= 99.5% per node; pooled: all seeds' nodes together, Wilson 95% "
        "(the evaluation sets' sampling only).", "",
    ]  # fmt: skip
    header = "rung | N | in training | per node: median [range] | seeds >= 99.5% | " \
             "per node: pooled [95%] | per graph: median [range]"  # fmt: skip
    rows = []
    for r in result["rows"]:
        inside = _inside(r["N"], trained)
        rows.append(f"{r['rung']} | {r['N']} | {inside} | {_cell(r['nodes'])} | "
                    f"{r['nodes']['at_goal']} of {r['nodes']['seeds']} | "
                    f"{_pooled(r['nodes'])} | {_cell(r['graphs'])}")  # fmt: skip
    rules = result.get("node_rule_rows", [])
    rows += [f"*rule: {RULE_NODES[r['rule']]}* | {r['N']} | {_inside(r['N'], trained)} | "
             f"{_cell(r)} | - | {_pooled(r)} | -" for r in rules]  # fmt: skip
    lines += markdown_table(header, rows)
    if rules:
        lines += ["", "The rows in italics read no name: a leaf's value from its clause, every "
                  "other node by a rule on the values of the nodes before it (the same seeds' "
                  "sets); a model ahead of them reads names."]  # fmt: skip
    lines += ["", "## Per node, by the node's depth (all sets pooled)", ""]
    depths = sorted({r["depth"] for r in result["depth_rows"]})
    cells = {(r["rung"], r["depth"]): r for r in result["depth_rows"]}
    header = "rung | " + " | ".join(f"depth {d}" for d in depths)
    rows = []
    for rung in result["rungs"]:
        rows.append(rung + " | " + " | ".join(
            _thin_marked(cells[(rung, d)]) if (rung, d) in cells else "-" for d in depths))
    lines += markdown_table(header, rows)
    lines += ["", f"A cell marked (n ...) here and below holds fewer than {MIN_NODES} nodes of "
              "some seed (n: its fewest): too few to read; the figure leaves it out."]  # fmt: skip
    kinds = list(dict.fromkeys(r["kind"] for r in result.get("kind_rows", [])))
    if kinds:
        lines += ["", "## Per node, by the node's kind (all sets pooled)", "",
                  "leaf: a given value; copy: the value of one earlier node; otherwise the "
                  "operations of its clause, in order.", ""]  # fmt: skip
        cells = {(r["rung"], r["kind"]): r for r in result["kind_rows"]}
        rows = [rung + " | " + " | ".join(
            pct(cells[(rung, k)]["median"]) if (rung, k) in cells else "-" for k in kinds)
            for rung in result["rungs"]]  # fmt: skip
        lines += markdown_table("rung | " + " | ".join(f"`{k}`" for k in kinds), rows)
    gaps = sorted({r["gap"] for r in result.get("gap_rows", [])})
    if gaps:
        lines += ["", "## Copies, by the nodes defined between the operand and the copy (all sets "
                  "pooled)", "",
                  "A model that fetches the operand by its name is flat over the gap; the rule "
                  "\"the latest node's value\" is right at gap 0 and at chance (1/p) beyond. "
                  "The rows in italics are rules that read no name (the same sets, the first "
                  "rung's seeds): a model's copies beat them only by reading names.",
                  ""]  # fmt: skip
        cells = {(r["rung"], r["gap"]): r for r in result["gap_rows"]}
        rows = [rung + " | " + " | ".join(
            _thin_marked(cells[(rung, g)]) if (rung, g) in cells else "-" for g in gaps)
            for rung in result["rungs"]]  # fmt: skip
        rules = {(r["rule"], r["gap"]): r for r in result.get("gap_rule_rows", [])}
        rows += [f"*rule: {COPY_RULES[rule]}* | " + " | ".join(
            _thin_marked(rules[(rule, g)]) if (rule, g) in rules else "-" for g in gaps)
            for rule in COPY_RULES if any(k[0] == rule for k in rules)]  # fmt: skip
        label = {g: f"gap {g}" + ("+" if g == GAP_CAP else "") for g in gaps}
        lines += markdown_table("rung | " + " | ".join(label[g] for g in gaps), rows)
    lines += _operand_value_lines(result)
    lines += _one_step_lines(result)
    lines += ["", "Rungs: " + "; ".join(f"`{k}` {LADDER[k][0]}" for k in result["rungs"]), ""]
    return "\n".join(lines)


def _operand_value_lines(result: dict) -> list[str]:
    """Nodes with two or more operands, split by whether their operands' values are equal:
    the rule "every operand is worth the one read" against reading them all."""
    cells = {(r["rung"], r["kind"]): r for r in result.get("operand_value_rows", [])}
    steps = {(r["rung"], r["kind"]): r for r in result.get("one_step_operand_value_rows", [])}
    if not cells:
        return []
    lines = ["", "## Nodes with two or more operands, by their operands' values (all sets "
             "pooled)", "",
             "equal: every operand has the same value, where the rule \"every operand is worth "
             "the one read\" (a + a, a - a) is right; distinct: with two operands that rule is "
             "never right, so a model right there reads every operand. Per node, median "
             "[range] over seeds; one step: from the true values of the shallower nodes.", ""]
    rows = [rung + " | " + " | ".join(
        _cell(table[(rung, k)]) if (rung, k) in table else "-"
        for table in (cells, steps) for k in ("equal", "distinct"))
        for rung in result["rungs"]]  # fmt: skip
    lines += markdown_table("rung | equal | distinct | one step: equal | one step: distinct",
                            rows)  # fmt: skip
    first = next(r for r in result["rungs"] if (r, "equal") in cells or (r, "distinct") in cells)
    counts = [(cells[(first, k)]["totals"] if (first, k) in cells else {}) for k in
              ("equal", "distinct")]  # fmt: skip
    shares = [counts[0].get(s, 0) / (counts[0].get(s, 0) + counts[1].get(s, 0))
              for s in set(counts[0]) | set(counts[1])]  # fmt: skip
    spread = pct(min(shares)) if min(shares) == max(shares) else \
        f"{pct(min(shares))} to {pct(max(shares))} over the seeds"
    lines += ["", f"The rule's accuracy on these nodes, the share with equal values: {spread}."]
    return lines


def _one_step_lines(result: dict) -> list[str]:
    """The rungs with a discrete state, one step of the algorithm: by size, and by kind."""
    rows = [r for r in result["rows"] if "one_step" in r]
    if not rows:
        return []
    lines = ["", "## One step of the algorithm (each node from the true values of the shallower "
             "ones)", "",
             "The rungs with a discrete state, fed the true values of every node shallower than "
             "the one scored, read at the iteration of its depth: what one iteration computes "
             "from a right state, with no error carried from earlier ones. Per node, median "
             "[range] over seeds.", ""]  # fmt: skip
    sizes = sorted({r["N"] for r in rows})
    cells = {(r["rung"], r["N"]): r["one_step"] for r in rows}
    rungs = [g for g in result["rungs"] if any((g, n) in cells for n in sizes)]
    lines += markdown_table("rung | " + " | ".join(f"N = {n}" for n in sizes), [
        rung + " | " + " | ".join(_cell(cells[(rung, n)]) if (rung, n) in cells else "-"
                                  for n in sizes) for rung in rungs])  # fmt: skip
    by_kind = result.get("one_step_kind_rows", [])
    kinds = list(dict.fromkeys(r["kind"] for r in by_kind))
    if kinds:
        cells = {(r["rung"], r["kind"]): r for r in by_kind}
        lines += ["", "By the node's kind (all sets pooled):", ""]
        lines += markdown_table("rung | " + " | ".join(f"`{k}`" for k in kinds), [
            rung + " | " + " | ".join(pct(cells[(rung, k)]["median"]) if (rung, k) in cells
                                      else "-" for k in kinds) for rung in rungs])  # fmt: skip
    return lines


def _by(result: dict, rung: str, key: str):
    """{seed: (xs, accuracies)} of a rung's nodes by size N."""
    out = {}
    for r in result["rows"]:
        if r["rung"] == rung:
            for seed, acc in r[key]["per_seed"].items():
                xs, ys = out.setdefault(seed, ([], []))
                xs.append(r["N"])
                ys.append(acc)
    return out


RULE_NODES = {"latest": "leaves read, other nodes the latest node's value",
              "mode": "leaves read, other nodes the most frequent earlier value"}


def _thin(row: dict, seed) -> bool:
    """A seed's cell with fewer than MIN_NODES nodes (rows written before the counts were
    kept are drawn as they are)."""
    return row.get("totals", {}).get(seed, MIN_NODES) < MIN_NODES


def _thin_marked(row: dict) -> str:
    """The median, with the fewest nodes of a seed when that is too few to read."""
    fewest = min(row.get("totals", {}).values(), default=MIN_NODES)
    return pct(row["median"]) + (f" (n {fewest})" if fewest < MIN_NODES else "")


def _legend_where_most(axes) -> None:
    """The legend on the panel with the most lines (the rung with the most seeds): a rung
    with fewer finished seeds would leave the others' colours unnamed."""
    max(axes, key=lambda ax: len(ax.get_lines())).legend(fontsize=7, loc="lower left")


def plot_by_size(result: dict):
    rungs = result["rungs"]
    fig, axes = plt.subplots(1, len(rungs), figsize=(3.2 * len(rungs), 3.6), sharey=True,
                             layout="constrained", squeeze=False)  # fmt: skip
    hi = result["trained_nodes"][1]
    for ax, rung in zip(axes[0], rungs, strict=True):
        for i, (seed, (xs, ys)) in enumerate(sorted(_by(result, rung, "nodes").items())):
            ax.plot(xs, ys, "o-", color=f"C{i}", label=f"seed {seed}: per node")
        for i, (seed, (xs, ys)) in enumerate(sorted(_by(result, rung, "graphs").items())):
            ax.plot(xs, ys, "x:", color=f"C{i}", alpha=0.6, label=f"seed {seed}: per graph")
        rule = [(r["N"], r["median"]) for r in result.get("node_rule_rows", [])
                if r["rule"] == "mode"]
        if rule:
            ax.plot(*zip(*rule, strict=True), "-", color="0.3", lw=2.5, alpha=0.5,
                    label="rule reading no name, per node")  # fmt: skip
        ax.axvspan(0, hi, color="0.9", zorder=0)
        ax.axhline(GOAL, color="k", lw=0.6, ls="--")
        ax.set_title(LADDER[rung][0], fontsize=9)
        ax.set_xlabel("graph size N (nodes); shaded: trained")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("accuracy")
    _legend_where_most(axes[0])
    fig.suptitle("Graph family: accuracy by graph size, one line per seed (dashed: 99.5%; grey: "
                 "leaves read, other nodes the most frequent earlier value)")
    return fig


def plot_by_depth(result: dict):
    rungs = result["rungs"]
    fig, axes = plt.subplots(1, len(rungs), figsize=(3.2 * len(rungs), 3.4), sharey=True,
                             layout="constrained", squeeze=False)  # fmt: skip
    for ax, rung in zip(axes[0], rungs, strict=True):
        rows = [r for r in result["depth_rows"] if r["rung"] == rung]
        seeds = sorted({s for r in rows for s in r["per_seed"]})
        for i, seed in enumerate(seeds):
            pts = [(r["depth"], r["per_seed"][seed]) for r in rows
                   if seed in r["per_seed"] and not _thin(r, seed)]
            if not pts:
                continue
            ax.plot(*zip(*pts, strict=True), "o-", color=f"C{i}", label=f"seed {seed}")
        ax.axvline(result["trained_depth"], color="0.5", lw=0.8, ls=":")
        ax.set_title(LADDER[rung][0], fontsize=9)
        ax.set_xlabel("node depth (dotted: deepest trained)")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("accuracy per node")
    _legend_where_most(axes[0])
    fig.suptitle("Graph family: accuracy per node by the node's depth (all sets pooled; "
                 f"depths with < {MIN_NODES} nodes of a seed left out)")
    return fig


def ladder_report(result: dict) -> Report:
    return Report({
        "ladder.json": Json(result, newline=True),
        "ladder.md": ladder_markdown(result),
        "accuracy_by_size": Figure(lambda: plot_by_size(result)),
        "accuracy_by_depth": Figure(lambda: plot_by_depth(result)),
    }, summary="ladder.md")  # fmt: skip
