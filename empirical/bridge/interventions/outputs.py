"""The interventions' statistics and files: per condition the share of continuations that
jump (Wilson interval), their Kaplan-Meier survival and the log-rank test against `none`; the
noise ceiling (the cosine between replicates' W_QK updates); interventions.json, updates.npz,
survival.png and summary.md, declared once (`report(summarise(result, plan, g1), result)`).
"""

from __future__ import annotations

from itertools import combinations

import matplotlib.pyplot as plt
import numpy as np

from empirical.report.figures import OKABE_ITO, save_figure
from empirical.report.population_stats import kaplan_meier, logrank, share_interval
from empirical.report.writer import Arrays, Figure, Json, Report

COLOURS = {
    "none": OKABE_ITO["black"], "freeze_layer2_qk": OKABE_ITO["green"],
    "freeze_layer1_embed": OKABE_ITO["vermillion"], "project_g1": OKABE_ITO["blue"],
    "freeze_mlp": OKABE_ITO["orange"], "freeze_layer2_ov": OKABE_ITO["purple"],
}  # fmt: skip


def _cos(x: np.ndarray, y: np.ndarray) -> float:
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    return float((x * y).sum() / (nx * ny)) if nx > 0 and ny > 0 else float("nan")


def noise_ceiling(updates: dict, members: list[dict], g1: np.ndarray | None) -> dict:
    """Per horizon, over the `none` members: the cosine between every two replicates' W_QK
    updates (dual frame; mean, sd, min, max, pairs) and each update's cosine with G1."""
    chosen = [m for m, rec in enumerate(members) if rec["condition"] == "none"]
    out = {}
    for horizon, blocks in sorted(updates.items()):
        pair = [_cos(blocks[i], blocks[j]) for i, j in combinations(chosen, 2)]
        with_g1 = [_cos(blocks[i], g1) for i in chosen] if g1 is not None else []
        out[str(horizon)] = {
            "pairs": len(pair),
            "cos_replicates_mean": float(np.mean(pair)) if pair else None,
            "cos_replicates_sd": float(np.std(pair)) if pair else None,
            "cos_replicates_min": float(np.min(pair)) if pair else None,
            "cos_replicates_max": float(np.max(pair)) if pair else None,
            "cos_G1_mean": float(np.mean(with_g1)) if with_g1 else None,
            "cos_G1_sd": float(np.std(with_g1)) if with_g1 else None,
            # the share of an update's squared norm along G1: what projecting G1 out removes
            "g1_share_mean": float(np.mean(np.square(with_g1))) if with_g1 else None,
            "norm_mean": float(np.mean([np.linalg.norm(blocks[i]) for i in chosen]))
            if chosen else None,
        }  # fmt: skip
    return out


def logrank_vs_none(times: list, base: list, last: int) -> dict:
    """The log-rank test of a condition's jump steps against `none`'s, every continuation
    without a jump censored at the continuations' last step."""
    return logrank(times, [last] * len(times), base, [last] * len(base))


def summarise(result: dict, plan, g1: np.ndarray | None = None) -> dict:
    """The statistics of one set of continuations (module docstring)."""
    members = result["members"]
    last = result["last_step"]
    by = {}
    for name in dict.fromkeys(m["condition"] for m in members):
        times = [m["jump_step"] for m in members if m["condition"] == name]
        k, n = sum(t is not None for t in times), len(times)
        surv = kaplan_meier(times, [last] * n)
        jumped = sorted(t for t in times if t is not None)
        by[name] = {
            "n": n, "jumped": k, "share": k / n if n else None,
            "share_interval": share_interval(k, n), "jump_steps": times,
            "median_jump": float(np.median(jumped)) if jumped else None,
            "survival": {"steps": surv.steps, "survival": surv.survival},
        }  # fmt: skip
    if "none" in by:
        base = [m["jump_step"] for m in members if m["condition"] == "none"]
        for name, entry in by.items():
            if name != "none":
                entry["logrank_vs_none"] = logrank_vs_none(entry["jump_steps"], base, last)
    return {
        "start": result["start"], "last_step": last, "steps": plan.steps,
        "replicates": plan.replicates,
        "jump": f"first evaluation with {plan.jump_set} accuracy >= {plan.threshold} (first "
        f"{plan.eval_size} sequences, every {plan.eval_every} steps)",
        "conditions": by, "noise_ceiling": noise_ceiling(result["updates"], members, g1),
    }  # fmt: skip


