"""Sweep metrics, aggregation over seeds, threshold detection, summary files and the figure.

Metrics (`metric_value(name, acc, cfg)`): any evaluation-set name (`0var/ind`, `2var/var`,
..., and the exact Figure-3 sets `fig3/2var_union`, `fig3/0var_held_out`, which a sweep adds
to its members' task.extra_eval_sets: `with_metric_sets`) or a derived accuracy over several
sets of one kind k in {0var, 1var, 2var}:

    k/all_pairs  (1 - w) acc(k/ind) + w acc(k/pair): a uniformly random ordered value pair,
                 variables at trained positions; w = share of the p^2 ordered pairs (x, y)
                 held out for this member (0 when nothing is held out)
    k/all        0var: = 0var/all_pairs (every 0-var sequence). 1var, 2var: (1 - f) all_pairs
                 of (ind, pair) + f all_pairs of (var, both), f = share of the variable-operand
                 configurations that put a restricted variable at a restricted position
                 (1var: (|R1| + |R2|) / 2K; 2var: ordered variable pairs (u, v) with u in R1
                 or v in R2, among all allowed ones): every sequence of the kind
    k/mean       unweighted mean of the evaluation sets of kind k that exist
    all/mean     unweighted mean of every evaluation set
    auto         0var/all for a held-out-fraction / pair-fraction sweep, 2var/all for a
                 task.ratio_2var_to_0var sweep, all/mean otherwise

Threshold (`find_threshold`): the smallest swept x at which the mean over seeds is >= the
target (None if no x passes). `stable_threshold`: the smallest x such that the mean passes at
x and at every larger swept x (larger x = more pairs / more 2-var data, expected to help;
None when the largest x fails). They differ only when the curve is not monotone, which the
summary then says.

Uncertainty (`summarize`): the threshold of each seed's own curve (`threshold.per_seed`, its
min and max: the spread across seeds; one seed has none), and, when the metric is one
evaluation set of known size, the binomial (Wilson, 95%) interval of every accuracy
(members: that member's set; points: the correct answers pooled over seeds) and the range of
thresholds those intervals allow (`threshold.ci_range`: the smallest x whose upper bound, and
whose lower bound, reaches the target).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from empirical.config_io import atomic_write_bytes
from empirical.run_config import RunConfig
from empirical.rundir import SweepDir
from empirical.task import held_out_pairs
from empirical.task.pairs import ordered_ranks

KINDS = ("0var", "1var", "2var")


def auto_metric(param: str) -> str:
    if param in ("pair_fraction", "task.held_out_fraction", "task.train_pair_fraction"):
        return "0var/all"
    if param == "task.ratio_2var_to_0var":
        return "2var/all"
    return "all/mean"


def resolve_metric(metric: str, param: str) -> str:
    name = auto_metric(param) if metric == "auto" else metric
    check_metric(name)
    return name


def check_metric(name: str) -> None:
    from empirical.config_io import ConfigError
    from empirical.task import EVAL_SET_NAMES, EXTRA_EVAL_SET_NAMES

    derived = {f"{k}/{s}" for k in KINDS for s in ("all_pairs", "all", "mean")} | {"all/mean"}
    if name not in derived and name not in EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES:
        raise ConfigError(
            f"--metric {name!r} is unknown; allowed: auto, an evaluation set "
            f"({', '.join(EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES)}) or "
            f"{', '.join(sorted(derived))}"
        )


def metric_sets(metric: str) -> tuple[str, ...]:
    """The optional evaluation sets (task.extra_eval_sets) a metric needs."""
    from empirical.task import EXTRA_EVAL_SET_NAMES

    return (metric,) if metric in EXTRA_EVAL_SET_NAMES else ()


def with_metric_sets(base: RunConfig, metric: str) -> RunConfig:
    """`base` with the optional evaluation sets the metric needs added to
    task.extra_eval_sets (unchanged when it lists them already)."""
    import dataclasses

    need = [s for s in metric_sets(metric) if s not in base.task.extra_eval_sets]
    if not need:
        return base
    task = dataclasses.replace(base.task, extra_eval_sets=(*base.task.extra_eval_sets, *need))
    return dataclasses.replace(base, task=task)


def pair_weight(cfg: RunConfig) -> float:
    """Share of the p^2 ordered value pairs (x, y) held out for this member: (x, y) with {x, y}
    held out (unordered tables: 2 len - diagonal), or the table's own rows (ordered: len)."""
    held = held_out_pairs(cfg.task, cfg.seed)
    if held.numel() == 0:
        return 0.0
    ranks = ordered_ranks(held, cfg.task.p, cfg.task.held_out_form)
    return ranks.numel() / cfg.task.p**2


