"""Exact population loss, its gradient in the key-query matrices, and the leading term G1.

Population loss (eq. (4)):  L = E[ logsumexp_y(xi F_y(h)) - xi F_{y*}(h) ], the expectation
an exact weighted sum over every sequence of the population (``population.py``).  Expanding
in xi,  L = log p + xi * E[ mean_y F_y(h) - F_{y*}(h) ] + O(xi^2), hence for every key-query
matrix W (W for C.1; W2, W3 for the two-hop chain)

    -grad_W L = xi * G1 + R(xi),   G1 = -grad_W E[ mean_y F_y(h) - F_{y*}(h) ],

and G1 is computed by autograd of that first-order term (no small-xi evaluation).  ``kind``
(or ``mix``) is a kind or a mapping {kind: weight} (a mixture; the weights are normalised to
sum to 1; None: the config's ``training_mix``).

Two families of functions:

* one matrix (C.1: ``population_loss``, ``population_gradient``, ``g1``, ``remainder``): sums
  taken chunk by chunk, gradients accumulated per chunk so memory stays bounded, any
  ``Geometry`` (random embeddings);
* every matrix of a model with ``cfg.hops`` hops (``loss_and_gradients``,
  ``first_order_gradients``, ``w2_drive``): one autograd graph over the whole populations
  (``whole_population``), so that second derivatives are exact too.  ``w2_drive`` is
  d/d eta3 of G1^(2)(W^0, W^0 + eta3 G) at eta3 = 0 (second-order autograd), the leading term
  of the chain's middle-hop gradient after one step of W3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import torch

from .config import ChainConfig, SimConfig
from .fast import ORTHOGONAL, Geometry, chunk_forward, forward_hops
from .model import initial_W, initial_weights
from .population import DEFAULT_CHUNK, CompactChunk, iter_compact, whole_population

Kind = str | Mapping[str, float]
Mix = Kind | None
Weights = tuple[torch.Tensor, ...]
T = TypeVar("T")


def mixture(kind: Kind) -> list[tuple[str, float]]:
    """Normalised list of (kind, weight)."""
    if isinstance(kind, str):
        return [(kind, 1.0)]
    items = [(k, float(w)) for k, w in kind.items() if float(w) != 0.0]
    total = sum(w for _, w in items)
    if not items or total <= 0 or any(w < 0 for _, w in items):
        raise ValueError(f"mixture weights must be >= 0 with a positive sum, got {dict(kind)}")
    return [(k, w / total) for k, w in items]


def training_mixture(cfg: SimConfig | ChainConfig, mix: Mix = None) -> list[tuple[str, float]]:
    """Normalised [(kind, weight)]: a kind, a mapping, or None for ``cfg.training_mix()``."""
    return list(cfg.training_mix().items()) if mix is None else mixture(mix)


def cross_entropy_terms(F: torch.Tensor, labels: torch.Tensor, xi: float) -> torch.Tensor:
    """Per-sequence cross-entropy of softmax(xi F) against the labels."""
    logits = xi * F
    return torch.logsumexp(logits, dim=-1) - logits.gather(1, labels[:, None])[:, 0]


def first_order_terms(F: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-sequence d/dxi of the cross-entropy at xi = 0: mean_y F_y - F_{y*}."""
    return F.mean(dim=-1) - F.gather(1, labels[:, None])[:, 0]


