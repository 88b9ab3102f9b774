"""The model f of eq. (2), on dense augmented inputs, by number of hops.

One hop (Theorem C.1):

    f(X) = xi * F(h),   h = sum_{t=0..T} sigma_t W_OV x_t,   sigma = softmax_t(x_T^T W x_t)

W_OV maps every basis vector to a fresh orthonormal vector, u_m = W_OV e_{n_m}, and F reads
only <u_m, h>, i.e. the ``n{m}`` coordinates of sum_t sigma_t x_t.  F is Gromov's complex
Fourier MLP

    z_k = sum_m w^{k m} h_m,   F(h)_y = (1/p) Re sum_k w^{-k y} z_k^2,   w = exp(2 pi i / p),

which equals the cyclic self-convolution F(h)_y = sum_{m + m' = y mod p} h_m h_m', so
F(u_a + u_b)_y = 2[y = a+b] + [y = 2a] + [y = 2b] and F(u_a)_y = [y = 2a].

Two hops (the chain, ../shared/spec/chain.md): a middle layer (W2) acts at the query only,

    x'_T = x_T + sum_{s=0..T} softmax_s(x_T^T W2 x_s) W_OV2 x_s,

W_OV2 e_w = ebar_w for every variable token w (left-hand sides, pointer right-hand sides,
variable operands) and 0 on every other basis vector; the last layer (W3) is C.1's layer on
the updated query (keys x_t for t < T, and x'_T at t = T: the query attends to itself).  Since
W_OV2 writes only ebar_v coordinates, the numbers read by F are those of the inputs.  Every
key-query matrix starts at W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T (``initial_weights``).
"""

from __future__ import annotations

import math

import torch

from .basis import Basis
from .config import ChainConfig, SimConfig


def _dft(p: int) -> torch.Tensor:
    k = torch.arange(p, dtype=torch.float64)
    return torch.polar(torch.ones(p, p, dtype=torch.float64), 2 * math.pi * torch.outer(k, k) / p)


def fourier_mlp(h_numbers: torch.Tensor, p: int) -> torch.Tensor:
    """F(h) for number coordinates h (N, p) -> real (N, p), by the complex formula."""
    D = _dft(p)  # D[k, m] = w^{k m}
    z = h_numbers.to(torch.complex128) @ D.T  # z_k = sum_m w^{km} h_m
    return (z * z @ D.conj()).real / p  # sum_k z_k^2 w^{-k y}


def fourier_mlp_conv(h_numbers: torch.Tensor, p: int) -> torch.Tensor:
    """Same F as a real cyclic self-convolution (faster; equal to ``fourier_mlp``)."""
    idx = (torch.arange(p)[:, None] - torch.arange(p)[None, :]) % p  # idx[y, m] = y - m
    return torch.einsum("nm,nym->ny", h_numbers, h_numbers[:, idx])


def fourier_mlp_weights(p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(A [p, 4p], B [4p, p]) with F(h) = (h A)^2 B: the complex Fourier MLP of eq. (2) as a
    quadratic MLP, h the p number coordinates (the weights empirical.bridge.theorem_model
    writes into the transformer's MLP). With z_k = c_k + i s_k, c_k = sum_m cos(2 pi k m / p) h_m,
    s_k = sum_m sin(2 pi k m / p) h_m: Re(w^-ky z_k^2) = cos(2 pi k y / p) (c_k^2 - s_k^2) +
    sin(2 pi k y / p) 2 c_k s_k, and 2 c_k s_k = ((c_k + s_k)^2 - (c_k - s_k)^2) / 2, so 4
    neurons per frequency (pre-activations c_k, s_k, c_k + s_k, c_k - s_k) square and B
    combines them."""
    m = torch.arange(p, dtype=torch.float64)
    angle = 2 * math.pi * torch.outer(m, m) / p  # angle[m, k] = 2 pi k m / p (symmetric)
    cos, sin = torch.cos(angle), torch.sin(angle)
    A = torch.cat([cos, sin, cos + sin, cos - sin], dim=1)  # neuron 4 blocks of p frequencies
    B = torch.cat([cos, -cos, sin / 2, -sin / 2], dim=0) / p  # [k, y] blocks
    return A, B


def initial_W(cfg: SimConfig | ChainConfig) -> torch.Tensor:
    """W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T (eq. (3)); row = query, column = key."""
    basis = Basis.from_config(cfg)
    W = torch.zeros((basis.dim, basis.dim), dtype=torch.float64)
    for t in cfg.operand_pos:
        W[basis.eq, basis.pos(t)] = cfg.beta
    return W


def initial_weights(cfg: SimConfig | ChainConfig) -> tuple[torch.Tensor, ...]:
    """One W^0 per hop: (W,) for C.1, (W2, W3) for the chain."""
    W0 = initial_W(cfg)
    return tuple(W0.clone() for _ in range(cfg.hops))


def ov2_matrix(basis: Basis) -> torch.Tensor:
    """W_OV2 in the basis: column v{w} -> bar_v{w}, every other column 0."""
    M = torch.zeros((basis.dim, basis.dim), dtype=torch.float64)
    for w in range(basis.K):
        M[basis.bar_v(w), basis.v(w)] = 1.0
    return M


def scores(W: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """score_t = x_T^T W x_t for t = 0..T (the query is the last position): (N, L)."""
    return torch.einsum("nd,de,nte->nt", inputs[:, -1], W, inputs)


def attention(W: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """sigma = softmax over t = 0..T of the scores (the query attends to itself too)."""
    return torch.softmax(scores(W, inputs), dim=-1)


def dense_forward(
    weights: tuple[torch.Tensor, ...], inputs: torch.Tensor, basis: Basis
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
    """(attention of every layer (N, L), the query after the middle hop x'_T (N, dim), F(h)
    (N, p)) of the model with len(weights) hops (module docstring; einsum, complex MLP)."""
    sigmas, x = [], inputs
    for W in weights[:-1]:  # the middle hop moves the query (and its own key)
        sigmas.append(attention(W, x))
        x_T = x[:, -1] + torch.einsum("nt,nte->ne", sigmas[-1], x @ ov2_matrix(basis).T)
        x = torch.cat([x[:, :-1], x_T[:, None]], dim=1)
    sigmas.append(attention(weights[-1], x))
    h = torch.einsum("nt,ntm->nm", sigmas[-1], x[:, :, : basis.p])
    return tuple(sigmas), x[:, -1], fourier_mlp(h, basis.p)


def forward(W: torch.Tensor, inputs: torch.Tensor, xi: float, basis: Basis) -> torch.Tensor:
    """Logits f(X) = xi * F(h) of the one-hop model: (N, p)."""
    return xi * dense_forward((W,), inputs, basis)[2]