def restricted_weight(cfg: RunConfig, kind: str) -> float:
    """Share of kind's variable-operand configurations with a restricted variable position."""
    task = cfg.task
    if kind == "1var":
        return (len(task.restricted_vars(0)) + len(task.restricted_vars(1))) / (2 * task.K)
    if kind == "2var":
        r1, r2 = set(task.restricted_vars(0)), set(task.restricted_vars(1))
        combos = [(a, b) for a in range(task.K) for b in range(task.K) if task.two_var_ok(a, b)]
        bad = [(a, b) for a, b in combos if a in r1 or b in r2]
        return len(bad) / len(combos) if combos else 0.0
    return 0.0


class MetricWeights:
    """The per-member weights of the derived metrics (computed once per member)."""

    def __init__(self, cfg: RunConfig):
        self.pair = pair_weight(cfg)
        self.restricted = {k: restricted_weight(cfg, k) for k in KINDS}


def _combine(acc: dict, parts: list[tuple[str, float]]) -> float:
    total, weight = 0.0, 0.0
    for name, w in parts:
        if w <= 0:
            continue
        if name not in acc:
            return math.nan
        total += w * acc[name]
        weight += w
    return total / weight if weight > 0 else math.nan


def metric_value(name: str, acc: dict, weights: MetricWeights) -> float:
    """The value of metric `name` (see the module docstring) from one evaluation record."""
    if name in acc:
        return float(acc[name])
    if name == "all/mean":
        return float(np.mean(list(acc.values()))) if acc else math.nan
    kind, what = name.split("/", 1)
    if what == "mean":
        values = [v for k, v in acc.items() if k.startswith(kind + "/")]
        return float(np.mean(values)) if values else math.nan
    w = weights.pair
    if what == "all_pairs" or (what == "all" and kind == "0var"):
        return _combine(acc, [(f"{kind}/ind", 1 - w), (f"{kind}/pair", w)])
    if what == "all":
        f = weights.restricted[kind]
        return _combine(
            acc,
            [
                (f"{kind}/ind", (1 - f) * (1 - w)),
                (f"{kind}/pair", (1 - f) * w),
                (f"{kind}/var", f * (1 - w)),
                (f"{kind}/both", f * w),
            ],
        )
    return math.nan


def aux_metrics(metric: str) -> list[str]:
    """Secondary curves drawn (thin, dashed) next to the swept metric."""
    if metric == "fig3/2var_union":  # its parts: held-out pairs, restricted positions
        return ["2var/pair", "2var/var", "2var/ind"]
    if metric == "fig3/0var_held_out":
        return ["0var/ind"]
    if metric in ("0var/all", "0var/all_pairs"):
        return ["0var/pair"]
    if metric == "2var/all":
        return ["2var/all_pairs", "2var/var"]
    if metric in ("1var/all_pairs", "2var/all_pairs"):
        return [metric.replace("/all_pairs", "/all"), metric.replace("/all_pairs", "/var")]
    if metric.endswith("/all"):
        return [metric.replace("/all", "/all_pairs")]
    return []


