"""The evaluation sets of the assign-and-add family, built on the CPU from the seed
(docs/task.md, "Evaluation sets"): `{0var,1var,2var}/{ind,pair}`, `{1var,2var}/{var,both}`,
`curated/novel_orderings`, `curated/held_out_pairs` (stratified over (pair, form) cells), each
of eval_size sequences or its whole support if smaller, a set the config cannot have left out;
and the optional exact Figure 3 sets `fig3/0var_held_out`, `fig3/2var_union` ("Optional exact
sets: the paper's Figure 3 metrics").
"""

from __future__ import annotations

import math

import torch

from empirical.task.assign_add.config import EVAL_SET_NAMES, EXTRA_EVAL_SET_NAMES, AssignAddTask
from empirical.task.assign_add.design import Design, _Ctx, design_from_configs, make_design
from empirical.task.assign_add.draw import (
    draw_given,
    enumerate_design,
    sample_design,
    support_size,
)
from empirical.task.batch import Batch
from empirical.task.pairs import complement, cpu_generator, ordered_ranks


def _groups(cfg: AssignAddTask, name: str):
    """(groups, values) of a set's design; groups as in sampler.make_design."""
    kind, cat = name.split("/")
    if kind == "curated":
        if cat == "novel_orderings":
            first = [(v, -1) for v in cfg.restricted_vars(0) if v in cfg.allowed_vars(1)]
            second = [(-1, v) for v in cfg.restricted_vars(1) if v in cfg.allowed_vars(0)]
            return [(0.5, first), (0.5, second)], "allowed"
        # held_out_pairs: the support is the union of the */pair supports
        return [
            (1.0, [(-1, -1)]),
            (1.0, [(v, -1) for v in cfg.allowed_vars(0)]),
            (1.0, [(-1, v) for v in cfg.allowed_vars(1)]),
            (1.0, cfg.training_2var_combos()),
        ], "held"
    values = "held" if cat in ("pair", "both") else "allowed"
    restricted = cat in ("var", "both")
    K = cfg.K
    if kind == "0var":
        return [(1.0, [(-1, -1)])], values
    if kind == "1var":
        if restricted:
            first, second = cfg.restricted_vars(0), cfg.restricted_vars(1)
        else:
            first, second = cfg.allowed_vars(0), cfg.allowed_vars(1)
        return [(0.5, [(v, -1) for v in first]), (0.5, [(-1, v) for v in second])], values
    if restricted:
        r1, r2 = set(cfg.restricted_vars(0)), set(cfg.restricted_vars(1))
        combos = [
            (a, b)
            for a in range(K)
            for b in range(K)
            if cfg.two_var_ok(a, b) and (a in r1 or b in r2)
        ]
    else:
        combos = cfg.training_2var_combos()
    return [(1.0, combos)], values


def _design(cfg: AssignAddTask, name: str, held: torch.Tensor) -> Design | None:
    if name not in EVAL_SET_NAMES:
        known = ", ".join(EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES)
        raise KeyError(f"unknown evaluation set {name!r}; known: {known}")
    groups, values = _groups(cfg, name)
    return make_design(cfg, groups, held, values, "cpu")


def _stratified_held_out(cfg: AssignAddTask, ctx: _Ctx, design: Design, g) -> Batch:
    """Every ordered held-out pair in each of 4 forms, equally often (>= eval_size rows)."""
    pairs = design.vtab[: design.n_pair].long()
    x0, y0 = pairs[:, 0], pairs[:, 1]
    index = {conf: i for i, conf in enumerate(design.configs)}
    c13 = torch.tensor([index[(v, -1)] for v in cfg.allowed_vars(0)])
    c14 = torch.tensor([index[(-1, v)] for v in cfg.allowed_vars(1)])
    combos = [cb for cb in cfg.training_2var_combos() if cb in index]
    c_any = torch.tensor([index[cb] for cb in combos])  # for x == y (same variable allowed)
    c_dist = torch.tensor([index[cb] for cb in combos if cb[0] != cb[1]])  # for x != y
    # cells (pair, form); form 3 (two variables) for x != y needs a distinct-variable combo
    form = torch.arange(4).repeat(x0.numel())
    px, py = x0.repeat_interleave(4), y0.repeat_interleave(4)
    diag = px == py
    keep = (form != 3) | diag | (c_dist.numel() > 0)
    form, px, py, diag = form[keep], px[keep], py[keep], diag[keep]
    reps = max(1, math.ceil(cfg.eval_size / form.numel()))
    form, px, py, diag = (t.repeat(reps) for t in (form, px, py, diag))
    n = form.numel()
    u = torch.rand((n,), generator=g, dtype=torch.float64)

    def choose(table: torch.Tensor) -> torch.Tensor:
        if table.numel() == 0:
            return torch.zeros(n, dtype=torch.long)
        return table.index_select(0, (u * table.numel()).long())

    two = torch.where(diag, choose(c_any), choose(c_dist))
    c = torch.where(
        form == 0,
        index[(-1, -1)],
        torch.where(form == 1, choose(c13), torch.where(form == 2, choose(c14), two)),
    )
    batch = draw_given(ctx, design, c, px, py, g)
    return batch[torch.randperm(n, generator=g)]


