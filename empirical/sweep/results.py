"""Sweep metrics, aggregation over seeds, threshold detection, summary files and the figure.

Metrics (`metric_value(name, acc, cfg)`): any evaluation-set name (`0var/ind`, `2var/var`,
...) or a derived accuracy over several sets of one kind k in {0var, 1var, 2var}:

    k/all_pairs  (1 - w) acc(k/ind) + w acc(k/pair): a uniformly random ordered value pair,
                 variables at trained positions; w = share of ordered pairs (x, y) whose {x, y}
                 is held out for this member (0 when nothing is held out)
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
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from empirical.config_io import atomic_write_bytes
from empirical.run_config import RunConfig
from empirical.task import held_out_pairs

KINDS = ("0var", "1var", "2var")


def auto_metric(param: str) -> str:
    if param in ("pair_fraction", "task.held_out_fraction"):
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
    from empirical.task import EVAL_SET_NAMES

    derived = {f"{k}/{s}" for k in KINDS for s in ("all_pairs", "all", "mean")} | {"all/mean"}
    if name not in derived and name not in EVAL_SET_NAMES:
        raise ConfigError(
            f"--metric {name!r} is unknown; allowed: auto, an evaluation set "
            f"({', '.join(EVAL_SET_NAMES)}) or {', '.join(sorted(derived))}"
        )


def pair_weight(cfg: RunConfig) -> float:
    """Share of ordered value pairs (x, y) whose {x, y} is held out for this member."""
    held = held_out_pairs(cfg.task, cfg.seed)
    if held.numel() == 0:
        return 0.0
    n_diag = int((held[:, 0] == held[:, 1]).sum())
    return (2 * held.shape[0] - n_diag) / cfg.task.p**2


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
    xs = [p["x"] for p in points]
    if numeric(xs):
        thr = find_threshold(xs, [p["mean"] for p in points], target)
    else:  # categorical values: in the order given
        idx = list(range(len(points)))
        thr = find_threshold(idx, [p["mean"] for p in points], target)
        for k in ("threshold", "stable_threshold"):
            thr[k] = None if thr[k] is None else points[int(thr[k])]["x"]
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


def write_results(results: dict, sweep_dir: Path, figure_name: str) -> tuple[Path, Path, Path]:
    """results.json, summary.md and the figure (PNG) in sweep_dir."""
    sweep_dir = Path(sweep_dir)
    json_path = sweep_dir / "results.json"
    md_path = sweep_dir / "summary.md"
    fig_path = sweep_dir / figure_name
    atomic_write_bytes(json_path, json.dumps(results, indent=2).encode())
    atomic_write_bytes(md_path, markdown(results, fig_path.name).encode())
    if results["points"]:
        plot_sweep(results, fig_path)
    return json_path, md_path, fig_path


def _fmt_x(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _pct(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


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
        f"- metric: `{results['metric']}` (final evaluation), target {results['target']:g}",
        f"- criterion: {results['threshold']['criterion']}",
        f"- **{threshold_sentence(results)}**",
        "",
        f"![sweep]({figure_name})",
        "",
    ]
    aux = sorted({a for p in results["points"] for a in p.get("aux", {})})
    head = ["x", "seeds", "mean", "std", "min", "max"] + [f"mean {a}" for a in aux]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for p in results["points"]:
        cells = [_fmt_x(p["x"]), str(p["n"])] + [_pct(p[k]) for k in ("mean", "std", "min", "max")]
        cells += [_pct(p.get("aux", {}).get(a, math.nan)) for a in aux]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Members",
        "",
        "| member | seed | x | step | metric |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results["members"]:
        lines.append(
            f"| {r['member']} | {r['seed']} | {_fmt_x(r['x'])} | {r['final_step']} | "
            f"{_pct(r['metric'])} |"
        )
    if results["missing_members"]:
        lines += ["", "Not finished yet: " + ", ".join(results["missing_members"])]
    for name, reason in results.get("stopped_members", {}).items():
        lines += ["", f"Stopped, not in the figure: {name}: {reason}"]
    return "\n".join(lines) + "\n"


def plot_sweep(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = results["points"]
    xs = [p["x"] for p in points]
    is_num = numeric(xs)
    pos = xs if is_num else list(range(len(xs)))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    mean = np.array([p["mean"] for p in points]) * 100
    lo = np.array([p["min"] for p in points]) * 100
    hi = np.array([p["max"] for p in points]) * 100
    n = max(p["n"] for p in points)
    ax.fill_between(pos, lo, hi, alpha=0.25, color="C0", label=f"min-max over {n} seeds")
    ax.plot(pos, mean, "o-", color="C0", label=f"mean {results['metric']}")
    where = {x: i for i, x in enumerate(xs)}
    for r in results["members"]:
        px = r["x"] if is_num else where.get(r["x"])
        if px is not None:
            ax.plot(px, 100 * r["metric"], ".", color="C0", alpha=0.6, ms=4)
    for j, aux in enumerate(sorted({a for p in points for a in p.get("aux", {})})):
        vals = [100 * p.get("aux", {}).get(aux, math.nan) for p in points]
        ax.plot(pos, vals, "--", lw=1, color=f"C{j + 2}", label=f"mean {aux}")
    target = 100 * results["target"]
    ax.axhline(target, color="gray", ls=":", lw=1, label=f"target {target:g}%")
    thr = results["threshold"]["threshold"]
    stable = results["threshold"].get("stable_threshold")
    if thr is not None:
        tx = thr if is_num else where[thr]
        ax.axvline(tx, color="black", ls="-.", lw=1.2, label=f"threshold {_fmt_x(thr)}")
    if stable is not None and stable != thr:
        sx = stable if is_num else where[stable]
        ax.axvline(sx, color="C4", ls=":", lw=1, label=f"stable threshold {_fmt_x(stable)}")
    if not is_num:
        ax.set_xticks(pos, [str(x) for x in xs])
    elif min(xs) > 0 and max(xs) / min(xs) >= 10:  # e.g. ratios 0.25 .. 8
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [_fmt_x(x) for x in xs])
        ax.minorticks_off()
    ax.set_xlabel(results["x_label"])
    ax.set_ylabel(f"final accuracy, {results['metric']} (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(results["title"], fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