# ------------------------------------------------------------------------------ thresholds
def find_threshold(xs: list[float], means: list[float], target: float) -> dict[str, Any]:
    """Threshold of a curve: see the module docstring. xs need not be sorted."""
    pts = sorted((float(x), float(m)) for x, m in zip(xs, means, strict=True))
    passing = [(not math.isnan(m)) and m >= target for _, m in pts]
    stable = None
    for i in range(len(pts) - 1, -1, -1):
        if not passing[i]:
            break
        stable = pts[i][0]
    first = next((x for (x, _), ok in zip(pts, passing, strict=True) if ok), None)
    return {
        "threshold": first,
        "stable_threshold": stable,
        "monotone": stable == first,
        "target": target,
        "criterion": (
            f"smallest swept x with mean accuracy over seeds >= {target:g} (stable: also at "
            "every larger swept x)"
        ),
    }


# ------------------------------------------------------------------------------ aggregation
def aggregate(rows: list[dict], key: str = "metric") -> list[dict]:
    """Per x: n, mean, std (population), min, max of rows[key] over seeds, sorted by x."""
    by_x: dict[Any, list[float]] = {}
    for r in rows:
        by_x.setdefault(r["x"], []).append(r[key])
    out = []
    for x in sorted(by_x, key=_sort_key):
        v = np.array(by_x[x], dtype=float)
        out.append(
            {
                "x": x,
                "n": int(v.size),
                "mean": float(v.mean()),
                "std": float(v.std()),
                "min": float(v.min()),
                "max": float(v.max()),
            }
        )
    return out


def _sort_key(x: Any):
    return (0, float(x), "") if isinstance(x, (int, float)) else (1, 0.0, str(x))


def numeric(xs: list[Any]) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def summarize(
    rows: list[dict],
    *,
    param: str,
    x_label: str,
    metric: str,
    target: float,
    missing: list[str],
    title: str,
    command: str | None = None,
    stopped: dict[str, str] | None = None,
) -> dict:
    """The results dict (`results.json`) of finished members' rows
    ({"member", "value", "x", "seed", "final_step", "metric", "aux": {...}, "final_acc"})."""
    points = aggregate(rows)
    for aux in sorted({a for r in rows for a in r.get("aux", {})}):
        sub = [dict(r, aux_value=r["aux"][aux]) for r in rows if aux in r.get("aux", {})]
        for p, a in zip(points, aggregate(sub, "aux_value"), strict=False):
            if p["x"] == a["x"]:
                p.setdefault("aux", {})[aux] = a["mean"]
    _pooled_intervals(rows, points)
    thr = _curve_threshold(points, [p["mean"] for p in points], target)
    thr.update(_threshold_uncertainty(rows, points, target))
    return {
        "title": title,
        "param": param,
        "x_label": x_label,
        "metric": metric,
        "target": target,
        "command": command,
        "threshold": thr,
        "points": points,
        "members": rows,
        "missing_members": missing,
        "stopped_members": dict(stopped or {}),
    }


def _curve_threshold(points: list[dict], values: list[float], target: float) -> dict:
    """find_threshold over the points' x (categorical x: in the order given)."""
    xs = [p["x"] for p in points]
    if numeric(xs):
        return find_threshold(xs, values, target)
    idx = list(range(len(points)))
    thr = find_threshold(idx, values, target)
    for k in ("threshold", "stable_threshold"):
        thr[k] = None if thr[k] is None else points[int(thr[k])]["x"]
    return thr


def _pooled_intervals(rows: list[dict], points: list[dict]) -> None:
    """Each point's binomial 95% interval (`ci95`) of the metric, its correct answers pooled
    over seeds, when every member at that x measured the metric on one set of known size."""
    from empirical.stats import accuracy_interval

    for p in points:
        mine = [r for r in rows if r["x"] == p["x"]]
        if not mine or any(r.get("metric_n") is None for r in mine):
            continue
        n = sum(int(r["metric_n"]) for r in mine)
        correct = sum(int(r["metric_correct"]) for r in mine)
        p["n_sequences"], p["correct"] = n, correct
        p["ci95"] = [round(v, 6) for v in accuracy_interval(correct, n)]


