"""The ladder's files, declared once (`report`): ladder.json (the issue's schema plus every
measured number), summary.md (one table), blocks.npz (the labelled blocks) and ladder.png
(cosines and the one-step 2var/ind per rung); written by empirical.report.writer."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from empirical.bridge.ladder.measure import first_set
from empirical.report.writer import Arrays, Figure, Json, Report


def _f(x, fmt="+.3f") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, fmt)


def key_set(result: dict) -> str:
    names = list(result.get("eval_sets", {}))
    return first_set(names) if names else ""


def summary_markdown(result: dict) -> str:
    """The ladder as one markdown table, with the notes of every rung that maps a piece."""
    k = key_set(result)
    lines = [
        f"# Assumption ladder at step {result['step']} of {result['run']}",
        "",
        f"Step rule: {result['rule']}. Task p = {result['task']['p']}, K = {result['task']['K']}; "
        f"W^0's beta = {result['beta']:.3f} (the trained model's effective beta, a = "
        f"{result['trained_attention']['a']:.3f} per operand position); the 'loss' rung's "
        f"logit scale xi = {result['xi']:.3f}. Frame: compare-qk's dual frame (exact); G1 of "
        "each rung's own data at its own a, b; nulls: isotropic 95% level (sign-randomised in "
        "brackets). One-step: best over step sizes (RMS change of `=`'s layer-2 scores) "
        f"{', '.join(str(g) for g in result['options']['grid'])}, chosen by {k}; "
        f"{result['options']['eval_size'] or 'all'} sequences per set.",
        "",
        "| rung | changed | cos whole (null) | cos bar_v (null) | memory share "
        f"| all-assign. share | atten. signs | {k} before | own step: {k} (eta) "
        f"| G1 step: {k} (eta) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rungs"]:
        if "skipped" in r:
            lines.append(f"| {r['name']} | {r['changed'] or '-'} | {r['skipped']} |")
            continue
        os_, g1 = r["one_step"], r["g1_step"]
        lines.append(
            f"| {r['name']} | {r['changed'] or '-'} "
            f"| {_f(r['cos_whole'])} ({_f(r['null_whole'], '.3f')} / "
            f"{_f(r['null_signs_whole'], '.3f')}) "
            f"| {_f(r['cos_bar_v'])} ({_f(r['null_bar_v'], '.3f')} / "
            f"{_f(r['null_signs_bar_v'], '.3f')}) "
            f"| {_f(r['memory_share'], '.3f')} | {_f(r['all_assignment_share'], '.3f')} "
            f"| {_f(r['attenuation_sign_agreement'], '.2f')} | {_f(r['before'].get(k), '.3f')} "
            f"| {_f(os_['accuracy'].get(k), '.3f')} ({_f(os_['best_eta'], 'g')}) "
            f"| {_f(g1['accuracy'].get(k), '.3f')} ({_f(g1['best_eta'], 'g')}) |"
        )
    lines += ["", "Rungs:", ""]
    for r in result["rungs"]:
        note = f" {r['notes']}" if r.get("notes") else ""
        lines.append(
            f"- **{r['name']}** ({r['changed'] or 'start'}): {r['description']}.{note} "
            f"Forward vs the model's own hooked forward: max |diff| {r['hooked_max_abs_diff']:.1e}."
        )
    lines.append("")
    return "\n".join(lines)


def plot_ladder(result: dict):
    """Figure: per rung, the gradient's cosine with G1 (whole and bar_v block, with their
    isotropic null levels) and the best one-step accuracy on 2var/ind (own gradient, G1 step,
    before)."""
    rungs = [r for r in result["rungs"] if "skipped" not in r]
    names = [r["name"] for r in rungs]
    x = np.arange(len(names))
    k = key_set(result)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    ax1.plot(x, [r["cos_whole"] for r in rungs], "o-", label="cos(gradient, G1), whole block")
    ax1.plot(x, [r["cos_bar_v"] for r in rungs], "s-", label="cos(gradient, G1), bar_v block")
    ax1.plot(x, [r["null_whole"] for r in rungs], ":", color="C0", label="null 95%, whole")
    ax1.plot(x, [r["null_bar_v"] for r in rungs], ":", color="C1", label="null 95%, bar_v")
    ax1.axhline(0, color="grey", lw=0.5)
    ax1.set_ylabel("cosine (dual frame)")
    ax1.set_title(
        f"Assumption ladder at step {result['step']}: Theorem C.1's model (left) to the "
        "trained model (right)"
    )
    ax1.legend(fontsize=8, loc="best")

    def acc(r, fam):
        return r[fam]["accuracy"].get(k, np.nan) if r[fam]["accuracy"] else np.nan

    ax2.plot(x, [r["before"].get(k, np.nan) for r in rungs], "k--", label=f"{k} before the step")
    ax2.plot(x, [acc(r, "one_step") for r in rungs], "o-",
             label="best after one step along -gradient")  # fmt: skip
    ax2.plot(x, [acc(r, "g1_step") for r in rungs], "^-", label="best after one step along G1")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_ylabel(f"{k} accuracy")
    ax2.set_xlabel("rung (each changes one piece of the one before)")
    ticks = [f"{n}\n({r['changed'] or 'start'})" for n, r in zip(names, rungs, strict=True)]
    ax2.set_xticks(x, ticks, fontsize=8)
    ax2.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def report(result: dict) -> Report:
    """ladder.json, summary.md, blocks.npz (observed and G1 blocks per rung; none: not
    written) and the figure `ladder` (write_report's format)."""
    blocks = {f"{r['name']}__{name}": blk for r in result["rungs"]
              for name, blk in r.get("_blocks", {}).items()}  # fmt: skip
    return Report({
        "ladder.json": Json(result, indent=1, newline=True),
        "summary.md": summary_markdown(result),
        "blocks.npz": Arrays(blocks),
        "ladder": Figure(lambda: plot_ladder(result), dpi=110),
    })  # fmt: skip
