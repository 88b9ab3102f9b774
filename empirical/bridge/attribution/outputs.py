"""The attribution's files, declared once: per window attribution.json, attribution.npz,
shares.png and first_order.png (`window_report`), and one summary.md over the windows
(`summary_report`); docs/attribution.md, "Outputs".

    write_report(window_report(result), out / window_name(result))   # the window's files
    write_report(summary_report(results), out)                        # summary.md
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from empirical.bridge.attribution.first_order import first_order_rows
from empirical.bridge.attribution.path_comparison import cancellation
from empirical.bridge.attribution.paths import PathAttribution
from empirical.report.figures import OKABE_ITO, save_figure
from empirical.report.writer import Arrays, Figure, Json, Report

GROUP_COLOURS = {
    "W_E": OKABE_ITO["blue"], "W_pos": OKABE_ITO["sky"], "layer1_qk": OKABE_ITO["orange"],
    "layer1_ov": OKABE_ITO["vermillion"], "middle_qk": OKABE_ITO["yellow"],
    "middle_ov": OKABE_ITO["yellow"], "layer2_qk": OKABE_ITO["green"],
    "layer2_ov": OKABE_ITO["purple"], "mlp": OKABE_ITO["grey"], "unembed": OKABE_ITO["black"],
}  # fmt: skip
COMPLETE = 0.01  # the completeness check: |residual| <= 1% of |total|


def window_name(result: dict) -> str:
    a, b = result["window"]
    return f"{a}_{b}"


def window_report(result: dict) -> Report:
    """A window's files: attribution.json (every number but the per-piece tables),
    attribution.npz (per rule, the parts of every piece [pieces, targets, groups]), the
    figures shares and first_order (a first-order-only result: attribution.json and
    first_order)."""
    path = result.get("_path")
    plain = {k: v for k, v in result.items() if not k.startswith("_")}
    if path is not None:
        plain["groups"] = path.groups
        plain["complete_within"] = COMPLETE
    files: dict = {"attribution.json": Json(plain, indent=2)}
    if path is not None:
        files["attribution.npz"] = Arrays({
            "pieces": np.array(path.pieces, dtype=np.int64).reshape(-1, 2),
            "targets": np.array(path.targets),
            "groups": np.array(path.groups),
            **{f"parts__{rule}": path.table(rule) for rule in path.rules},
        })  # fmt: skip
        files["shares"] = Figure(lambda: plot_shares(result))
    if "first_order" in result:
        files["first_order"] = Figure(lambda: plot_first_order(result))
    return Report(files, summary=None)


def plot_first_order(result: dict, path=None, fmt: str | None = None):
    """Per group, the cosine of its observed change with each first-order prediction (minus
    the gradient of each 1-var loss, its sign; G1 for layer-2 W_QK) beside the 95% level of
    the sign-randomised null."""
    rows = first_order_rows(result["first_order"])
    groups = list(dict.fromkeys(g for _, _, g, _ in rows))
    series = list(dict.fromkeys((t, k) for t, k, _, _ in rows))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(groups) + 3), 4.2), layout="constrained")
    width = 0.8 / max(len(series), 1)
    for i, (t, k) in enumerate(series):
        by_group = {g: c for tt, kk, g, c in rows if (tt, kk) == (t, k)}
        xs = [groups.index(g) + (i - (len(series) - 1) / 2) * width for g in by_group]
        label = _prediction_name(t, k)
        ax.bar(xs, [c["cos"] for c in by_group.values()], width, label=label,
               color=plt.cm.tab20(i % 20))  # fmt: skip
        ax.scatter(xs, [c["null95"] for c in by_group.values()], marker="_", s=120, color="k",
                   zorder=3, label="95% sign null" if i == 0 else None)  # fmt: skip
    ax.axhline(0, color=OKABE_ITO["grey"], lw=0.6)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_xlabel("parameter group")
    ax.set_ylabel("cosine(observed change, prediction)")
    ax.legend(fontsize=7, ncol=2)
    a, b = result["window"]
    ax.set_title(f"{Path(result['run_dir']).name}, steps {a} -> {b}: each group's change against "
                 "its first-order prediction at step " + str(a), fontsize=10)  # fmt: skip
    return save_figure(fig, path, fmt)


def first_order_markdown(result: dict) -> list[str]:
    """The first-order table of one window: per group, cos / null95 of each prediction."""
    fo = result["first_order"]
    rows = first_order_rows(fo)
    groups = list(dict.fromkeys(g for _, _, g, _ in rows))
    lines = [
        f"First order at step {result['window'][0]} (cos with the observed change / 95% sign "
        "null; bold: beyond the null):",
        "",
        "| prediction | " + " | ".join(groups) + " |",
        "| --- | " + " | ".join("---" for _ in groups) + " |",
    ]
    for t, k in dict.fromkeys((t, k) for t, k, _, _ in rows):
        cells = {g: c for tt, kk, g, c in rows if (tt, kk) == (t, k)}
        shown = [_cos_cell(cells[g]) if g in cells else "" for g in groups]
        lines.append(f"| {_prediction_name(t, k)} | " + " | ".join(shown) + " |")
    if "error" in fo.get("g1", {}):
        lines.append(f"\nG1: {fo['g1']['error']}")
    return lines + [""]


def _prediction_name(target: str, kind: str) -> str:
    if kind == "g1":
        return "G1 (theorem), dual frame"
    return {"sign": f"-sign grad {target}", "adam": f"-grad/AdamW denom {target}"}.get(
        kind, f"-grad {target}"
    )


def _cos_cell(c: dict) -> str:
    text = f"{c['cos']:+.3f} / {c['null95']:.3f}"
    return f"**{text}**" if c["beats_null"] else text


def plot_shares(result: dict, path=None, fmt: str | None = None):
    """Per target, each group's cumulative part of the change over the window, as a share of
    the total change (ends at the group's share; the groups end summing to 1 - residual)."""
    pa = result["_path"]
    table = pa.table()
    ends = [pa.pieces[0][0]] + [b for _, b in pa.pieces] if pa.pieces else []
    marker = "o" if len(pa.pieces) <= 12 else None  # a few straight segments: show the nodes
    n = len(pa.targets)
    cols = 4 if n > 6 else min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.7 * rows + 0.8),
                             layout="constrained", squeeze=False)  # fmt: skip
    for i, target in enumerate(pa.targets):
        ax = axes[i // cols][i % cols]
        total = result["targets"][target]["total"]
        cum = np.cumsum(table[:, i, :], axis=0) / (total if total else np.nan)
        cum = np.vstack([np.zeros((1, cum.shape[1])), cum])  # 0 at the window's start
        for j, group in enumerate(pa.groups):
            ax.plot(ends, cum[:, j], color=GROUP_COLOURS.get(group), lw=1.3, label=group,
                    marker=marker, ms=3)  # fmt: skip
        ax.axhline(0, color=OKABE_ITO["grey"], lw=0.6)
        res = result["targets"][target]["residual_rel"]
        ax.set_title(f"{target}\ntotal {total:+.3g}, residual {100 * res:.2g}%", fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("share of the total change", fontsize=8)
        ax.tick_params(labelsize=7)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    a, b = result["window"]
    how = _path_words(result)
    fig.suptitle(f"{Path(result['run_dir']).name}, steps {a} -> {b}: each parameter group's "
                 f"cumulative share of each change ({how})", fontsize=10)  # fmt: skip
    return save_figure(fig, path, fmt)


def _path_words(result: dict) -> str:
    if "rule" not in result:
        return f"{result['path']['kind']}, the ends only (--first-order-only)"
    if result["path"]["kind"] == "replay":
        return f"the replayed training steps, {result['rule']} rule"
    return f"straight lines between snapshots, {result['rule']}"


def summary_markdown(results: list[dict]) -> str:
    """summary.md: per window, the path and its checks, and a table of every target's total
    and each group's part, with the residual and the completeness verdict."""
    lines = ["# Attribution of changes to parameter groups", ""]
    for r in results:
        a, b = r["window"]
        lines += [f"## {Path(r['run_dir']).name}: steps {a} -> {b}", "", f"Path: {_path_words(r)}."]
        checks = r["replay_checks"]
        if r["path"]["kind"] == "replay":
            same = sum(1 for c in checks if c["equal"])
            lines.append(
                f"Replayed from the checkpoint at step {r['path']['checkpoint_step']}: equal bit "
                f"for bit to the run's stored weights at {same} of {len(checks)} steps checked "
                f"({', '.join(str(c['step']) for c in checks) or 'none kept'})."
            )
        lines.append("")
        if "first_order" in r:
            lines += first_order_markdown(r)
        if "_path" not in r:
            continue
        groups = r["_path"].groups
        lines += [
            f"Each evaluation set's loss on its first {r['eval_size']} sequences; `score`: the "
            "labelled layer-2 score change along its own direction (its norm), `score_barv`: "
            "the bar_v block's. Sum |share|: the groups' |parts| over |total| (1: no group works "
            "against the change; more: the parts cancel).",
            "",
            "| target | total | " + " | ".join(groups) + " | sum abs share | residual | "
            "complete (1%) |",
            "| --- | --- | " + " | ".join("---" for _ in groups) + " | --- | --- | --- |",
        ]
        for t, v in r["targets"].items():
            parts = " | ".join(f"{v['groups'][g]:+.4g}" for g in groups)
            ok = "yes" if v["residual_rel"] <= COMPLETE else "no"
            rel = f"{100 * v['residual_rel']:.2g}%"
            spread = cancellation(v)
            lines.append(f"| {t} | {v['total']:+.4g} | {parts} | "
                         f"{'-' if spread is None else f'{spread:.2f}'} | "
                         f"{v['residual']:+.2g} ({rel}) | {ok} |")  # fmt: skip
        lines.append("")
        if len(r["rules"]) > 1:
            lines += ["Residual (% of the total) by rule:", "", "| target | "
                      + " | ".join(r["rules"]) + " |",
                      "| --- | " + " | ".join("---" for _ in r["rules"]) + " |"]  # fmt: skip
            for t in r["targets"]:
                lines.append(f"| {t} | " + " | ".join(
                    f"{100 * r['rules'][rule][t]:.2g}" for rule in r["rules"]) + " |")  # fmt: skip
            lines.append("")
    return "\n".join(lines) + "\n"


def summary_report(results: list[dict]) -> Report:
    """summary.md over the windows (`summary_markdown`)."""
    return Report({"summary.md": summary_markdown(results)})


def read_window(out: Path) -> dict:
    """A window's result read back from its attribution.json and attribution.npz (as
    `attribute_window` returns it, `_path` included), e.g. to redraw its figure."""
    out = Path(out)
    result = json.loads((out / "attribution.json").read_text())
    z = np.load(out / "attribution.npz")
    pieces = [tuple(int(x) for x in row) for row in z["pieces"].tolist()]
    path = PathAttribution([str(t) for t in z["targets"]], [str(g) for g in z["groups"]],
                           result["rule"], pieces)  # fmt: skip
    path.rules = {k[len("parts__"):]: list(z[k]) for k in z.files if k.startswith("parts__")}
    result["_path"] = path
    return result
