"""The two-hop theory's predictions on a chain run's own sequences (docs/compare_qk.md,
"Deeper models (chain runs)", "The predictions"): the disentangled chain model, exact in
float64, at W^0(beta) = beta e_= (pi_{L-3} + pi_{L-2})^T per layer; by autograd on the
first-order loss, G1^(3) = -dl/dW3 (the last hop), G1^(2) = -dl/dW2 (0 in theory) and
D = d/d eta3 G1^(2)(W^0, W^0 + eta3 G1^(3)) (the middle hop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from disentangled.basis import Basis
from disentangled.config import ChainConfig
from disentangled.fast import two_hop_forward as chain_forward
from disentangled.gradient import first_order_terms
from disentangled.population import CompactChunk as ChainChunk
from empirical.studies.chain.analysis.qk_coords import label_block


@dataclass
class ChainPrediction:
    """Label-space blocks (rows `coords.row_labels`, columns `coords.col_labels`)."""

    G3: np.ndarray  # G1^(3): the last hop
    D: np.ndarray  # the middle hop's leading term after one W3 step
    G2_norm: float  # |G1^(2)| at (W^0, W^0): 0 to rounding (the theory)
    beta2: float
    beta3: float


def beta_of(a: float, L: int) -> float:
    """log(a / b), b = (1 - 2a) / (L - 2): the beta of W^0 whose softmax puts a on each operand."""
    b = (1.0 - 2.0 * a) / (L - 2)
    if not (0.0 < a < 0.5):
        raise ValueError(f"operand attention a = {a} must be in (0, 1/2)")
    return math.log(a / b)


def start_matrix(basis: Basis, L: int, beta: float) -> torch.Tensor:
    W = torch.zeros((basis.dim, basis.dim), dtype=torch.float64)
    W[basis.eq, basis.pos(L - 3)] = beta
    W[basis.eq, basis.pos(L - 2)] = beta
    return W


def first_order_loss(W2, W3, chunks: list[ChainChunk], cfg: ChainConfig, basis: Basis):
    total = torch.zeros((), dtype=torch.float64)
    for chunk in chunks:
        _, _, _, F = chain_forward(W2, W3, chunk, cfg, basis)
        total = total + (first_order_terms(F, chunk.labels) * chunk.weights).sum()
    return total


def chain_prediction(
    chunks: list[ChainChunk], p: int, K: int, L: int, beta2: float, beta3: float
) -> ChainPrediction:
    """G1^(3), D and |G1^(2)| on `chunks` (weights summing to 1) at W^0(beta2), W^0(beta3)."""
    cfg, basis = ChainConfig(p=p, K=K, L=L, pointers=1, beta=1.0), Basis(p, K, L)
    W2 = start_matrix(basis, L, beta2).requires_grad_(True)
    W3 = start_matrix(basis, L, beta3).requires_grad_(True)
    value = first_order_loss(W2, W3, chunks, cfg, basis)
    g2, g3 = torch.autograd.grad(value, (W2, W3), create_graph=True)
    G3 = -g3.detach()
    # D = -d/dW2 <dl/dW3, G3>: the mixed second derivative along G3
    (dD,) = torch.autograd.grad((g3 * G3).sum(), W2)
    return ChainPrediction(
        G3=label_block(G3, basis, L).numpy(),
        D=label_block(-dD.detach(), basis, L).numpy(),
        G2_norm=float(g2.detach().norm()),
        beta2=beta2,
        beta3=beta3,
    )
