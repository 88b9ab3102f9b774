"""The chain comparison's markdown summary and figure (`chain_compare.compare_chain_run`'s
result in, text and a PNG out)."""

from __future__ import annotations

import json
import math

import matplotlib.pyplot as plt

from empirical.report.figures import save_figure
from empirical.report.writer import Figure, Report
from empirical.studies.chain.analysis.qk_compare import HOPS, SUBS

HOP_NAME = {"last": "last hop (W3, vs G1^(3))", "middle": "middle hop (W2, vs D)"}


def _f(v, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{nd}f}"


def _g(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def _step(v) -> str:
    return "never" if v is None else str(v)


def cos_cell(entry: dict) -> str:
    """'cos (iso95 / sign95)'."""
    return f"{_f(entry['cos'])} ({_f(entry['null_iso95'])} / {_f(entry['null_sign95'])})"


def summary_markdown(res: dict) -> str:
    """The result as markdown: the order test, the spike window, the maxima, every window."""
    o, f = res["order"], res["formation"]
    lines = [
        f"# chain-compare-qk: {res['label']}",
        "",
        f"{res['n_layers']} layers; last hop = block {res['blocks']['last']['block'] + 1}, "
        f"middle hop = block {res['blocks']['middle']['block'] + 1} (1-based); frame "
        f"{res['config']['frame']}; theory on {', '.join(res['config']['sets'])} "
        f"({res['config']['n']} sequences each); snapshots {res['steps'][0]}..{res['steps'][-1]} "
        f"({len(res['steps'])}).",
        "",
        "## The order of the hops",
        "",
        "| measure | last hop | middle hop | verdict (last before middle) |",
        "| --- | --- | --- | --- |",
        f"| attention (half rise): {f['attention']['last']['measure']} / "
        f"{f['attention']['middle']['measure']} | {_step(o['last_hop_step'])} "
        f"(peak {_f(f['attention']['last']['peak'])}) | {_step(o['middle_hop_step'])} "
        f"(peak {_f(f['attention']['middle']['peak'])}) | {o['verdict']} |",
        f"| memory contrast of the bar_v block (half rise) | {_step(o['memory_last_step'])} "
        f"(peak {_g(f['memory']['last']['peak'])}) | {_step(o['memory_middle_step'])} "
        f"(peak {_g(f['memory']['middle']['peak'])}) | {o['memory_verdict']} |",
        "",
        "Middle layer's key-query gradient at `=` (dual frame, |.|; relative: over the last "
        "layer's), mean over the snapshots before the last hop forms and from then to the "
        "middle hop's formation:",
        "",
        "| block | before | after | after / before | snapshots (before, after) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for sub, g in o["middle_gradient"].items():
        lines.append(
            f"| {sub} | {_g(g['before'])} | {_g(g['after'])} | {_g(g['ratio'])} | "
            f"{g['n_before']}, {g['n_after']} |"
        )
    lines += _spike_and_maxima_lines(res)
    lines += [
        "",
        "## Every window",
        "",
        "| window | beta (last, middle) | last: all | last: barv_barv | middle: all | "
        "middle: barv_barv | middle gradient vs D (all) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for w in res["windows"]:
        last, mid = w["last"]["cos"], w["middle"]["cos"]
        cells = [
            f"{w['start']} -> {w['end']}",
            f"{_f(w['beta']['last'], 2)}, {_f(w['beta']['middle'], 2)}",
            cos_cell(last["all"]),
            cos_cell(last["barv_barv"]),
            cos_cell(mid["all"]),
            cos_cell(mid["barv_barv"]),
            cos_cell(w["middle_gradient_vs_D"]["all"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    g2 = max(w["G2_norm_at_W0"] for w in res["windows"]) if res["windows"] else float("nan")
    lines += [
        "",
        f"|G1^(2)| at (W^0, W^0) on the run's sequences, largest over the windows: "
        f"{g2:.1e} (the theory: 0).",
        "",
    ]
    return "\n".join(lines)


def _spike_and_maxima_lines(res: dict) -> list[str]:
    """The summary's sections on the last hop's spike window and the largest cosines."""
    lines = ["", "## The last hop's spike window", ""]
    sp = res["spike"]
    win = None
    if sp is None:
        lines.append(
            "No spike window: the last hop's attention never forms after the first snapshot."
        )
    else:
        win = next(w for w in res["windows"] if w["start"] == sp["start"])
        lines += [
            f"Window {sp['start']} -> {sp['end']} ({sp['rule']}). cos (isotropic null 95% / "
            "sign-randomised null 95%):",
            "",
            "| hop | " + " | ".join(SUBS) + " |",
            "| --- | " + " | ".join("---" for _ in SUBS) + " |",
        ]
        for hop in HOPS:
            cells = " | ".join(cos_cell(win[hop]["cos"][s]) for s in SUBS)
            lines.append(f"| {HOP_NAME[hop]} | {cells} |")
    lines += [
        "",
        "## Largest cosine over the windows",
        "",
        "cos (isotropic null 95% / sign-randomised null 95%) of the best window; windows above "
        "their sign null (about 5% by chance):",
        "",
        "| hop | sub-block | cos | window | chosen from | windows above the sign null |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for hop in HOPS:
        for sub in SUBS:
            m = res["maxima"][hop][sub]
            if m is not None:
                lines.append(
                    f"| {hop} | {sub} | {cos_cell(m)} | {m['start']} -> {m['end']} | "
                    f"{m['chosen_from']} windows | {m['windows_above_sign_null']} |"
                )
    return lines


def plot_chain_compare(res: dict, path, fmt: str | None = None):
    """Three panels over training steps: cos(W3 update, G1^(3)) and cos(W2 update, D) per
    window (whole block and bar_v block, the sign-randomised null band of the whole block), and
    the memory contrasts with the middle layer's gradient; the two hops' formation steps
    (attention, half rise) as vertical lines."""
    fig, axes = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    ends = [w["end"] for w in res["windows"]]
    o = res["order"]
    marks = [
        (o["last_hop_step"], "last hop forms", "tab:red"),
        (o["middle_hop_step"], "middle hop forms", "tab:purple"),
    ]
    for ax, hop in zip(axes[:2], HOPS, strict=True):
        for sub, style in (("all", "-o"), ("barv_barv", "--s"), ("barv_v", ":^")):
            cos = [w[hop]["cos"][sub]["cos"] for w in res["windows"]]
            ax.plot(ends, cos, style, label=f"cos, {sub}", ms=4)
        sign = [w[hop]["cos"]["all"]["null_sign95"] for w in res["windows"]]
        iso = [w[hop]["cos"]["all"]["null_iso95"] for w in res["windows"]]
        label = "sign-randomised null 95% (all)"
        ax.fill_between(ends, [-s for s in sign], sign, color="grey", alpha=0.25, label=label)
        ax.plot(ends, iso, ":", color="black", label="isotropic null 95% (all)")
        ax.axhline(0, color="black", lw=0.5)
        ax.set_ylabel("cosine")
        ax.set_title(f"{HOP_NAME[hop]}: observed update per window (plotted at its end)")
    ax = axes[2]
    steps = res["steps"]
    for hop, color in (("last", "tab:red"), ("middle", "tab:purple")):
        vals = [s[hop]["memory_contrast"] for s in res["snapshots"]]
        peak = max(abs(v) for v in vals) or 1.0
        label = f"{hop} layer: bar_v memory contrast / {peak:.3g}"
        ax.plot(steps, [v / peak for v in vals], "-", color=color, label=label)
    ax.set_ylabel("memory contrast / largest |value|")
    ax2 = ax.twinx()
    middle = [max(s["middle_gradient"]["all"], 1e-12) for s in res["snapshots"]]
    label = "middle layer's gradient at `=` (dual, |.|)"
    ax2.plot(steps, middle, "-.", color="tab:green", label=label)
    ax2.set_yscale("log")
    ax2.set_ylabel("gradient norm")
    ax.set_title("Memories (scores: bar_v diagonal - off-diagonal) and the middle gradient")
    ax.set_xlabel("training step")
    for a in axes:
        for step, name, color in marks:
            if step is not None:
                a.axvline(step, color=color, ls="--", lw=1, label=f"{name} ({step})")
    for a in axes[:2]:
        a.legend(fontsize=7, loc="best")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="best")
    fig.suptitle(f"chain-compare-qk: {res['label']}")
    fig.tight_layout()
    return save_figure(fig, path, fmt)


def json_text(res: dict) -> str:
    """chain_compare_qk.json's text (numpy numbers as floats)."""
    return json.dumps(res, indent=2, default=float)


def report(res: dict) -> Report:
    """What `chain-compare-qk` writes: chain_compare_qk.json, summary.md, chain_compare_qk.png."""
    return Report({
        "chain_compare_qk.json": json_text(res),
        "summary.md": summary_markdown(res),
        "chain_compare_qk": Figure(lambda: plot_chain_compare(res, None)),
    })  # fmt: skip
