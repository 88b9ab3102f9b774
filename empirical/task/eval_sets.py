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
out of the dict. "Held-out pair" follows cfg.held_out_form: for "ordered", (x, y) is held
out while (y, x) may be a training pair.

Optional sets (cfg.extra_eval_sets, EXTRA_EVAL_SET_NAMES), the metrics of the paper's
Figure 3 sweeps, built exactly (each cell once, whatever eval_size):

    fig3/0var_held_out      every held-out ordered pair (x, y) once as `x+y`
    fig3/2var_union         distinct variables v1 != v2 only, each (x, y, v1, v2) once:
                            held-out pairs x (v1 not in R1, v2 not in R2), training pairs x
                            (v1 in R1 xor v2 in R2), training pairs x (v1 in R1, v2 in R2);
                            max(2, min_assignments)..max_assignments assignments, uniform

The chain family (cfg.family == "chain") has its own sets, chain_eval_sets.py
(`chain/0var`, `chain/1var_h2`, ...); `eval_set_names(cfg)` lists a config's sets.
"""

from __future__ import annotations

import io
import math
import os

import torch

from disentangled.command_line import UserError
from empirical.config_io import atomic_write_bytes, fingerprint_of, non_default_fields, to_dict
from empirical.task.batch import FIELDS, Batch
from empirical.task.config import EXTRA_EVAL_SET_NAMES, TaskConfig
from empirical.task.pairs import check_held_out, cpu_generator, held_out_pairs, ordered_ranks
from empirical.task.sampler import (
    Design,
    _Ctx,
    design_from_configs,
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


def eval_set_names(cfg: TaskConfig) -> tuple[str, ...]:
    """The names of cfg's evaluation sets (those a config cannot have are later left out):
    EVAL_SET_NAMES and cfg.extra_eval_sets, or the chain family's sets."""
    if cfg.family == "chain":
        from empirical.task.chain_eval_sets import chain_eval_set_names

        return chain_eval_set_names(cfg)
    return EVAL_SET_NAMES + tuple(cfg.extra_eval_sets)


class EvalSetsError(UserError, ValueError):
    """An evaluation-set file that cannot be read, or that belongs to another task or seed."""


def task_fingerprint(cfg: TaskConfig, seed: int) -> str:
    """The identity of a seed's evaluation sets: sha256 of the [task] table and the seed,
    all they depend on (saved in eval_sets.pt, checked when a run loads it)."""
    return fingerprint_of({"task": non_default_fields(cfg), "seed": int(seed)})


class EvalSets(dict):
    """dict[str, Batch] plus what produced it: held_out (n, 2), seed, config (a dict), per
    set whether it enumerates its whole support (`enumerated`), and the task_fingerprint of
    the task and seed (None in files written before it existed)."""

    def __init__(
        self, *args, held_out=None, seed=None, config=None, enumerated=None, fingerprint=None,
        **kw,
    ):  # fmt: skip
        super().__init__(*args, **kw)
        self.held_out = held_out
        self.seed = seed
        self.config = config
        self.enumerated = dict(enumerated or {})
        self.fingerprint = fingerprint

    def to(self, device) -> EvalSets:
        return EvalSets(
            {k: v.to(device) for k, v in self.items()},
            held_out=self.held_out,
            seed=self.seed,
            config=self.config,
            enumerated=self.enumerated,
            fingerprint=self.fingerprint,
        )


