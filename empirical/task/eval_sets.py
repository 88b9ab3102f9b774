"""Evaluation sets: fixed per seed, built on the CPU (identical whatever the device), saved
with the run.

    {0var,1var,2var}/ind    obeys both training restrictions
    {0var,1var,2var}/pair   held-out value pair, variables at allowed positions
    {1var,2var}/var         allowed value pair, some variable at a position it never held
                            in training (v in R1 first, or v in R2 second)
    {1var,2var}/both        held-out value pair and a restricted variable position
    curated/novel_orderings 1-var, allowed pair, a variable that training saw only at the
                            other operand position (v in R1 \\ R2 first, v in R2 \\ R1 second)
    curated/held_out_pairs  every held-out pair in every form, stratified: each ordered
                            held-out pair (x, y) as `x+y`, `v+y` (v=x), `x+v` (v=y) and
                            `u+v` (u=x, v=y), variables at allowed positions

Each set has cfg.eval_size sequences (curated/held_out_pairs: the smallest multiple of its
(pair, form) cells that is at least eval_size), or all of its support if that is smaller.
A set that cannot exist for the config (no held-out pair, no restricted variable) is left
out of the dict.
"""

from __future__ import annotations

import io
import math
import os

import torch

from empirical.config_io import atomic_write_bytes, to_dict
from empirical.task.batch import FIELDS, Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import check_held_out, cpu_generator, held_out_pairs
from empirical.task.sampler import (
    Design,
    _Ctx,
    draw_given,
    enumerate_design,
    make_design,
    sample_design,
    support_size,
)

EVAL_SET_NAMES = (
    "0var/ind",
    "0var/pair",
    "1var/ind",
    "1var/pair",
    "1var/var",
    "1var/both",
    "2var/ind",
    "2var/pair",
    "2var/var",
    "2var/both",
    "curated/novel_orderings",
    "curated/held_out_pairs",
)
FORMAT = "assign-and-add-eval-sets/1"


class EvalSets(dict):
    """dict[str, Batch] plus what produced it: held_out (n, 2), seed, config (a dict), and
    per set whether it enumerates its whole support (`enumerated`)."""

    def __init__(self, *args, held_out=None, seed=None, config=None, enumerated=None, **kw):
        super().__init__(*args, **kw)
        self.held_out = held_out
        self.seed = seed
        self.config = config
        self.enumerated = dict(enumerated or {})

    def to(self, device) -> EvalSets:
        return EvalSets(
            {k: v.to(device) for k, v in self.items()},
            held_out=self.held_out,
            seed=self.seed,
            config=self.config,
            enumerated=self.enumerated,
        )


def _groups(cfg: TaskConfig, name: str):
    """(groups, values) of a set's design; groups as in sampler.make_design."""
    kind, cat = name.split("/")
    if kind == "curated":
        if cat == "novel_orderings":
            first = [(v, -1) for v in cfg.restricted_vars(0) if v in cfg.allowed_vars(1)]
            second = [(-1, v) for v in cfg.restricted_vars(1) if v in cfg.allowed_vars(0)]
            return [(0.5, first), (0.5, second)], "allowed"
        # held_out_pairs: the support is the union of the */pair supports
        return (
            [(1.0, [(-1, -1)])]
            + [(1.0, [(v, -1) for v in cfg.allowed_vars(0)])]
            + [(1.0, [(-1, v) for v in cfg.allowed_vars(1)])]
            + [(1.0, cfg.training_2var_combos())]
        ), "held"
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


def _design(cfg: TaskConfig, name: str, held: torch.Tensor) -> Design | None:
    if name not in EVAL_SET_NAMES:
        raise KeyError(f"unknown evaluation set {name!r}; known: {', '.join(EVAL_SET_NAMES)}")
    groups, values = _groups(cfg, name)
    return make_design(cfg, groups, held, values, "cpu")


def _stratified_held_out(cfg: TaskConfig, ctx: _Ctx, design: Design, g) -> Batch:
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


def build_eval_set(
    cfg: TaskConfig, seed: int, name: str, device="cpu", held_out: torch.Tensor | None = None
) -> tuple[Batch, bool] | None:
    """One evaluation set: (Batch, enumerated whole support?), or None if it cannot exist."""
    held = held_out_pairs(cfg, seed) if held_out is None else check_held_out(cfg, held_out)
    design = _design(cfg, name, held)
    if design is None:
        return None
    ctx = _Ctx(cfg, "cpu")
    g = cpu_generator(seed, "eval", name)
    if support_size(ctx, design) <= cfg.eval_size:
        batch = enumerate_design(ctx, design)
        batch = batch[torch.randperm(len(batch), generator=g)]
        enumerated = True
    elif name == "curated/held_out_pairs":
        batch, enumerated = _stratified_held_out(cfg, ctx, design, g), False
    else:
        batch, enumerated = sample_design(ctx, design, cfg.eval_size, g), False
    return batch.to(device), enumerated


def build_eval_sets(cfg: TaskConfig, seed: int, device="cpu") -> EvalSets:
    """All evaluation sets of this seed, deterministic (built on the CPU, then moved)."""
    held = held_out_pairs(cfg, seed)
    out = EvalSets(held_out=held, seed=int(seed), config=to_dict(cfg))
    for name in EVAL_SET_NAMES:
        built = build_eval_set(cfg, seed, name, device, held_out=held)
        if built is not None:
            out[name], out.enumerated[name] = built
    return out


def save_eval_sets(sets: dict[str, Batch], path: str | os.PathLike, held_out=None) -> None:
    """One .pt file (tensors stored as int16), written atomically."""
    held = getattr(sets, "held_out", None) if held_out is None else held_out
    payload = {
        "format": FORMAT,
        "sets": {
            name: {f: getattr(b, f).detach().to("cpu", torch.int16) for f in FIELDS}
            for name, b in sets.items()
        },
        "held_out": None if held is None else torch.as_tensor(held).to("cpu", torch.long),
        "seed": getattr(sets, "seed", None),
        "config": getattr(sets, "config", None),
        "enumerated": dict(getattr(sets, "enumerated", {}) or {}),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_eval_sets(path: str | os.PathLike, device="cpu") -> EvalSets:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # any unreadable file: one clear message
        raise ValueError(f"{path}: not an evaluation-set file ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not an evaluation-set file (format {FORMAT!r} expected)")
    sets = {name: Batch.from_dict(d).to(device) for name, d in payload["sets"].items()}
    return EvalSets(
        sets,
        held_out=payload["held_out"],
        seed=payload["seed"],
        config=payload["config"],
        enumerated=payload.get("enumerated", {}),
    )
