"""Fast exact evaluation of the model on compact chunks (same numbers as ``model.py``'s dense
forward), one hop (``chunk_forward``) or two (``two_hop_forward``).

Scores are bilinear, score_t = x_T^T W x_t, and every x_t is a sum of at most four basis
vectors (token, position, up to two ebar), so with the query row r = x_T^T W (one gather per
sequence) each score is a sum of four entries of r.  No (N, L, dim) tensor is ever formed.

A ``Geometry`` says how the key-query matrix and the value readout act on basis-coordinate
inputs: the orthogonal model uses W itself and reads the ``n{m}`` coordinates; the
random-embedding variant (``embedding.py``) maps W to an effective basis-coordinate matrix
and reads numbers through a dense (p, dim) readout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from .basis import Basis
from .config import ChainConfig, SimConfig
from .model import fourier_mlp_conv
from .population import CompactChunk

Config = SimConfig | ChainConfig


class Geometry:
    """Orthogonal embeddings: W acts directly on basis coordinates; <u_m, W_OV x> = x[n_m]."""

    readout: torch.Tensor | None = None

    def effective_W(self, W: torch.Tensor) -> torch.Tensor:
        return W


ORTHOGONAL = Geometry()


def key_scores(r: torch.Tensor, chunk: CompactChunk, basis: Basis, L: int) -> torch.Tensor:
    """r^T x_t for every t = 0..L-1 (N, L), r (N, dim + 1) with r[:, dim] = 0."""
    return (
        r.gather(1, chunk.tok)
        + r[:, basis.pos(0) : basis.pos(0) + L]
        + r.gather(1, chunk.bars[..., 0])
        + r.gather(1, chunk.bars[..., 1])
    )


def chunk_attention(
    W_eff: torch.Tensor, chunk: CompactChunk, cfg: Config, basis: Basis
) -> torch.Tensor:
    """sigma (N, L) for basis-coordinate key-query matrix ``W_eff``."""
    T = cfg.T
    Wp = nnf.pad(W_eff, (0, 1, 0, 1))  # index dim = "no component" -> 0
    q_bars = chunk.bars[:, T]  # (N, 2)
    r = Wp[basis.eq] + Wp[basis.pos(T)] + Wp[q_bars[:, 0]] + Wp[q_bars[:, 1]]  # (N, dim+1)
    return torch.softmax(key_scores(r, chunk, basis, cfg.L), dim=-1)


def chunk_numbers(
    sigma: torch.Tensor,
    chunk: CompactChunk,
    cfg: Config,
    basis: Basis,
    readout: torch.Tensor | None = None,
) -> torch.Tensor:
    """h_m = sum_t sigma_t <u_m, W_OV x_t>: (N, p)."""
    p, N = cfg.p, sigma.shape[0]
    if readout is None:  # orthogonal: only number tokens contribute, one-hot
        num = torch.where(chunk.tok < p, chunk.tok, p)
        h = torch.zeros((N, p + 1), dtype=sigma.dtype).scatter_add(1, num, sigma)
        return h[:, :p]
    Rt = nnf.pad(readout.T, (0, 0, 0, 1))  # (dim+1, p), last row 0
    pos = basis.pos(0) + torch.arange(cfg.L)
    per_pos = Rt[chunk.tok] + Rt[pos][None] + Rt[chunk.bars[..., 0]] + Rt[chunk.bars[..., 1]]
    return torch.einsum("nl,nlp->np", sigma, per_pos)


def chunk_forward(
    W: torch.Tensor, chunk: CompactChunk, cfg: Config, geometry: Geometry = ORTHOGONAL
) -> tuple[torch.Tensor, torch.Tensor]:
    """One hop: (sigma (N, L), F(h) (N, p)) for every sequence of the chunk."""
    basis = Basis.from_config(cfg)
    sigma = chunk_attention(geometry.effective_W(W), chunk, cfg, basis)
    h = chunk_numbers(sigma, chunk, cfg, basis, geometry.readout)
    return sigma, fourier_mlp_conv(h, cfg.p)


def query_vector(chunk: CompactChunk, cfg: Config, basis: Basis) -> torch.Tensor:
    """Dense x_T (N, dim): e_= + pi_T + the ebar of the variable operands."""
    N = len(chunk)
    x = torch.zeros((N, basis.dim + 1), dtype=torch.float64)
    x[:, basis.eq] = 1.0
    x[:, basis.pos(cfg.T)] += 1.0
    x.scatter_add_(1, chunk.bars[:, cfg.T], torch.ones((N, 2), dtype=torch.float64))
    return x[:, : basis.dim]


def layer2_update(sigma2: torch.Tensor, chunk: CompactChunk, basis: Basis) -> torch.Tensor:
    """x'_T - x_T = sum_s sigma2_s W_OV2 x_s (N, dim): ebar_w weighted by the attention on
    every position holding the variable token w."""
    K, N = basis.K, sigma2.shape[0]
    var = chunk.tok - basis.v(0)
    var = torch.where((var >= 0) & (var < K), var, K)
    mass = torch.zeros((N, K + 1), dtype=sigma2.dtype).scatter_add(1, var, sigma2)[:, :K]
    lo = basis.bar_v(0)
    return nnf.pad(mass, (lo, basis.dim - lo - K))


def two_hop_forward(
    W2: torch.Tensor, W3: torch.Tensor, chunk: CompactChunk, cfg: Config, basis: Basis
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two hops: (sigma2, x'_T, sigma3, F(h)) for every sequence of a compact chunk."""
    T = cfg.T
    sigma2 = chunk_attention(W2, chunk, cfg, basis)  # scores x_T^T W2 x_s, s = 0..T
    x_T_new = query_vector(chunk, cfg, basis) + layer2_update(sigma2, chunk, basis)
    row = nnf.pad(x_T_new @ W3, (0, 1))  # (N, dim + 1); index dim -> 0
    s = key_scores(row, chunk, basis, cfg.L)
    self_score = (row[:, :-1] * x_T_new).sum(1, keepdim=True)  # key x'_T at t = T
    sigma3 = torch.softmax(torch.cat([s[:, :T], self_score], dim=1), dim=-1)
    h = chunk_numbers(sigma3, chunk, cfg, basis)  # the query carries no number
    return sigma2, x_T_new, sigma3, fourier_mlp_conv(h, cfg.p)


def forward_hops(
    weights: tuple[torch.Tensor, ...], chunk: CompactChunk, cfg: Config
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """(attention of every layer, F(h)) of the model with len(weights) (1 or 2) hops."""
    if len(weights) == 1:
        sigma, F = chunk_forward(weights[0], chunk, cfg)
        return (sigma,), F
    sigma2, _, sigma3, F = two_hop_forward(*weights, chunk, cfg, Basis.from_config(cfg))
    return (sigma2, sigma3), F
