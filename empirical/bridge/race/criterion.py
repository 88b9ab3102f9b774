"""The race criterion of docs/race.md ("The criterion"), computed at step 0 of one
dynamics-ladder configuration from the exact population gradient and the optimiser's first
update of each trainable tensor (SGD: -lr g; AdamW, modelled per tensor: -lr g / RMS(g)):
T_mem, the steps along the first update dW of layer 2's score matrix until W^0 + s dW composes
2-var (`memory_time`); T_in = lambda / D_in, the training loss over its first-order decrease per
step through layer 1 and the embeddings; `predict`: the memory wins iff T_mem <= tau T_in.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from disentangled.experiments import ebar_block
from disentangled.gradient import cross_entropy_terms
from empirical.bridge.ladder_dynamics.onestep import smallest_composing
from empirical.bridge.ladder_dynamics.trainer import Context, make_optimizer, memory_entries
from empirical.bridge.theorem_model.construct import (
    build_theorem_model,
    score_matrix,
    set_score_matrix,
)
from empirical.bridge.theorem_model.gradient import population_accuracy

INPUT_GROUPS = ("layer1", "embeddings")
GRID = tuple(float(x) for x in np.geomspace(1.0, 1e5, 61))  # steps
REL_TOL = 0.01
INF = math.inf


@dataclass
class StepZero:
    """The criterion's quantities of one configuration (module docstring); the per-group
    first-order loss decreases and the memory block of dW are diagnostics."""

    loss: float
    D_in: float
    T_in: float
    T_mem: float
    two_var_trained: bool
    adam: bool
    per_group: dict[str, float]
    memory: dict[str, float]
    seconds: float

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isinf(v) else v)
                for k, v in asdict(self).items()}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict) -> StepZero:
        d = dict(d)
        for k in ("T_in", "T_mem"):
            d[k] = INF if d[k] is None else d[k]
        return cls(**d)


def population_gradient(model, pop, chunk: int = 4096) -> float:
    """The training loss (cross-entropy of the model's logits, the population's weights
    normalised) over the whole population, its gradient left in the trainable tensors'
    `.grad`."""
    total = 0.0
    weights = pop.weights / pop.weights.sum()
    for start in range(0, len(pop), chunk):
        sl = slice(start, start + chunk)
        logits = model(pop.tokens[sl], fast=True)
        labels = pop.labels[sl]
        per_seq = cross_entropy_terms(logits, labels, 1.0)
        value = (per_seq * weights[sl]).sum()
        value.backward()
        total += float(value.detach())
    return total


def first_update(g: Tensor, lr: float, adam: bool) -> Tensor:
    """The optimiser's first update of a tensor with gradient g: -lr g (SGD), -lr g / RMS(g)
    (AdamW as docs/race.md models it; 0 where the whole tensor's gradient is 0)."""
    if not adam:
        return -lr * g
    rms = float(g.pow(2).mean().sqrt())
    return torch.zeros_like(g) if rms == 0 else -lr * g / rms


def _updates(model, opt, adam: bool) -> tuple[dict[str, Tensor], dict[str, float]]:
    """({parameter name: first update}, {group: first-order loss decrease per step})."""
    names = {id(p): n for n, p in model.named_parameters()}
    updates, per_group = {}, {}
    for group in opt.param_groups:
        decrease = 0.0
        for p in group["params"]:
            g = torch.zeros_like(p) if p.grad is None else p.grad.detach()
            d = first_update(g, group["lr"], adam)
            updates[names[id(p)]] = d
            decrease += float(-(g * d).sum())
        per_group[group["name"]] = decrease
    return updates, per_group


def score_update(model, updates: dict[str, Tensor], dim: int) -> Tensor:
    """dW: the first update of layer 2's score matrix, [(W_Q + dW_Q)(W_K + dW_K)^T -
    W_Q W_K^T] / sqrt(d_head), its basis block."""
    attn = model.blocks[1].attn
    Q, K = attn.W_Q.detach(), attn.W_K.detach()
    dQ = updates.get("blocks.1.attn.W_Q", torch.zeros_like(Q))
    dK = updates.get("blocks.1.attn.W_K", torch.zeros_like(K))
    dM = (Q + dQ)[0] @ (K + dK)[0].T - Q[0] @ K[0].T
    return dM[:dim, :dim] / model.cfg.attn_scale


def memory_time(ctx: Context, dW: Tensor, grid: tuple[float, ...] = GRID) -> float:
    """T_mem: the smallest s on `grid` (bisected to REL_TOL in log s) at which the theorem's
    model with score matrix W^0 + s dW (every other piece at its start) composes the whole
    2-var population; INF if none does."""
    model = build_theorem_model(ctx.cfg.theorem.model_config())
    W0 = score_matrix(model)[: ctx.dim, : ctx.dim].clone()

    def composes(s: float) -> bool:
        set_score_matrix(model, W0 + s * dW)
        return population_accuracy(model, ctx.eval_2var)["2var"] >= ctx.cfg.threshold

    s = smallest_composing(composes, grid, REL_TOL)
    return INF if s is None else s


def _memory_block(dW: Tensor, ctx: Context) -> dict[str, float]:
    """The memory block of dW (query bar_v x key bar_v): mean diagonal, mean off-diagonal, and
    the smallest row contrast (diagonal minus the row's largest off-diagonal entry)."""
    block = ebar_block(dW, ctx.cfg.theorem.model_config().sim_config())
    off = block.clone().fill_diagonal_(-math.inf)
    contrast = float((block.diagonal() - off.max(dim=1).values).min())
    return {**memory_entries(block), "contrast_min": contrast}


def step_zero(ctx: Context, releases: tuple[str, ...]) -> StepZero:
    """The criterion's quantities of `releases` in the context's configuration."""
    start = time.perf_counter()
    cfg = ctx.cfg
    model = build_theorem_model(cfg.theorem.model_config())
    opt = make_optimizer(model, cfg, releases)
    adam = "adamw" in releases
    loss = population_gradient(model, ctx.training_population(releases))
    updates, per_group = _updates(model, opt, adam)
    D_in = sum((v for g, v in per_group.items() if g in INPUT_GROUPS), 0.0)
    dW = score_update(model, updates, ctx.dim)
    two_var = "mix" in releases and cfg.mix.frac_2var > 0
    return StepZero(
        loss=loss, D_in=D_in, T_in=loss / D_in if D_in > 0 else INF,
        T_mem=memory_time(ctx, dW), two_var_trained=two_var, adam=adam, per_group=per_group,
        memory=_memory_block(dW, ctx), seconds=time.perf_counter() - start,
    )  # fmt: skip


def predict(sz: StepZero, tau: float, steps: int) -> dict:
    """{"predicted": bool, "winner": "memory" | "inputs", "ratio": T_mem / (tau T_in)}."""
    inputs_time = tau * sz.T_in
    memory_wins = sz.T_mem <= inputs_time
    if memory_wins:
        predicted = sz.T_mem <= steps
    else:
        predicted = sz.two_var_trained and inputs_time <= steps
    if math.isinf(sz.T_mem):
        ratio = INF if not math.isinf(inputs_time) else None
    else:
        ratio = 0.0 if math.isinf(inputs_time) else sz.T_mem / inputs_time
    return {"predicted": bool(predicted), "winner": "memory" if memory_wins else "inputs",
            "ratio": ratio}  # fmt: skip