def _threshold_uncertainty(rows: list[dict], points: list[dict], target: float) -> dict:
    """The threshold of each seed's own curve (spread across seeds) and the range of
    thresholds the points' binomial intervals allow (see the module docstring)."""
    by_seed: dict[int, list[dict]] = {}
    for r in rows:
        by_seed.setdefault(r["seed"], []).append(r)
    per_seed = {}
    for seed in sorted(by_seed):
        pts = aggregate(by_seed[seed])
        per_seed[str(seed)] = _curve_threshold(pts, [p["mean"] for p in pts], target)["threshold"]
    found = [t for t in per_seed.values() if t is not None]
    out: dict[str, Any] = {"n_seeds": len(per_seed), "per_seed": per_seed}
    if found and numeric(found):
        out["seed_min"], out["seed_max"] = min(found), max(found)
    out["seeds_without_threshold"] = len(per_seed) - len(found)
    if points and all("ci95" in p for p in points):
        upper = _curve_threshold(points, [p["ci95"][1] for p in points], target)["threshold"]
        lower = _curve_threshold(points, [p["ci95"][0] for p in points], target)["threshold"]
        out["ci_range"] = [upper, lower]  # earliest and latest threshold the intervals allow
    return out


def uncertainty_sentence(results: dict) -> str:
    """The threshold's uncertainty in words: across seeds, and from the binomial intervals."""
    thr = results["threshold"]
    n = thr.get("n_seeds", 0)
    if not n:
        return ""
    per = thr.get("per_seed", {})
    if n == 1:
        text = "1 seed: no spread across seeds is measured"
    else:
        shown = ", ".join(f"seed {s}: {'none' if t is None else _fmt_x(t)}" for s, t in per.items())
        text = f"per-seed thresholds ({n} seeds) {shown}"
        if "seed_min" in thr:
            text += f"; range {_fmt_x(thr['seed_min'])} - {_fmt_x(thr['seed_max'])}"
    if "ci_range" in thr:
        lo, hi = thr["ci_range"]
        text += (
            "; from the binomial 95% intervals of the pooled accuracies: "
            f"{'none' if lo is None else _fmt_x(lo)} (upper bounds) to "
            f"{'none' if hi is None else _fmt_x(hi)} (lower bounds)"
        )
    return text


def write_results(
    results: dict, sweep_dir: Path, figure_name: str, at_step: int | None = None
) -> tuple[Path, Path, Path]:
    """results.json, summary.md and the figure `figure_name` (e.g. NAME.png) in sweep_dir;
    with `at_step`, results_step_NNNNNN.json, summary_step_NNNNNN.md and NAME_step_NNNNNN.png
    beside them (the final summary is kept)."""
    out = SweepDir(sweep_dir)
    json_path, md_path = out.results_json, out.summary_md
    if at_step is not None:
        json_path, md_path = out.results_json_at(at_step), out.summary_md_at(at_step)
        stem, dot, ext = figure_name.rpartition(".")
        figure_name = f"{stem}_step_{at_step:06d}{dot}{ext}"
    fig_path = out.path / figure_name
    atomic_write_bytes(json_path, json.dumps(results, indent=2).encode())
    atomic_write_bytes(md_path, markdown(results, fig_path.name).encode())
    if results["points"]:
        plot_sweep(results, fig_path)
    return json_path, md_path, fig_path


def _evaluated_when(results: dict) -> str:
    step = results.get("at_step")
    return "final evaluation" if step is None else f"evaluation at step {step}"