def eval_sets_mismatch(sets: EvalSets, cfg: TaskConfig, seed: int) -> str | None:
    """Why `sets` are not the evaluation sets of (cfg, seed); None: they are, or an older
    file records too little to tell (only a difference it records is refused)."""
    if getattr(sets, "fingerprint", None):
        expected = task_fingerprint(cfg, seed)
        if sets.fingerprint == expected:
            return None
        if sets.seed is not None and int(sets.seed) != int(seed):
            return f"they were built for seed {sets.seed}, this run's seed is {seed}"
        return (
            f"they were built for another [task] table (task fingerprint "
            f"{str(sets.fingerprint)[:12]}, this run's {expected[:12]})"
        )
    if getattr(sets, "seed", None) is not None and int(sets.seed) != int(seed):
        return f"they were built for seed {sets.seed}, this run's seed is {seed}"
    saved = getattr(sets, "config", None)
    if isinstance(saved, dict):
        mine = to_dict(cfg)
        differ = [k for k in saved if k in mine and saved[k] != mine[k]]
        if differ:
            shown = ", ".join(f"task.{k}" for k in differ[:4])
            return f"they were built for another [task] table ({shown} differ)"
    return None


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
        known = ", ".join(EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES)
        raise KeyError(f"unknown evaluation set {name!r}; known: {known}")
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


def _cells(ranks: torch.Tensor, configs: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (pair rank, config index) of ranks x configs: (ranks', configs') flat."""
    table = torch.tensor(configs, dtype=torch.long)
    return ranks.repeat_interleave(table.numel()), table.repeat(ranks.numel())


def _fig3_set(cfg: TaskConfig, name: str, held: torch.Tensor, g) -> Batch | None:
    """An exact Figure-3 set (see the module docstring), rows shuffled; None if empty."""
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
        keep = torch.ones(p * p, dtype=torch.bool)
        keep[held_ranks] = False
        train_ranks = keep.nonzero().reshape(-1)
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


def build_eval_set(
    cfg: TaskConfig, seed: int, name: str, device="cpu", held_out: torch.Tensor | None = None
) -> tuple[Batch, bool] | None:
    """One evaluation set: (Batch, enumerated whole support?), or None if it cannot exist.

    `name` is one of EVAL_SET_NAMES or EXTRA_EVAL_SET_NAMES (whether or not the config
    lists it in extra_eval_sets); the latter are exact, so always enumerated. For the chain
    family: one of eval_set_names(cfg).
    """
    held = held_out_pairs(cfg, seed) if held_out is None else check_held_out(cfg, held_out)
    if cfg.family == "chain":
        from empirical.task.chain_eval_sets import build_chain_eval_set

        built = build_chain_eval_set(cfg, seed, name, held)
        return None if built is None else (built[0].to(device), built[1])
    if name in EXTRA_EVAL_SET_NAMES:
        batch = _fig3_set(cfg, name, held, cpu_generator(seed, "eval", name))
        return None if batch is None else (batch.to(device), True)
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
    """All evaluation sets of this seed, deterministic (built on the CPU, then moved): the
    standard ones, then those of cfg.extra_eval_sets."""
    held = held_out_pairs(cfg, seed)
    out = EvalSets(
        held_out=held, seed=int(seed), config=to_dict(cfg), fingerprint=task_fingerprint(cfg, seed)
    )
    for name in eval_set_names(cfg):
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
        "fingerprint": getattr(sets, "fingerprint", None),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_eval_sets(path: str | os.PathLike, device="cpu") -> EvalSets:
    """The EvalSets saved at `path`; an EvalSetsError (a ValueError) names a file that is not
    one (garbage, truncated, another format)."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # any unreadable file: one clear message
        from empirical.config_io import load_failure

        raise EvalSetsError(
            f"{path}: not an evaluation-set file (corrupt or truncated: {load_failure(exc)})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise EvalSetsError(f"{path}: not an evaluation-set file (format {FORMAT!r} expected)")
    try:
        sets = {name: Batch.from_dict(d).to(device) for name, d in payload["sets"].items()}
        return EvalSets(
            sets,
            held_out=payload["held_out"],
            seed=payload["seed"],
            config=payload["config"],
            enumerated=payload.get("enumerated", {}),
            fingerprint=payload.get("fingerprint"),
        )
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise EvalSetsError(
            f"{path}: not a complete evaluation-set file ({type(exc).__name__}: {exc})"
        ) from None
