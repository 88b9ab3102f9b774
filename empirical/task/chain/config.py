"""`ChainTask`: the chain family's task config, the paper's task (`AssignAddTask`, whose
fields it reads and checks) plus the `chain_*` fields (docs/task.md, "The chain family"),
validated on construction, and their derived values. Errors are ConfigErrors naming the
field. No torch here.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from empirical.config.field_types import MUST, choice, integer, names, split_list
from empirical.config.io import ConfigError, config_class
from empirical.task.assign_add.config import AssignAddTask
from empirical.task.family import check_hop_counts, kept_hops

__all__ = ["ChainTask"]

CHAIN_ORDERS = ("random", "targets_first")


@config_class("task")
class ChainTask(AssignAddTask):
    """Assignments that may point to another variable (`b=a`): the paper's fields, then the
    chain fields (docs/task.md)."""

    family: Literal["chain"] = "chain"  # (in the paper's fields' place: the same TOML order)
    chain_hops: names("hop counts (integers >= 1)", Any) = (1, 2)  # in training
    chain_hop_weights: names("numbers >= 0", Any) = ()  # their relative weights (empty: equal)
    chain_order: choice(*CHAIN_ORDERS) = "random"  # "targets_first": every target first
    chain_distractors: integer(0, why=" (the most distractor chains per sequence)",
                               wording=MUST) = 1  # fmt: skip
    # distractor chains per sequence: uniform on 0..this
    chain_distractor_length: integer(1, why=" (the most assignments of a distractor chain)",
                                     wording=MUST) = 1  # fmt: skip
    # assignments of a distractor chain: uniform on 1..this
    chain_held_out_pointers: names("'u->w' pairs", Any) = ()  # u=w never trained
    chain_held_out_hops: names("hop counts (integers >= 1)", Any) = ()  # only evaluated

    def __post_init__(self) -> None:
        """The paper's fields (AssignAddTask), then the chain fields on their own and
        together: something to train, and every chain fits K and L."""
        super().__post_init__()
        _check_chain_values(self)
        _check_chain_fit(self)

    @property
    def capacity(self) -> int:
        """Most assignments (= distinct variables) a chain sequence can hold: min(K, (L-4)//2)."""
        return min(self.K, (self.L - 4) // 2)

    @property
    def training_hops(self) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The hop counts training asks (chain_hops minus chain_held_out_hops) and their
        relative weights (chain_hop_weights, equal if empty)."""
        return kept_hops(self.chain_hops, self.chain_hop_weights, self.chain_held_out_hops)

    @property
    def evaluated_hops(self) -> tuple[int, ...]:
        """Every hop count with evaluation sets: the trained and the held-out ones, sorted."""
        return tuple(sorted(set(self.chain_hops) | set(self.chain_held_out_hops)))

    @property
    def training_max_variables(self) -> int:
        """Most variables a training sequence holds: two operand chains of the longest trained
        hop count plus every distractor chain at its longest."""
        hops, _ = self.training_hops
        return 2 * max(hops) + self.chain_distractors * self.chain_distractor_length

    def held_out_pointer_pairs(self) -> list[tuple[int, int]]:
        """The held-out pointer pairs as variable indices (u, w): `u=w` is never trained."""
        return [
            (self.letters.index(u), self.letters.index(w))
            for u, w in (parse_pointer(t, self.letters) for t in self.chain_held_out_pointers)
        ]


def _as_list(value: object, name: str, what: str) -> list:
    value = split_list(value)  # "1,2" or one number, as a list
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"task.{name} = {value!r} must be a list of {what}")
    return list(value)


def _hop_list(cfg, name: str) -> tuple[int, ...]:
    values = _as_list(getattr(cfg, name), name, "hop counts (integers >= 1)")
    meaning = "1: a variable bound to a number, 2: bound to a variable bound to a number, ..."
    return check_hop_counts(name, values, 1, meaning)


def _limit_name(cfg, need: int) -> str:
    """Which of K and L a need of `need` assignments exceeds, in words."""
    region = cfg.L - 4
    parts = []
    if need > region // 2:
        parts.append(
            f"{2 * need} of the L-4 = {region} assignment positions (raise task.L to at least "
            f"{2 * need + 4})"
        )
    if need > cfg.K:
        parts.append(f"{need} distinct variables, but K = {cfg.K} (raise task.K to {need})")
    return " and ".join(parts)


def parse_pointer(text: object, letters: str) -> tuple[str, str]:
    """'u->w' -> ('u', 'w'); a ConfigError naming task.chain_held_out_pointers otherwise."""
    if not isinstance(text, str) or "->" not in text:
        raise ConfigError(
            f"task.chain_held_out_pointers: {text!r} is not a pointer pair; write 'u->w' (the "
            "assignment `u=w` is never trained)"
        )
    u, w = (s.strip() for s in text.split("->", 1))
    for v in (u, w):
        if v not in letters or len(v) != 1:
            raise ConfigError(
                f"task.chain_held_out_pointers: {text!r}: {v!r} is not a variable; with "
                f"K = {len(letters)} the variables are {', '.join(letters)}"
            )
    if u == w:
        raise ConfigError(
            f"task.chain_held_out_pointers: {text!r} points a variable at itself, which no "
            "sequence does; name two different variables"
        )
    return u, w


def _check_chain_values(cfg) -> None:
    """Each chain field on its own (and the paper's fields the family cannot use)."""
    hops = _hop_list(cfg, "chain_hops")
    if not hops:
        raise ConfigError("task.chain_hops = [] must list at least one hop count, e.g. [1, 2]")
    cfg.chain_hops = hops
    cfg.chain_held_out_hops = _hop_list(cfg, "chain_held_out_hops")

    weights = _as_list(cfg.chain_hop_weights, "chain_hop_weights", "numbers >= 0")
    for w in weights:
        if not isinstance(w, (int, float)) or isinstance(w, bool) or not math.isfinite(w) or w < 0:
            raise ConfigError(
                f"task.chain_hop_weights: {w!r} is not a weight; weights are finite numbers >= 0"
            )
    if weights and len(weights) != len(hops):
        raise ConfigError(
            f"task.chain_hop_weights = {weights} has {len(weights)} weights for the "
            f"{len(hops)} hop counts of task.chain_hops = {list(hops)}: give one per hop "
            "count (or none: equal weights)"
        )
    cfg.chain_hop_weights = tuple(float(w) for w in weights)

    if cfg.mix != "fractions":
        raise ConfigError(
            f"task.mix = {cfg.mix!r}: the chain family takes its 0/1/2-variable mix from "
            "task.frac_1var and task.ratio_2var_to_0var; use task.mix = 'fractions'"
        )
    if cfg.extra_eval_sets:
        raise ConfigError(
            f"task.extra_eval_sets = {list(cfg.extra_eval_sets)}: the Figure 3 sets belong to "
            "the assign_add family; leave it empty with task.family = 'chain'"
        )


def _check_chain_fit(cfg) -> None:
    """The chain fields together: something to train, and every chain fits K and L."""
    hops = cfg.chain_hops
    trained, trained_weights = cfg.training_hops
    if not trained:
        raise ConfigError(
            f"task.chain_held_out_hops = {list(cfg.chain_held_out_hops)} holds out every hop "
            f"count of task.chain_hops = {list(hops)}, leaving nothing to train; keep at least "
            "one hop count of task.chain_hops out of it"
        )
    if not sum(trained_weights) > 0:
        raise ConfigError(
            f"task.chain_hop_weights = {list(cfg.chain_hop_weights)} gives weight 0 to every "
            f"trained hop count {list(trained)}; give one of them a weight > 0"
        )
    for h in cfg.evaluated_hops:
        need = 2 * h  # a 2-var sequence: two chains of up to h hops
        if need > cfg.capacity:
            name = "chain_hops" if h in hops else "chain_held_out_hops"
            raise ConfigError(
                f"task.{name}: hop count {h} does not fit: a 2-var sequence with two {h}-hop "
                f"chains takes {need} assignments, which needs {_limit_name(cfg, need)}"
            )
    if cfg.chain_distractor_length > max(trained):
        raise ConfigError(
            f"task.chain_distractor_length = {cfg.chain_distractor_length} exceeds the longest "
            f"trained hop count {max(trained)}: a distractor chain that long would put an "
            "untrained hop count into training; make it at most that"
        )
    need = cfg.training_max_variables
    if need > cfg.capacity:
        raise ConfigError(
            f"task.chain_distractors = {cfg.chain_distractors} chains of up to "
            f"task.chain_distractor_length = {cfg.chain_distractor_length} assignments besides "
            f"two {max(trained)}-hop operand chains take {need} assignments, which needs "
            f"{_limit_name(cfg, need)}; or ask fewer or shorter distractor chains"
        )

    letters = cfg.letters
    pointers = _as_list(cfg.chain_held_out_pointers, "chain_held_out_pointers", "'u->w' pairs")
    pairs = [parse_pointer(t, letters) for t in pointers]
    if len(set(pairs)) != len(pairs):
        raise ConfigError(
            f"task.chain_held_out_pointers = {pointers} repeats a pair; list each once"
        )
    cfg.chain_held_out_pointers = tuple(f"{u}->{w}" for u, w in sorted(pairs))
    spare = cfg.K - need
    for u in letters:
        targets = sorted(w for a, w in pairs if a == u)
        if len(targets) > spare:
            raise ConfigError(
                f"task.chain_held_out_pointers holds out {len(targets)} targets of {u!r} "
                f"({', '.join(targets)}): a training sequence holds up to {need} of the K = "
                f"{cfg.K} variables, so a chain through {u!r} could be left with no target; "
                f"hold out at most {max(spare, 0)} per variable (or raise task.K)"
            )