PerSequence = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def weighted_expectation(
    W: torch.Tensor,
    chunks: Iterable[T],
    chunk_value: Callable[[torch.Tensor, T], torch.Tensor],
    need_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(sum over chunks of chunk_value(W, chunk), and its gradient in W when `need_grad`), one
    chunk at a time: each chunk's value is differentiated on its own (bounded memory) and the
    gradients are summed. The one population expectation of the theorem's model, for the
    simulator here and for the transformer that writes it (empirical.bridge.theorem_model)."""
    value = torch.zeros((), dtype=torch.float64)
    grad = torch.zeros_like(W) if need_grad else None
    for chunk in chunks:
        with torch.set_grad_enabled(need_grad):
            Wl = W.detach().requires_grad_(need_grad)
            val = chunk_value(Wl, chunk)
            if need_grad:
                (g,) = torch.autograd.grad(val, Wl)
                grad += g
        value += val.detach()
    return value, grad


def expectation_and_grad(
    W: torch.Tensor,
    cfg: SimConfig,
    kind: Kind,
    per_sequence: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    geometry: Geometry = ORTHOGONAL,
    need_grad: bool = True,
    chunk_size: int = DEFAULT_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """E[per_sequence(F(h), y*)] over the population and (optionally) its gradient in W."""

    def chunk_value(Wl: torch.Tensor, item: tuple[float, CompactChunk]) -> torch.Tensor:
        wk, chunk = item
        _, F = chunk_forward(Wl, chunk, cfg, geometry)
        return wk * (per_sequence(F, chunk.labels) * chunk.weights).sum()

    chunks = ((wk, chunk) for k, wk in mixture(kind) for chunk in iter_compact(cfg, k, chunk_size))
    return weighted_expectation(W, chunks, chunk_value, need_grad)


class _Expectation(torch.autograd.Function):
    """Scalar expectation whose backward returns the chunk-accumulated exact gradient."""

    @staticmethod
    def forward(ctx, W, cfg, kind, per_sequence, geometry, chunk_size):
        value, grad = expectation_and_grad(W, cfg, kind, per_sequence, geometry, True, chunk_size)
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None, None, None, None


def population_loss(
    W: torch.Tensor,
    cfg: SimConfig,
    xi: float,
    kind: Kind = "1var",
    geometry: Geometry = ORTHOGONAL,
    chunk_size: int = DEFAULT_CHUNK,
) -> torch.Tensor:
    """Exact population cross-entropy; differentiable in W (first derivatives only)."""

    def ce(F, y):
        return cross_entropy_terms(F, y, xi)

    if W.requires_grad and torch.is_grad_enabled():
        return _Expectation.apply(W, cfg, kind, ce, geometry, chunk_size)
    return expectation_and_grad(W, cfg, kind, ce, geometry, False, chunk_size)[0]


def population_gradient(
    W: torch.Tensor,
    cfg: SimConfig,
    xi: float,
    kind: Kind = "1var",
    geometry: Geometry = ORTHOGONAL,
    chunk_size: int = DEFAULT_CHUNK,
) -> torch.Tensor:
    """grad_W of the exact population loss at ``W`` (dim, dim)."""
    _, grad = expectation_and_grad(
        W, cfg, kind, lambda F, y: cross_entropy_terms(F, y, xi), geometry, True, chunk_size
    )
    return grad


def first_order_term(
    W: torch.Tensor, cfg: SimConfig, kind: Kind = "1var", geometry: Geometry = ORTHOGONAL
) -> torch.Tensor:
    """E[mean_y F_y(h) - F_{y*}(h)] = dL/dxi at xi = 0 (no gradient)."""
    return expectation_and_grad(W, cfg, kind, first_order_terms, geometry, False)[0]


def g1(
    cfg: SimConfig,
    kind: Kind = "1var",
    W: torch.Tensor | None = None,
    geometry: Geometry = ORTHOGONAL,
) -> torch.Tensor:
    """G1(W) = -grad_W E[mean_y F_y - F_{y*}]; W defaults to W^0 = initial_W(cfg)."""
    if W is None:
        W = initial_W(cfg)
    return -expectation_and_grad(W, cfg, kind, first_order_terms, geometry, True)[1]


def remainder(
    cfg: SimConfig, xi: float, kind: Kind = "1var", W: torch.Tensor | None = None
) -> torch.Tensor:
    """R(xi) = -grad L(W) - xi G1(W) (W defaults to W^0)."""
    if W is None:
        W = initial_W(cfg)
    return -population_gradient(W, cfg, xi, kind) - xi * g1(cfg, kind, W)


# ----------------------------------------------------------------------------------------
# Every matrix of the model (one per hop), whole populations


def expectation(
    weights: Weights, cfg: SimConfig | ChainConfig, mix: Mix, per_sequence: PerSequence
) -> torch.Tensor:
    """E[per_sequence(F(h), y*)] over the mixture, differentiable in every matrix."""
    total = torch.zeros((), dtype=torch.float64)
    for kind, weight in training_mixture(cfg, mix):
        chunk = whole_population(cfg, kind)
        _, F = forward_hops(weights, chunk, cfg)
        total = total + weight * (per_sequence(F, chunk.labels) * chunk.weights).sum()
    return total


def _value_and_grads(weights: Weights, cfg, mix: Mix, per_sequence) -> tuple[torch.Tensor, Weights]:
    leaves = tuple(W.detach().requires_grad_(True) for W in weights)
    value = expectation(leaves, cfg, mix, per_sequence)
    return value.detach(), torch.autograd.grad(value, leaves)


def loss(weights: Weights, cfg, xi: float, mix: Mix = None) -> float:
    """Exact population cross-entropy at output scale xi."""
    with torch.no_grad():
        return float(expectation(weights, cfg, mix, lambda F, y: cross_entropy_terms(F, y, xi)))


def loss_and_gradients(weights: Weights, cfg, xi: float, mix: Mix = None) -> tuple[float, Weights]:
    """(loss, (grad_W L for every matrix)) of the exact population cross-entropy."""
    value, grads = _value_and_grads(weights, cfg, mix, lambda F, y: cross_entropy_terms(F, y, xi))
    return float(value), grads


def first_order_gradients(cfg, mix: Mix = None, weights: Weights | None = None) -> Weights:
    """G1 of every matrix, -grad of E[mean_y F_y - F_{y*}] ((G1^(2), G1^(3)) for the chain);
    ``weights`` default to W^0 for every matrix."""
    weights = initial_weights(cfg) if weights is None else weights
    return tuple(-g for g in _value_and_grads(weights, cfg, mix, first_order_terms)[1])


def first_order_value(cfg, weights: Weights, mix: Mix = None) -> float:
    """E[mean_y F_y - F_{y*}] = dL/dxi at xi = 0."""
    with torch.no_grad():
        return float(expectation(weights, cfg, mix, first_order_terms))


def w2_drive(cfg: ChainConfig, G3: torch.Tensor, mix: Mix = None, W2=None) -> torch.Tensor:
    """D = d/d eta3 G1^(2)(W2, W^0 + eta3 G3) at eta3 = 0 (W2 defaults to W^0): the
    leading term in eta3 of the middle hop's first-order gradient, exact (second-order
    autograd, no finite difference): with l the first-order loss,
    D = -d/dW2 (d l / d eta3) = -d/dW2 <grad_W3 l, G3>, mixed partials commuting."""
    W2d, W3_0 = initial_weights(cfg)
    W2l = (W2d if W2 is None else W2).detach().requires_grad_(True)
    eta = torch.zeros((), dtype=torch.float64, requires_grad=True)
    value = expectation((W2l, W3_0 + eta * G3.detach()), cfg, mix, first_order_terms)
    (d_eta,) = torch.autograd.grad(value, eta, create_graph=True)
    (D,) = torch.autograd.grad(d_eta, W2l)
    return -D
