"""Fast exact evaluation of the model on compact chunks (same numbers as ``model.forward``).

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
from .config import SimConfig
from .model import fourier_mlp_conv
from .population import CompactChunk


class Geometry:
    """Orthogonal embeddings: W acts directly on basis coordinates; <u_m, W_OV x> = x[n_m]."""

    readout: torch.Tensor | None = None

    def effective_W(self, W: torch.Tensor) -> torch.Tensor:
        return W


ORTHOGONAL = Geometry()


def chunk_attention(
    W_eff: torch.Tensor, chunk: CompactChunk, cfg: SimConfig, basis: Basis
) -> torch.Tensor:
    """sigma (N, L) for basis-coordinate key-query matrix ``W_eff``."""
    L, T = cfg.L, cfg.T
    Wp = nnf.pad(W_eff, (0, 1, 0, 1))  # index dim = "no component" -> 0
    q_bars = chunk.bars[:, T]  # (N, 2)
    r = Wp[basis.eq] + Wp[basis.pos(T)] + Wp[q_bars[:, 0]] + Wp[q_bars[:, 1]]  # (N, dim+1)
    s = (
        r.gather(1, chunk.tok)
        + r[:, basis.pos(0) : basis.pos(0) + L]
        + r.gather(1, chunk.bars[..., 0])
        + r.gather(1, chunk.bars[..., 1])
    )
    return torch.softmax(s, dim=-1)


def chunk_numbers(
    sigma: torch.Tensor,
    chunk: CompactChunk,
    cfg: SimConfig,
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
    W: torch.Tensor, chunk: CompactChunk, cfg: SimConfig, geometry: Geometry = ORTHOGONAL
) -> tuple[torch.Tensor, torch.Tensor]:
    """(sigma (N, L), F(h) (N, p)) for every sequence of the chunk."""
    basis = Basis.from_config(cfg)
    sigma = chunk_attention(geometry.effective_W(W), chunk, cfg, basis)
    h = chunk_numbers(sigma, chunk, cfg, basis, geometry.readout)
    return sigma, fourier_mlp_conv(h, cfg.p)
