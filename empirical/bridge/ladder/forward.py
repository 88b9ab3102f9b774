"""A ladder rung's forward at the query position, its losses and its layer-2 key-query
gradient, from its merged weights (`weights.Merged`; docs/ladder.md): the model split at
layer 2's input (empirical.model.partial), equal to its own hooked forward (`hooked_logits`).
Layer 1 is the model's softmax head or the theorem's routing as its pattern (`routing_pattern`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from empirical.bridge.ladder.weights import Merged
from empirical.model import partial
from empirical.model.partial import LOSSES, loss_of

__all__ = ["LOSSES", "Forward", "hooked_logits", "loss_of", "qk_gradient", "routing_pattern"]


def routing_pattern(tokens: Tensor, p: int, K: int) -> Tensor:
    """[B, L, L] layer-1 attention of the theorem's routing (eq. 1 of theorem_c1.md): an
    assigned number (right after a variable) 1/2 to its variable and 1/2 to itself, the query
    `=` 1/2 to each operand, every other position to itself but a variable outside those roles
    (row 0)."""
    B, L = tokens.shape
    is_var = (tokens >= p) & (tokens < p + K)
    is_num = tokens < p
    pat = torch.zeros((B, L, L), dtype=torch.float64)
    idx = torch.arange(L)
    pat[:, idx, idx] = (~is_var).to(torch.float64)
    for t in range(1, L - 4):  # the assignment region
        bound = is_num[:, t] & is_var[:, t - 1]
        pat[bound, t, t - 1] = 0.5
        pat[bound, t, t] = 0.5
    pat[:, L - 1] = 0.0
    pat[:, L - 1, L - 3] = 0.5
    pat[:, L - 1, L - 2] = 0.5
    return pat


@dataclass
class Forward:
    """The rung's forward: merged weights, whether layer 1 is the theorem's routing, and
    (p, K) of the vocabulary."""

    w: Merged
    routing: bool
    p: int
    K: int

    def __post_init__(self) -> None:
        w = self.w
        self.split = partial.Weights(
            W_E=w.W_E, W_pos=w.W_pos, W_Q1=w.QK1, W_K1=None, W_OV1=w.OV1, W_Q2=w.QK2, W_K2=None,
            W_V2=w.OV2, W_O2=None, W_in=w.W_in, W_out=w.W_out, W_U=w.W_U, scale=w.scale,
            act_fn=w.act_fn,
        )  # fmt: skip

    @torch.no_grad()
    def resid1(self, tokens: Tensor) -> Tensor:
        """[B, L, d] layer-1 residuals (layer 2's input)."""
        pattern = routing_pattern(tokens, self.p, self.K) if self.routing else None
        return partial.layer1(self.split, tokens, pattern).resid1

    def head(self, resid1: Tensor, QK2: Tensor | None = None):
        """(logits [B, p], layer-2 pattern of `=` [B, L]) with layer-2 score matrix QK2
        (default the rung's; autograd flows into it)."""
        return partial.layer2(self.split, resid1, W_Q2=QK2)

    def head_from_query(self, resid1: Tensor, query: Tensor):
        """`head` with the query row x_T QK2 [B, d] given (linear in QK2: a step's query is
        the sum of the two, so a grid of steps needs no new matrix product)."""
        return partial.layer2(self.split, resid1, query=query)

    def logits(self, tokens: Tensor) -> Tensor:
        with torch.no_grad():
            return self.head(self.resid1(tokens))[0]


def qk_gradient(fwd: Forward, resid1: Tensor, labels: Tensor, loss: str):
    """(loss value, dL/dQK2 [d, d], layer-2 pattern of `=` [B, L]): autograd with the merged
    layer-2 matrix itself as the leaf (the theorem's parameter)."""
    M = fwd.w.QK2.clone().requires_grad_(True)
    logits, pattern = fwd.head(resid1, M)
    value = loss_of(logits, labels, loss)
    (g,) = torch.autograd.grad(value, M)
    return float(value.detach()), g, pattern.detach()


def hooked_logits(model, tokens: Tensor, routing: bool, p: int, K: int) -> Tensor:
    """Last-position logits of the rung model's own hooked forward (TransformerLens hooks):
    with `routing`, layer 1's pattern is replaced by `routing_pattern` at
    blocks.0.attn.hook_pattern."""
    if not routing:
        with torch.no_grad():
            return model(tokens)[:, -1]
    pat = routing_pattern(tokens, p, K)[:, None]

    def set_pattern(pattern, hook):
        return pat.to(pattern.dtype)

    with torch.no_grad():
        out = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", set_pattern)])
    return out[:, -1]
