"""`LegoTask`: the lego family's task config (docs/lego.md): K, L and eval_size of the
paper's fields, which it shares, and the `lego_*` fields, validated on construction. Errors are
ConfigErrors naming the field. No torch here.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from empirical.config.field_types import choice, integer, names, number
from empirical.config.io import ConfigError, config_class
from empirical.task.family import EvalSize, Variables, check_hop_counts, kept_hops

__all__ = ["LegoTask"]

ORDERS = ("random", "chain")


@config_class("task")
class LegoTask:
    """Chains of signed clauses over {+1, -1}, shuffled, and a query (docs/lego.md)."""

    K: Variables = 5  # variables a.., one clause each at most
    L: integer(2, why=" (clauses and the query, a token each)") = 16  # sequence length
    eval_size: EvalSize = 10_000  # sequences per evaluation set
    family: Literal["lego"] = "lego"
    lego_hops: names("hop counts (integers >= 0)", Any) = (0, 1, 2)  # in training (root: 0)
    lego_hop_weights: names("numbers >= 0", Any) = ()  # their relative weights (empty: equal)
    lego_held_out_hops: names("hop counts (integers >= 0)", Any) = (3,)  # only evaluated
    lego_chain_length: integer(1) = 4  # clauses of the queried chain (> every hop count)
    lego_distractors: integer(0, why=" (the most distractor chains per sequence)") = 1
    # distractor chains per sequence: uniform on 0..this
    lego_distractor_length: integer(1, why=" (the most clauses of one)") = 4
    # clauses of a distractor chain: uniform on 1..this
    lego_order: choice(*ORDERS) = "random"  # "random": shuffled | "chain": chain after chain
    lego_minus_share: number(0, 1, lo_open=True, hi_open=True,
                             message="must be a number in (0, 1) (the odds of a `-` sign in "
                             "training; 0.5: uniform)") = 0.5  # fmt: skip
    # odds of a `-` sign in training (evaluation: 0.5)

    def __post_init__(self) -> None:
        """The lego fields on their own, then together with K and L."""
        _check_values(self)
        _check_fit(self)

    @property
    def n_classes(self) -> int:
        """The model's output classes: the values +1, -1."""
        return 2

    @property
    def trained_hops(self) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The hop counts training asks (lego_hops minus lego_held_out_hops), their weights."""
        return kept_hops(self.lego_hops, self.lego_hop_weights, self.lego_held_out_hops)

    @property
    def evaluated_hops(self) -> tuple[int, ...]:
        """Every hop count with an evaluation set, trained or held out, sorted."""
        return tuple(sorted(set(self.lego_hops) | set(self.lego_held_out_hops)))


def _check_values(task: LegoTask) -> None:
    """Each lego field on its own."""
    meaning = "0: the root `a=+1` is queried, 1: a variable bound to the root, ..."
    for name in ("lego_hops", "lego_held_out_hops"):
        setattr(task, name, check_hop_counts(name, getattr(task, name), 0, meaning))
    trained = [h for h in task.lego_hops if h not in task.lego_held_out_hops]
    if not trained:
        raise ConfigError(
            f"task.lego_held_out_hops = {list(task.lego_held_out_hops)} holds out every hop "
            f"count of task.lego_hops = {list(task.lego_hops)}, leaving nothing to train"
        )
    weights = task.lego_hop_weights
    if not all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0
        for w in weights
    ):
        raise ConfigError(
            f"task.lego_hop_weights = {weights!r} must be a list of finite numbers >= 0"
        )
    if weights and len(weights) != len(task.lego_hops):
        raise ConfigError(
            f"task.lego_hop_weights = {list(weights)} has {len(weights)} weights for the "
            f"{len(task.lego_hops)} hop counts of task.lego_hops: give one per hop count (or "
            "none: equal weights)"
        )
    task.lego_hop_weights = tuple(float(w) for w in weights)
    if weights and not sum(w for h, w in zip(task.lego_hops, weights, strict=True)
                           if h in trained) > 0:  # fmt: skip
        raise ConfigError(
            f"task.lego_hop_weights = {list(weights)} gives weight 0 to every trained hop "
            f"count {trained}; give one of them a weight > 0"
        )


def _check_fit(task: LegoTask) -> None:
    """The fields together: the queried chain holds every evaluated hop count, and every
    clause fits the K variables and the L positions."""
    deepest = max((*task.lego_hops, *task.lego_held_out_hops))
    length = task.lego_chain_length
    if isinstance(length, bool) or not isinstance(length, int) or length < deepest + 1:
        raise ConfigError(
            f"task.lego_chain_length = {length!r} is out of range: must be an integer >= "
            f"{deepest + 1} (the queried chain must hold the deepest hop count {deepest}: a hop "
            "count H needs H + 1 clauses)"
        )
    clauses = task.lego_chain_length + task.lego_distractors * task.lego_distractor_length
    if clauses > task.K:
        raise ConfigError(
            f"task.K = {task.K} variables are too few: a sequence holds up to {clauses} "
            f"clauses (task.lego_chain_length + task.lego_distractors * "
            f"task.lego_distractor_length), each defining its own variable; raise task.K to "
            f"{clauses} or ask fewer clauses"
        )
    if task.L < clauses + 1:
        raise ConfigError(
            f"task.L = {task.L} is too short: {clauses} clauses and the query, a token each, "
            f"need L >= {clauses + 1}"
        )
