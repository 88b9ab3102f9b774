"""Evaluation sets of the chain family (docs/task.md, "Evaluation sets of the chain family"):
`chain/0var`, `chain/1var_h{H}`, `chain/2var_h{H}` for every trained and held-out hop count H,
and `chain/held_out_pointers`; eval_size rows each, drawn on the CPU from the set's own stream
of the seed.
"""

from __future__ import annotations

import torch

from empirical.task.assign_add.design import make_design
from empirical.task.batch import Batch
from empirical.task.chain.config import ChainTask
from empirical.task.chain.draw import ChainDraw, ChainPlan
from empirical.task.pairs import cpu_generator

POINTER_SET = "chain/held_out_pointers"


def _pointer_sources(cfg: ChainTask, position: int) -> list[int]:
    """Variables allowed at operand `position` that have a held-out pointer target."""
    sources = {u for u, _ in cfg.held_out_pointer_pairs()}
    return [v for v in cfg.allowed_vars(position) if v in sources]


def chain_eval_set_names(cfg: ChainTask) -> tuple[str, ...]:
    """The chain family's evaluation sets of `cfg`, in a fixed order."""
    names = ["chain/0var"]
    for h in cfg.evaluated_hops:
        names += [f"chain/1var_h{h}", f"chain/2var_h{h}"]
    if _pointer_sources(cfg, 0) or _pointer_sources(cfg, 1):
        names.append(POINTER_SET)
    return tuple(names)


def _set_spec(cfg: ChainTask, name: str):
    """(groups, plan) of a chain evaluation set; KeyError for a name the config lacks."""
    trained, weights = cfg.training_hops
    if name not in chain_eval_set_names(cfg):
        known = ", ".join(chain_eval_set_names(cfg))
        raise KeyError(f"unknown evaluation set {name!r} for this chain config; known: {known}")
    first = [(v, -1) for v in cfg.allowed_vars(0)]
    second = [(-1, v) for v in cfg.allowed_vars(1)]
    if name == "chain/0var":
        return [(1.0, [(-1, -1)])], ChainPlan(trained, weights, trained)
    if name == POINTER_SET:
        hops = tuple(h for h in trained if h >= 2) or (2,)
        w = tuple(wt for h, wt in zip(trained, weights, strict=True) if h >= 2) or (1.0,)
        if not sum(w) > 0:
            w = (1.0,) * len(hops)
        groups = [
            (0.5, [(v, -1) for v in _pointer_sources(cfg, 0)]),
            (0.5, [(-1, v) for v in _pointer_sources(cfg, 1)]),
        ]
        return groups, ChainPlan(hops, w, trained, forced_targets=True)
    kind, hop = name.removeprefix("chain/").split("_h")
    plan = ChainPlan((int(hop),), (1.0,), trained)
    if kind == "1var":
        return [(0.5, first), (0.5, second)], plan
    return [(1.0, cfg.training_2var_combos())], plan


def build_chain_eval_set(
    cfg: ChainTask, seed: int, name: str, held: torch.Tensor
) -> tuple[Batch, bool] | None:
    """One chain evaluation set on the CPU: (Batch of eval_size rows, False), or None if it
    has no operand configuration."""
    groups, plan = _set_spec(cfg, name)
    design = make_design(cfg, groups, held, "allowed", "cpu")
    if design is None:
        return None
    draw = ChainDraw(cfg, design, plan, "cpu", strict=False)
    return draw.sample(cfg.eval_size, cpu_generator(seed, "eval", name)), False
