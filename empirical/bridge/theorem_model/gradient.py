"""Losses and layer-2 key-query gradients of the theorem's model, by a real forward and
backward of `AssignAddTransformer` over its whole population. Losses per sequence: "ce"
(logits = xi F) and "first_order" ((mean_y logits_y - logits_{y*}) / xi: G1(W) = -grad_W of
its expectation). Gradients take M = W_Q W_K^T itself as the leaf (W_Q := M, W_K := I), and
dL/dW = sqrt(d_head) dL/dM on its [:dim, :dim] block (docs/theorem_model.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from disentangled.gradient import weighted_expectation
from disentangled.metrics import unique_argmax_correct
from disentangled.pieces import per_sequence
from empirical.bridge.theorem_model.construct import score_matrix, set_score_matrix
from empirical.bridge.theorem_model.token_population import TokenPopulation
from empirical.model.forward import forward
from empirical.model.transformer import AssignAddTransformer

LOSSES = ("ce", "first_order")
PATHS = ("fast", "hooked")
DEFAULT_CHUNK = 4096


def _check(loss: str, path: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}: must be one of {list(LOSSES)}")
    if path not in PATHS:
        raise ValueError(f"path={path!r}: must be one of {list(PATHS)}")


def per_sequence_loss(logits: Tensor, labels: Tensor, loss: str, xi: float) -> Tensor:
    """Per-sequence loss [N] of last-position logits [N, p] (module docstring), by
    `disentangled.pieces.per_sequence`."""
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}: must be one of {list(LOSSES)}")
    return per_sequence(logits, labels, loss, xi)


def logits_with_merged(
    model: AssignAddTransformer, tokens: Tensor, M: Tensor, path: str = "fast"
) -> Tensor:
    """Last-position logits [N, p] of `model` with its last block's W_Q W_K^T replaced by M
    (as W_Q := M, W_K := I): through `fast_forward` ("fast") or the hooked forward
    ("hooked", torch.func.functional_call)."""
    last = f"blocks.{len(model.blocks) - 1}.attn"
    eye = torch.eye(M.shape[0], dtype=M.dtype)
    if path == "fast":
        weights = {n: q.detach().unsqueeze(0) for n, q in model.named_parameters()}
        weights[f"{last}.W_Q"] = M[None, None]
        weights[f"{last}.W_K"] = eye[None, None]
        return forward(weights, tokens[None], model.cfg, positions="answer")[0]
    swap = {f"{last}.W_Q": M[None], f"{last}.W_K": eye[None]}
    return torch.func.functional_call(model, swap, (tokens,), {"last_only": True})


def merged_gradient(
    model: AssignAddTransformer,
    pop: TokenPopulation,
    loss: str = "ce",
    xi: float | None = None,
    path: str = "fast",
    need_grad: bool = True,
    chunk_size: int = DEFAULT_CHUNK,
) -> tuple[float, Tensor | None]:
    """(E[loss], dE[loss]/dM [d_model, d_model] or None) over the population, M = W_Q W_K^T
    of the last block; `xi` (for "first_order") defaults to max |W_U|, the theorem model's
    logit scale (pass it when the unembedding is not the theorem's)."""
    _check(loss, path)
    if xi is None:
        xi = float(model.W_U.detach().abs().max())
    attn = model.blocks[-1].attn
    M0 = (attn.W_Q[0] @ attn.W_K[0].T).detach()

    def chunk_value(M: Tensor, chunk: tuple[Tensor, Tensor, Tensor]) -> Tensor:
        tokens, labels, weights = chunk
        logits = logits_with_merged(model, tokens, M, path)
        return (per_sequence_loss(logits, labels, loss, xi) * weights).sum()

    total, grad = weighted_expectation(M0, pop.chunks(chunk_size), chunk_value, need_grad)
    return float(total), grad


def theorem_gradient(
    model: AssignAddTransformer,
    pop: TokenPopulation,
    dim: int,
    loss: str = "ce",
    path: str = "fast",
    chunk_size: int = DEFAULT_CHUNK,
    xi: float | None = None,
) -> tuple[float, Tensor]:
    """(E[loss], dE[loss]/dW in the theorem's basis [dim, dim]), W = M / sqrt(d_head) the
    score matrix: sqrt(d_head) times the basis block of `merged_gradient` (`xi`: as there)."""
    value, grad = merged_gradient(model, pop, loss, xi, path, chunk_size=chunk_size)
    return value, model.cfg.attn_scale * grad[:dim, :dim]


def model_g1(
    model: AssignAddTransformer, pop: TokenPopulation, dim: int, path: str = "fast"
) -> Tensor:
    """G1 = -grad_W E[mean_y F_y - F_{y*}] of the model on `pop`, theorem basis [dim, dim]."""
    return -theorem_gradient(model, pop, dim, loss="first_order", path=path)[1]


def gradient_descent(
    model: AssignAddTransformer,
    pop: TokenPopulation,
    dim: int,
    steps: int,
    lr: float,
    loss: str = "ce",
    path: str = "fast",
) -> dict:
    """Full-batch gradient descent on layer 2's score matrix, W <- W - lr dL/dW, each step
    written back as W_Q = sqrt(d_head) W, W_K = I, the model updated in place. Returns
    {"loss": [L(W_0), ..., L(W_steps)], "W": [W_0, ..., W_steps]} (basis blocks [dim, dim])."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps={steps!r}: must be an integer >= 0")
    losses, Ws = [], []
    W = score_matrix(model)[:dim, :dim].clone()
    for step in range(steps + 1):
        value, grad = merged_gradient(model, pop, loss, path=path, need_grad=step < steps)
        losses.append(value)
        Ws.append(W.clone())
        if step < steps:
            W = W - lr * model.cfg.attn_scale * grad[:dim, :dim]
            set_score_matrix(model, W)
    return {"loss": losses, "W": Ws}


@torch.no_grad()
def population_accuracy(
    model: AssignAddTransformer, pop: TokenPopulation, chunk_size: int = DEFAULT_CHUNK
) -> dict[str, float]:
    """Weighted accuracy per kind ("0var", "1var", "2var" present in `pop`) of the model's
    last-position logits (fast forward), with `disentangled.metrics`' rule: correct only if
    the label is the unique argmax (ties, up to a relative 1e-9, count as wrong)."""
    correct = torch.zeros(3, dtype=torch.float64)
    total = torch.zeros(3, dtype=torch.float64)
    for start in range(0, len(pop), chunk_size):
        sl = slice(start, start + chunk_size)
        logits = model(pop.tokens[sl], fast=True)
        ok = unique_argmax_correct(logits, pop.labels[sl]).to(torch.float64)
        w, kinds = pop.weights[sl], pop.kinds[sl]
        correct.index_add_(0, kinds, w * ok)
        total.index_add_(0, kinds, w)
    return {f"{k}var": float(correct[k] / total[k]) for k in range(3) if total[k] > 0}
