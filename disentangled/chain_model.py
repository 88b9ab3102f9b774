"""The two-hop disentangled chain model (../shared/spec/chain.md), exactly.

Layer 2 acts at the query only (x_T = e_= + pi_T + sum ebar_v):

    x'_T = x_T + sum_{s=0..T} softmax_s(x_T^T W2 x_s) W_OV2 x_s,

W_OV2 e_w = ebar_w for every variable token w (left-hand sides, pointer right-hand sides,
variable operands) and 0 on every other basis vector.  Layer 3 is C.1's layer on the
updated query (keys x'_t = x_t for t < T, and x'_T at t = T: the query attends to itself):

    f(X) = xi F(h),   h_m = sum_t softmax_t(x'_T^T W3 x'_t) <e_{n_m}, x'_t>,

F the complex Fourier MLP (``model.fourier_mlp``).  Since W_OV2 writes only ebar_v
coordinates, the numbers read by F are those of the inputs.  Both key-query matrices start
at W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T (``model.initial_W``).

``dense_forward`` works on dense inputs (N, L, dim) (the reference); ``chain_forward`` on
compact chunks (gathers, as ``fast.py``); tests check they agree.
"""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from .basis import Basis
from .chain_config import ChainConfig
from .chain_population import ChainChunk
from .fast import chunk_attention, chunk_numbers
from .model import fourier_mlp, fourier_mlp_conv, initial_W


def initial_pair(cfg: ChainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(W2, W3) = (W^0, W^0)."""
    W0 = initial_W(cfg.sim_config())
    return W0.clone(), W0.clone()


def ov2_matrix(basis: Basis) -> torch.Tensor:
    """W_OV2 in the basis: column v{w} -> bar_v{w}, every other column 0."""
    M = torch.zeros((basis.dim, basis.dim), dtype=torch.float64)
    for w in range(basis.K):
        M[basis.bar_v(w), basis.v(w)] = 1.0
    return M


def dense_forward(
    W2: torch.Tensor, W3: torch.Tensor, inputs: torch.Tensor, basis: Basis
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sigma2 (N, L), updated query x'_T (N, dim), sigma3 (N, L), F(h) (N, p)) from dense
    inputs, by the formulas of the module docstring (einsum, complex Fourier MLP)."""
    x_T = inputs[:, -1]
    sigma2 = torch.softmax(torch.einsum("nd,de,nte->nt", x_T, W2, inputs), dim=-1)
    x_T_new = x_T + torch.einsum("nt,nte->ne", sigma2, inputs @ ov2_matrix(basis).T)
    keys = torch.cat([inputs[:, :-1], x_T_new[:, None]], dim=1)
    sigma3 = torch.softmax(torch.einsum("nd,de,nte->nt", x_T_new, W3, keys), dim=-1)
    h = torch.einsum("nt,ntm->nm", sigma3, keys[:, :, : basis.p])
    return sigma2, x_T_new, sigma3, fourier_mlp(h, basis.p)


def query_vector(chunk: ChainChunk, cfg: ChainConfig, basis: Basis) -> torch.Tensor:
    """Dense x_T (N, dim): e_= + pi_T + the ebar of the variable operands."""
    N = len(chunk)
    x = torch.zeros((N, basis.dim + 1), dtype=torch.float64)
    x[:, basis.eq] = 1.0
    x[:, basis.pos(cfg.T)] += 1.0
    x.scatter_add_(1, chunk.bars[:, cfg.T], torch.ones((N, 2), dtype=torch.float64))
    return x[:, : basis.dim]


def layer2_update(sigma2: torch.Tensor, chunk: ChainChunk, basis: Basis) -> torch.Tensor:
    """x'_T - x_T = sum_s sigma2_s W_OV2 x_s (N, dim): ebar_w weighted by the attention on
    every position holding the variable token w."""
    K, N = basis.K, sigma2.shape[0]
    var = chunk.tok - basis.v(0)
    var = torch.where((var >= 0) & (var < K), var, K)
    mass = torch.zeros((N, K + 1), dtype=sigma2.dtype).scatter_add(1, var, sigma2)[:, :K]
    lo = basis.bar_v(0)
    return nnf.pad(mass, (lo, basis.dim - lo - K))


def chain_forward(
    W2: torch.Tensor, W3: torch.Tensor, chunk: ChainChunk, cfg: ChainConfig, basis: Basis
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sigma2, x'_T, sigma3, F(h)) for every sequence of a compact chunk."""
    L, T = cfg.L, cfg.T
    sigma2 = chunk_attention(W2, chunk, cfg, basis)  # scores x_T^T W2 x_s, s = 0..T
    x_T_new = query_vector(chunk, cfg, basis) + layer2_update(sigma2, chunk, basis)
    row = nnf.pad(x_T_new @ W3, (0, 1))  # (N, dim + 1); index dim -> 0
    s = (
        row.gather(1, chunk.tok)
        + row[:, basis.pos(0) : basis.pos(0) + L]
        + row.gather(1, chunk.bars[..., 0])
        + row.gather(1, chunk.bars[..., 1])
    )
    self_score = (row[:, :-1] * x_T_new).sum(1, keepdim=True)  # key x'_T at t = T
    sigma3 = torch.softmax(torch.cat([s[:, :T], self_score], dim=1), dim=-1)
    h = chunk_numbers(sigma3, chunk, cfg, basis)  # the query carries no number
    return sigma2, x_T_new, sigma3, fourier_mlp_conv(h, cfg.p)
