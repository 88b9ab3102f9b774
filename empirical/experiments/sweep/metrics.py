"""The metric a sweep plots and thresholds, from one evaluation record (`metric_value`): an
evaluation-set name (the exact Figure-3 sets `fig3/...` are added to the members'
task.extra_eval_sets: `with_metric_sets`) or a derived accuracy `k/all_pairs`, `k/all`,
`k/mean` (k in 0var, 1var, 2var), `all/mean` or `auto`; their definitions: docs/sweep.md,
"Metrics".
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from empirical.config.io import ConfigError
from empirical.runs.config import RunConfig
from empirical.task.assign_add.config import EVAL_SET_NAMES, EXTRA_EVAL_SET_NAMES, AssignAddTask
from empirical.task.pairs import held_out_pairs, ordered_ranks

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
    derived = {f"{k}/{s}" for k in KINDS for s in ("all_pairs", "all", "mean")} | {"all/mean"}
    if name not in derived and name not in EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES:
        raise ConfigError(
            f"--metric {name!r} is unknown; allowed: auto, an evaluation set "
            f"({', '.join(EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES)}) or "
            f"{', '.join(sorted(derived))}"
        )


def metric_sets(metric: str) -> tuple[str, ...]:
    """The optional evaluation sets (task.extra_eval_sets) a metric needs."""
    return (metric,) if metric in EXTRA_EVAL_SET_NAMES else ()


def with_metric_sets(base: RunConfig, metric: str) -> RunConfig:
    """`base` with the optional evaluation sets the metric needs added to
    task.extra_eval_sets (unchanged when it lists them already)."""
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
        paper = isinstance(cfg.task, AssignAddTask)  # the paper's fields (assign_add, chain)
        self.pair = pair_weight(cfg) if paper else 0.0
        self.restricted = {k: restricted_weight(cfg, k) if paper else 0.0 for k in KINDS}


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
    """The value of metric `name` (the module docstring) from one evaluation record."""
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
        return _combine(acc, [(f"{kind}/ind", (1 - f) * (1 - w)), (f"{kind}/pair", (1 - f) * w),
                              (f"{kind}/var", f * (1 - w)), (f"{kind}/both", f * w)])
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