def _fmt_x(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _pct(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


def _ci(interval) -> str:
    return "-" if not interval else f"[{100 * interval[0]:.2f}, {100 * interval[1]:.2f}]%"


def threshold_sentence(results: dict) -> str:
    thr = results["threshold"]
    metric, target = results["metric"], results["target"]
    if not results["points"]:
        return "no finished members yet"
    if thr["threshold"] is None:
        return f"no threshold: the mean {metric} accuracy stays below {100 * target:g}% at every x"
    text = (
        f"threshold {_fmt_x(thr['threshold'])}: the smallest {results['x_label']} at which the "
        f"mean {metric} accuracy over seeds is >= {100 * target:g}%"
    )
    if not thr["monotone"]:
        stable = thr["stable_threshold"]
        text += " (not monotone: " + (
            f"it stays >= target only from {_fmt_x(stable)} up)"
            if stable is not None
            else "the largest swept value falls below the target again)"
        )
    return text


def markdown(results: dict, figure_name: str) -> str:
    lines = [f"# {results['title'].replace(chr(10), ' ')}", ""]
    if results.get("command"):
        lines += ["```", results["command"], "```", ""]
    lines += [
        f"- swept: `{results['param']}` (x axis: {results['x_label']})",
        f"- metric: `{results['metric']}` ({_evaluated_when(results)}), target "
        f"{results['target']:g}",
        f"- criterion: {results['threshold']['criterion']}",
        f"- **{threshold_sentence(results)}**",
    ]
    if uncertainty_sentence(results):
        lines.append(f"- uncertainty: {uncertainty_sentence(results)}")
    lines += ["", f"![sweep]({figure_name})", ""]
    aux = sorted({a for p in results["points"] for a in p.get("aux", {})})
    has_ci = any("ci95" in p for p in results["points"])
    head = ["x", "seeds", "mean", "std", "min", "max"]
    head += ["95% CI (pooled, binomial)", "sequences"] if has_ci else []
    head += [f"mean {a}" for a in aux]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for p in results["points"]:
        cells = [_fmt_x(p["x"]), str(p["n"])] + [_pct(p[k]) for k in ("mean", "std", "min", "max")]
        if has_ci:
            cells += [_ci(p.get("ci95")), str(p.get("n_sequences", "-"))]
        cells += [_pct(p.get("aux", {}).get(a, math.nan)) for a in aux]
        lines.append("| " + " | ".join(cells) + " |")
    member_ci = any(r.get("metric_ci") for r in results["members"])
    lines += [
        "",
        "## Members",
        "",
        "| member | seed | x | step | metric |" + (" 95% CI | sequences |" if member_ci else ""),
        "| --- | --- | --- | --- | --- |" + (" --- | --- |" if member_ci else ""),
    ]
    for r in results["members"]:
        extra = f" {_ci(r.get('metric_ci'))} | {r.get('metric_n', '-')} |" if member_ci else ""
        lines.append(
            f"| {r['member']} | {r['seed']} | {_fmt_x(r['x'])} | {_or_dash(r.get('final_step'))} | "
            f"{_pct(r['metric'])} |" + extra
        )
    if results["missing_members"]:
        lines += ["", "Not finished yet: " + ", ".join(results["missing_members"])]
    for name, reason in results.get("stopped_members", {}).items():
        lines += ["", f"Stopped, not in the figure: {name}: {reason}"]
    return "\n".join(lines) + "\n"


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def _draw_uncertainty(ax, results: dict, pos: list, is_num: bool, color) -> None:
    """Error bars of the pooled binomial 95% intervals and a shaded span between the
    smallest and largest per-seed threshold (numeric x, when there is a spread)."""
    points = results["points"]
    if points and all("ci95" in p for p in points):
        mean = np.array([p["mean"] for p in points]) * 100
        lo = np.array([p["ci95"][0] for p in points]) * 100
        hi = np.array([p["ci95"][1] for p in points]) * 100
        pooled = np.array([p["correct"] / p["n_sequences"] for p in points]) * 100
        err = np.clip(np.stack([pooled - lo, hi - pooled]), 0, None)
        ax.errorbar(
            pos, mean, yerr=err, fmt="none", ecolor=color, elinewidth=1, capsize=2,
            label="binomial 95% CI (pooled)",
        )  # fmt: skip
    thr = results["threshold"]
    if is_num and thr.get("seed_min") is not None and thr["seed_max"] != thr["seed_min"]:
        ax.axvspan(
            thr["seed_min"], thr["seed_max"], color="gray", alpha=0.12,
            label=f"per-seed thresholds {_fmt_x(thr['seed_min'])}-{_fmt_x(thr['seed_max'])}",
        )  # fmt: skip


def plot_sweep(results: dict, path: Path | None = None, *, fmt: str | None = None):
    """Final accuracy against the swept value (Figure 3): mean and min-max band over seeds,
    each member as a dot, the target and the threshold. Returns the Figure; writes it to
    `path` (png, pdf or svg: the suffix, or `fmt`) and closes it when a path is given."""
    import matplotlib.pyplot as plt

    from empirical.figures import OKABE_ITO, save_figure

    blue, others = OKABE_ITO["blue"], ["orange", "green", "vermillion", "purple", "sky"]
    points = results["points"]
    xs = [p["x"] for p in points]
    is_num = numeric(xs)
    pos = xs if is_num else list(range(len(xs)))
    fig, ax = plt.subplots(figsize=(8.5, 4.8), layout="constrained")
    mean = np.array([p["mean"] for p in points]) * 100
    lo = np.array([p["min"] for p in points]) * 100
    hi = np.array([p["max"] for p in points]) * 100
    n = max(p["n"] for p in points)
    if n > 1:  # one seed has no spread to show
        ax.fill_between(pos, lo, hi, alpha=0.25, color=blue, label=f"min-max over {n} seeds")
    ax.plot(pos, mean, "o-", color=blue, label=f"mean {results['metric']}")
    _draw_uncertainty(ax, results, pos, is_num, blue)
    where = {x: i for i, x in enumerate(xs)}
    for r in results["members"]:
        px = r["x"] if is_num else where.get(r["x"])
        if px is not None:
            ax.plot(px, 100 * r["metric"], ".", color=blue, alpha=0.6, ms=4)
    for j, aux in enumerate(sorted({a for p in points for a in p.get("aux", {})})):
        vals = [100 * p.get("aux", {}).get(aux, math.nan) for p in points]
        color = OKABE_ITO[others[j % len(others)]]
        ax.plot(pos, vals, "--", lw=1, color=color, label=f"mean {aux}")
    target = 100 * results["target"]
    ax.axhline(target, color="gray", ls=":", lw=1, label=f"target {target:g}%")
    thr = results["threshold"]["threshold"]
    stable = results["threshold"].get("stable_threshold")
    if thr is not None:
        tx = thr if is_num else where[thr]
        ax.axvline(tx, color="black", ls="-.", lw=1.2, label=f"threshold {_fmt_x(thr)}")
    if stable is not None and stable != thr:
        sx = stable if is_num else where[stable]
        ax.axvline(
            sx, color=OKABE_ITO["purple"], ls=":", lw=1, label=f"stable threshold {_fmt_x(stable)}"
        )
    if not is_num:
        ax.set_xticks(pos, [str(x) for x in xs])
    elif min(xs) > 0 and max(xs) > 1 and max(xs) / min(xs) >= 10:  # e.g. ratios 0.25 .. 8
        # (fractions in (0, 1], e.g. the paper's pair fractions 0.06 .. 0.99, stay linear)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [_fmt_x(x) for x in xs])
        ax.minorticks_off()
    ax.set_xlabel(results["x_label"])
    when = "final" if results.get("at_step") is None else f"step-{results['at_step']}"
    ax.set_ylabel(f"{when} accuracy, {results['metric']} (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(results["title"], fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, fmt)
