"""Exact population loss of the chain model, its gradients in W2 and W3, and the
first-order terms (the xi -> 0 coefficients), as ``gradient.py`` does for Theorem C.1.

    L(W2, W3) = E[ logsumexp_y(xi F_y) - xi F_{y*} ],
    -grad L = xi (G1^(2), G1^(3)) + O(xi^2),   G1^(j) = -grad_{Wj} E[ mean_y F_y - F_{y*} ],

the expectation an exact weighted sum over the populations of a mixture of kinds
({kind: weight}, normalised; default the config's ``training_mix``).  Gradients by autograd
in float64.  ``w2_drive`` is d/d eta3 of G1^(2)(W^0, W^0 + eta3 G) at eta3 = 0 (second-order
autograd of the exact population expectation), the leading term of the middle hop's gradient
after one step of W3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from .basis import Basis
from .chain_config import ChainConfig
from .chain_model import chain_forward, initial_pair
from .chain_population import chain_population
from .gradient import cross_entropy_terms, first_order_terms

Mix = str | Mapping[str, float] | None
PerSequence = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def chain_mixture(cfg: ChainConfig, mix: Mix = None) -> list[tuple[str, float]]:
    """Normalised [(kind, weight)]: a kind, a mapping, or None for ``cfg.training_mix()``."""
    if mix is None:
        return list(cfg.training_mix().items())
    if isinstance(mix, str):
        return [(mix, 1.0)]
    items = [(k, float(w)) for k, w in mix.items() if float(w) != 0.0]
    total = sum(w for _, w in items)
    if not items or total <= 0 or any(w < 0 for _, w in items):
        raise ValueError(f"mixture weights must be >= 0 with a positive sum, got {dict(mix)}")
    return [(k, w / total) for k, w in items]


def chain_expectation(
    W2: torch.Tensor, W3: torch.Tensor, cfg: ChainConfig, mix: Mix, per_sequence: PerSequence
) -> torch.Tensor:
    """E[per_sequence(F(h), y*)] over the mixture, differentiable in W2 and W3."""
    basis = Basis(cfg.p, cfg.K, cfg.L)
    total = torch.zeros((), dtype=torch.float64)
    for kind, weight in chain_mixture(cfg, mix):
        chunk = chain_population(cfg, kind)
        _, _, _, F = chain_forward(W2, W3, chunk, cfg, basis)
        total = total + weight * (per_sequence(F, chunk.labels) * chunk.weights).sum()
    return total


def _value_and_grads(W2, W3, cfg, mix, per_sequence):
    W2l = W2.detach().requires_grad_(True)
    W3l = W3.detach().requires_grad_(True)
    value = chain_expectation(W2l, W3l, cfg, mix, per_sequence)
    g2, g3 = torch.autograd.grad(value, (W2l, W3l))
    return value.detach(), g2, g3


def chain_loss(W2, W3, cfg: ChainConfig, xi: float, mix: Mix = None) -> float:
    """Exact population cross-entropy at output scale xi."""
    with torch.no_grad():
        return float(
            chain_expectation(W2, W3, cfg, mix, lambda F, y: cross_entropy_terms(F, y, xi))
        )


def chain_gradients(
    W2, W3, cfg: ChainConfig, xi: float, mix: Mix = None
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(loss, grad_W2 L, grad_W3 L) of the exact population cross-entropy."""
    value, g2, g3 = _value_and_grads(W2, W3, cfg, mix, lambda F, y: cross_entropy_terms(F, y, xi))
    return float(value), g2, g3


def chain_g1(
    cfg: ChainConfig, mix: Mix = None, W2=None, W3=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(G1^(2), G1^(3)) = -grad of E[mean_y F_y - F_{y*}] in (W2, W3); default (W^0, W^0)."""
    W2d, W3d = initial_pair(cfg)
    W2 = W2d if W2 is None else W2
    W3 = W3d if W3 is None else W3
    _, g2, g3 = _value_and_grads(W2, W3, cfg, mix, first_order_terms)
    return -g2, -g3


def chain_first_order_term(cfg: ChainConfig, W2, W3, mix: Mix = None) -> float:
    """E[mean_y F_y - F_{y*}] = dL/dxi at xi = 0."""
    with torch.no_grad():
        return float(chain_expectation(W2, W3, cfg, mix, first_order_terms))


def w2_drive(cfg: ChainConfig, G3: torch.Tensor, mix: Mix = None, W2=None) -> torch.Tensor:
    """D = d/d eta3 G1^(2)(W2, W^0 + eta3 G3) at eta3 = 0 (W2 defaults to W^0): the
    leading term in eta3 of the middle hop's first-order gradient, exact (second-order
    autograd, no finite difference): with l the first-order loss,
    D = -d/dW2 (d l / d eta3) = -d/dW2 <grad_W3 l, G3>, mixed partials commuting."""
    W2d, W3_0 = initial_pair(cfg)
    W2l = (W2d if W2 is None else W2).detach().requires_grad_(True)
    eta = torch.zeros((), dtype=torch.float64, requires_grad=True)
    value = chain_expectation(W2l, W3_0 + eta * G3.detach(), cfg, mix, first_order_terms)
    (d_eta,) = torch.autograd.grad(value, eta, create_graph=True)
    (D,) = torch.autograd.grad(d_eta, W2l)
    return -D
