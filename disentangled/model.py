"""The one-layer model f of eq. (2), on dense augmented inputs.

    f(X) = xi * F(h),   h = sum_{t=0..T} sigma_t W_OV x_t,   sigma = softmax_t(x_T^T W x_t)

W_OV maps every basis vector to a fresh orthonormal vector, u_m = W_OV e_{n_m}, and F reads
only <u_m, h>, i.e. the ``n{m}`` coordinates of sum_t sigma_t x_t.  F is Gromov's complex
Fourier MLP

    z_k = sum_m w^{k m} h_m,   F(h)_y = (1/p) Re sum_k w^{-k y} z_k^2,   w = exp(2 pi i / p),

which equals the cyclic self-convolution F(h)_y = sum_{m + m' = y mod p} h_m h_m', so
F(u_a + u_b)_y = 2[y = a+b] + [y = 2a] + [y = 2b] and F(u_a)_y = [y = 2a].
"""

from __future__ import annotations

import math

import torch

from .basis import Basis
from .config import SimConfig


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


def initial_W(cfg: SimConfig) -> torch.Tensor:
    """W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T (eq. (3)); row = query, column = key."""
    basis = Basis.from_config(cfg)
    W = torch.zeros((basis.dim, basis.dim), dtype=torch.float64)
    for t in cfg.operand_pos:
        W[basis.eq, basis.pos(t)] = cfg.beta
    return W


def scores(W: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """score_t = x_T^T W x_t for t = 0..T (the query is the last position): (N, L)."""
    return torch.einsum("nd,de,nte->nt", inputs[:, -1], W, inputs)


def attention(W: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """sigma = softmax over t = 0..T of the scores (the query attends to itself too)."""
    return torch.softmax(scores(W, inputs), dim=-1)


def hidden_numbers(W: torch.Tensor, inputs: torch.Tensor, basis: Basis) -> torch.Tensor:
    """<u_m, h> = sum_t sigma_t <e_{n_m}, x_t>: (N, p)."""
    sigma = attention(W, inputs)
    return torch.einsum("nt,ntm->nm", sigma, inputs[:, :, : basis.p])


def forward(W: torch.Tensor, inputs: torch.Tensor, xi: float, basis: Basis) -> torch.Tensor:
    """Logits f(X) = xi * F(h): (N, p)."""
    return xi * fourier_mlp(hidden_numbers(W, inputs, basis), basis.p)