def plot_survival(stats: dict, result: dict, path=None, fmt: str | None = None):
    """Left: each condition's Kaplan-Meier curve (share not yet jumped), its log-rank p against
    `none` in the legend; right: each member's tracked accuracy over the continuation. The
    legends sit below the panels."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 5.0), layout="constrained")
    start, last = stats["start"], stats["last_step"]
    styles = ("-", "--", ":", "-.")  # conditions whose curves coincide stay visible
    for i, (name, entry) in enumerate(stats["conditions"].items()):
        steps = [start] + entry["survival"]["steps"] + [last]
        surv = [1.0] + entry["survival"]["survival"]
        surv += [surv[-1]]
        p = entry.get("logrank_vs_none", {}).get("pvalue")
        label = f"{name}: {entry['jumped']}/{entry['n']} jump" + (
            f", log-rank p = {p:.2g}" if p is not None else "")  # fmt: skip
        ax.step(steps, surv, where="post", color=COLOURS.get(name), label=label, lw=1.6,
                ls=styles[i % len(styles)])  # fmt: skip
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("step")
    ax.set_ylabel("share of continuations not yet jumped")
    ax.set_title("Kaplan-Meier survival of the jump")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
              frameon=False)  # fmt: skip
    jump_set = next(iter(result["members"][0]["curve"]))
    for rec in result["members"]:
        ax2.plot(result["eval_steps"], rec["curve"][jump_set], color=COLOURS.get(rec["condition"]),
                 lw=0.7, alpha=0.6)  # fmt: skip
    for name in stats["conditions"]:
        ax2.plot([], [], color=COLOURS.get(name), label=name)
    ax2.set_xlabel("step")
    ax2.set_ylabel(f"{jump_set} accuracy")
    ax2.set_title("every continuation")
    ax2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3,
               frameon=False)  # fmt: skip
    fig.suptitle(f"Continuations from step {start} ({stats['replicates']} data orders per "
                 f"condition, {stats['steps']} steps)")  # fmt: skip
    return save_figure(fig, path, fmt)


def summary_markdown(stats: dict, label: str = "") -> str:
    lines = [
        f"# Interventions from step {stats['start']}" + (f" ({label})" if label else ""),
        "",
        f"{stats['replicates']} continuations per condition, {stats['steps']} steps each; "
        f"jump: {stats['jump']}.",
        "",
        "| condition | weights frozen | jumped | share (95% Wilson) | median jump step | "
        "log-rank p vs none |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, e in stats["conditions"].items():
        lo, hi = e["share_interval"] or (float("nan"), float("nan"))
        p = e.get("logrank_vs_none", {}).get("pvalue")
        med = "-" if e["median_jump"] is None else f"{e['median_jump']:.0f}"
        frozen = e.get("frozen_entries")
        lines.append(f"| {name} | {'-' if not frozen else frozen} | {e['jumped']}/{e['n']} | "
                     f"{e['share']:.2f} ({lo:.2f}-{hi:.2f}) | {med} | "
                     f"{'-' if p is None else f'{p:.3g}'} |")  # fmt: skip
    lines += ["", "Noise ceiling (the `none` continuations' layer-2 W_QK updates since the "
              "checkpoint, compare-qk's dual frame at the checkpoint):", "",
              "| steps | replicate pairs | cos between replicates (mean +- sd) | cos with G1 | "
              "share of the squared norm along G1 |",
              "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for h, e in stats["noise_ceiling"].items():
        if e["cos_replicates_mean"] is None:
            continue
        g1 = "-" if e["cos_G1_mean"] is None else f"{e['cos_G1_mean']:+.3f} +- {e['cos_G1_sd']:.3f}"
        share = e.get("g1_share_mean")
        lines.append(f"| {h} | {e['pairs']} | {e['cos_replicates_mean']:+.3f} +- "
                     f"{e['cos_replicates_sd']:.3f} | {g1} | "
                     f"{'-' if share is None else f'{100 * share:.1f}%'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def report(stats: dict, result: dict) -> Report:
    """interventions.json (the statistics and every member's curve), updates.npz (the W_QK
    updates), survival.png and summary.md (labelled with stats["label"])."""
    payload = {**stats, "eval_steps": result["eval_steps"], "members": result["members"]}
    updates = {f"updates_{h}": v for h, v in result["updates"].items()}
    arrays = {"rows": np.array(result["rows"]), "cols": np.array(result["cols"]), **updates}
    return Report({
        "interventions.json": Json(payload, indent=2, plain=True),
        "updates.npz": Arrays(arrays),
        "survival": Figure(lambda: plot_survival(stats, result)),
        "summary.md": summary_markdown(stats, stats.get("label", "")),
    })  # fmt: skip
