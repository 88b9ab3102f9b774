"""Theorem C.1's simplified model written into `AssignAddTransformer` itself (float64), every
weight set by hand (`layout.py`; each W_Q W_K^T and W_V W_O stored as (matrix, identity)):
orthonormal embeddings, layer-1 routing by position (leak `routing_leak`), layer 2's W^0 and
W_OV, the MLP computing F exactly, W_U = xi on F (docs/theorem_model.md, "The construction"),
and its labelled vectors in compare-qk's coordinates (`theorem_coordinates`).

    model = build_theorem_model(TheoremModelConfig(p=5, K=3, beta=4.0))  # an ordinary model
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from disentangled.model import fourier_mlp_weights, initial_W
from empirical.bridge.compare_qk.coords import Coordinates, col_labels, row_labels
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.layout import Layout
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer

DTYPE = torch.float64


def model_config(cfg: TheoremModelConfig) -> ModelConfig:
    """The ModelConfig of the theorem's model: d_model = d_head = 2 dim + p, d_mlp = 4p,
    quadratic activation, float64."""
    lay = Layout(cfg)
    d = lay.d_model
    return ModelConfig.for_task(
        cfg.p, cfg.K, cfg.L, d_model=d, d_head=d, d_mlp=4 * cfg.p, dtype="float64",
        act_fn="quadratic",
    )  # fmt: skip


def routing_targets(cfg: TheoremModelConfig) -> list[list[int]]:
    """targets[t]: the sequence positions that sequence position t attends to in layer 1."""
    lay = Layout(cfg)
    theta_of, seq_of = lay.theorem_position, lay.sequence_position
    L, K = cfg.L, cfg.K
    out = []
    for t in range(L):
        theta = theta_of[t]
        if theta < 2 * K and theta % 2 == 1:  # assigned number: itself and its variable
            out.append([seq_of[theta - 1], t])
        elif theta == L - 1:  # the query: both operands
            out.append([seq_of[L - 3], seq_of[L - 2]])
        else:  # nothing to copy: the `+` sink at sequence position 0
            out.append([0])
    return out


def routing_scores(cfg: TheoremModelConfig) -> Tensor:
    """Layer-1 score table [query t, key s] over sequence positions (before the causal mask)."""
    S = torch.zeros((cfg.L, cfg.L), dtype=DTYPE)
    for t, keys in enumerate(routing_targets(cfg)):
        S[t, keys] = cfg.routing_scale
    return S


def routing_leak(cfg: TheoremModelConfig) -> float:
    """Largest layer-1 attention weight that falls outside the routed keys, over positions:
    (number of other keys) e^-s / (routed + others e^-s), computed without cancellation."""
    worst = 0.0
    for t, keys in enumerate(routing_targets(cfg)):
        others = (t + 1) - len(keys)
        e = math.exp(-cfg.routing_scale)
        worst = max(worst, others * e / (len(keys) + others * e))
    return worst


def score_matrix(model: AssignAddTransformer, layer: int = 1) -> Tensor:
    """The score matrix W = W_Q W_K^T / sqrt(d_head) of block `layer` in the residual's
    coordinates, [d_model, d_model]; its [:dim, :dim] block is the theorem's W."""
    attn = model.blocks[layer].attn
    M = attn.W_Q[0].detach() @ attn.W_K[0].detach().T
    return M / model.cfg.attn_scale


@torch.no_grad()
def set_score_matrix(model: AssignAddTransformer, W_basis: Tensor, layer: int = 1) -> None:
    """Write the theorem's W ([dim, dim], basis coordinates) as block `layer`'s score matrix:
    W_Q = sqrt(d_head) W (zero outside the basis block), W_K = I, so W_Q W_K^T / sqrt(d_head)
    = W exactly."""
    attn = model.blocks[layer].attn
    d = attn.W_Q.shape[1]
    dim = W_basis.shape[0]
    WQ = torch.zeros((d, d), dtype=DTYPE)
    WQ[:dim, :dim] = W_basis.to(DTYPE) * model.cfg.attn_scale
    attn.W_Q[0].copy_(WQ)
    attn.W_K[0].copy_(torch.eye(d, dtype=DTYPE))


@torch.no_grad()
def build_theorem_model(cfg: TheoremModelConfig, W: Tensor | None = None) -> AssignAddTransformer:
    """Theorem C.1's model as an AssignAddTransformer (module docstring); layer 2's score
    matrix is W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T, or `W` ([dim, dim], basis coordinates)."""
    lay = Layout(cfg)
    basis, dim, d, p = lay.basis, lay.dim, lay.d_model, cfg.p
    model = AssignAddTransformer(model_config(cfg), seed=0)
    for param in model.parameters():
        param.zero_()
    eye = torch.eye(d, dtype=DTYPE)

    for vid, label in enumerate(lay.token_labels):
        model.W_E[vid, basis.index(label)] = 1.0
    for t, theta in enumerate(lay.theorem_position):
        model.W_pos[t, basis.pos(theta)] = 1.0

    l1 = model.blocks[0].attn
    S = routing_scores(cfg)
    pos = torch.tensor([basis.pos(theta) for theta in lay.theorem_position])
    WQ1 = torch.zeros((d, d), dtype=DTYPE)
    WQ1[pos[:, None], pos[None, :]] = S * model.cfg.attn_scale
    l1.W_Q[0].copy_(WQ1)
    l1.W_K[0].copy_(eye)
    for u in range(cfg.K):
        l1.W_V[0, basis.v(u), basis.bar_v(u)] = 2.0
    l1.W_O[0].copy_(eye)

    l2 = model.blocks[1].attn
    sim = cfg.sim_config()
    set_score_matrix(model, initial_W(sim) if W is None else W)
    for i in range(dim):
        l2.W_V[0, i, lay.ov_offset + i] = 1.0
    l2.W_O[0].copy_(eye)

    A, B = fourier_mlp_weights(p)
    numbers_out = [lay.ov_offset + basis.n(m) for m in range(p)]  # u_m
    model.W_in[numbers_out] = A
    model.W_out[:, lay.f_offset : lay.f_offset + p] = B
    model.W_U[lay.f_offset : lay.f_offset + p] = cfg.xi * torch.eye(p, dtype=DTYPE)
    model.eval()
    return model


def theorem_coordinates(cfg: TheoremModelConfig) -> Coordinates:
    """compare-qk's labelled query/key vectors of the theorem's model: unit vectors of the
    residual at the basis coordinates of each label, with the model's score scale."""
    lay = Layout(cfg)
    basis, d = lay.basis, lay.d_model
    eye = torch.eye(d, dtype=torch.float64)
    rows = row_labels(cfg.K, cfg.L)
    cols = col_labels(cfg.p, cfg.K, cfg.L)
    return Coordinates(
        rows=rows,
        cols=cols,
        Q=eye[[basis.index(r) for r in rows]],
        K=eye[[basis.index(c) for c in cols]],
        scale=float(model_config(cfg).attn_scale),
        p=cfg.p,
        n_vars=cfg.K,
        L=cfg.L,
    )
