"""Exact population loss, its gradient in W, and the leading term G1.

Population loss (eq. (4)):  L(W) = E[ logsumexp_y(xi F_y(h)) - xi F_{y*}(h) ], the
expectation an exact weighted sum over every sequence of the population (``population.py``).
Expanding in xi,  L = log p + xi * E[ mean_y F_y(h) - F_{y*}(h) ] + O(xi^2), hence

    -grad_W L(W) = xi * G1(W) + R(xi),   G1(W) = -grad_W E[ mean_y F_y(h) - F_{y*}(h) ],

and G1 is computed by autograd of that first-order term (no small-xi evaluation).
All sums are taken chunk by chunk; gradients are accumulated per chunk so memory stays
bounded.  ``kind`` is "0var", "1var", "2var" or a mapping {kind: weight} (a mixture; the
weights are normalised to sum to 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import torch

from .config import SimConfig
from .fast import ORTHOGONAL, Geometry, chunk_forward
from .model import initial_W
from .population import DEFAULT_CHUNK, CompactChunk, iter_compact

Kind = str | Mapping[str, float]
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


def cross_entropy_terms(F: torch.Tensor, labels: torch.Tensor, xi: float) -> torch.Tensor:
    """Per-sequence cross-entropy of softmax(xi F) against the labels."""
    logits = xi * F
    return torch.logsumexp(logits, dim=-1) - logits.gather(1, labels[:, None])[:, 0]


def first_order_terms(F: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-sequence d/dxi of the cross-entropy at xi = 0: mean_y F_y - F_{y*}."""
    return F.mean(dim=-1) - F.gather(1, labels[:, None])[:, 0]


PerSequence = Callable[[torch.Tensor, CompactChunk], torch.Tensor]


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