def _cells(ranks: torch.Tensor, configs: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (pair rank, config index) of ranks x configs: (ranks', configs') flat."""
    table = torch.tensor(configs, dtype=torch.long)
    return ranks.repeat_interleave(table.numel()), table.repeat(ranks.numel())


def _fig3_set(cfg: AssignAddTask, name: str, held: torch.Tensor, g) -> Batch | None:
    """An exact Figure-3 set (docs/task.md), rows shuffled; None if empty."""
    p, K = cfg.p, cfg.K
    held_ranks = ordered_ranks(held, p, cfg.held_out_form)
    none = torch.zeros(0, dtype=torch.long)
    if name == "fig3/0var_held_out":
        configs, ranks = [(-1, -1)], held_ranks
        conf = torch.zeros(ranks.numel(), dtype=torch.long)
        design = design_from_configs(cfg, configs, [1.0], none, none, "cpu")
    else:
        if cfg.max_assignments < 2:
            return None
        configs = [(a, b) for a in range(K) for b in range(K) if a != b]
        r1, r2 = set(cfg.restricted_vars(0)), set(cfg.restricted_vars(1))
        train_ranks = complement(held_ranks, p * p)
        grids = [
            (held_ranks, lambda a, b: a not in r1 and b not in r2),
            (train_ranks, lambda a, b: (a in r1) != (b in r2)),
            (train_ranks, lambda a, b: a in r1 and b in r2),
        ]
        parts = [
            _cells(ranks, [i for i, (a, b) in enumerate(configs) if rule(a, b)])
            for ranks, rule in grids
        ]
        ranks = torch.cat([r for r, _ in parts])
        conf = torch.cat([c for _, c in parts])
        # the authors' evaluation builder: the two operand variables plus distractors, their
        # count uniform from 2 (here max(2, min_assignments)) to max_assignments
        design = design_from_configs(
            cfg, configs, [1.0] * len(configs), none, none, "cpu", count="uniform"
        )
    n = ranks.numel()
    if n == 0:
        return None
    batch = draw_given(_Ctx(cfg, "cpu"), design, conf, ranks // p, ranks % p, g)
    return batch[torch.randperm(n, generator=g)]


def build_set(
    cfg: AssignAddTask, seed: int, name: str, held: torch.Tensor
) -> tuple[Batch, bool] | None:
    """One assign_add evaluation set on the CPU: (Batch, enumerated whole support?), or None
    if it cannot exist. `name` is one of EVAL_SET_NAMES or EXTRA_EVAL_SET_NAMES (whether or
    not the config lists it in extra_eval_sets); the latter are exact, so always enumerated."""
    if name in EXTRA_EVAL_SET_NAMES:
        batch = _fig3_set(cfg, name, held, cpu_generator(seed, "eval", name))
        return None if batch is None else (batch, True)
    design = _design(cfg, name, held)
    if design is None:
        return None
    ctx = _Ctx(cfg, "cpu")
    g = cpu_generator(seed, "eval", name)
    if support_size(ctx, design) <= cfg.eval_size:
        batch = enumerate_design(ctx, design)
        return batch[torch.randperm(len(batch), generator=g)], True
    if name == "curated/held_out_pairs":
        return _stratified_held_out(cfg, ctx, design, g), False
    return sample_design(ctx, design, cfg.eval_size, g), False
