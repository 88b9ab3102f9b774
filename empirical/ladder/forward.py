"""A ladder rung's forward at the query position, its losses and its layer-2 key-query
gradient, from the rung model's merged weights (`weights.Merged`).

Only the query at the last position (`=`) reaches the logits, so layer 2 is computed for that
query alone from the layer-1 residuals (as compare-qk's observe.py does); the numbers equal
the model's own hooked forward (`hooked_logits`, tested). Layer 1 is either the model's
softmax head or, for the theorem's rungs, the theorem's routing written into its attention
pattern (`routing_pattern`, the same hook point TransformerLens users patch).

The theorem's routing on any layout of the task (eq. 1 of theorem_c1.md): an assigned number
(a number right after a variable in the assignment region) attends 1/2 to its variable and 1/2
to itself; the query `=` 1/2 to each operand; every other position attends to itself, except
a variable outside those roles, whose row is 0 (layer 1 writes nothing there). With layer 1's
value-output e_{v_u} -> 2 ebar_u and 0 for every other token and position, an assigned number
gets ebar of its variable, the query ebar_v1 + ebar_v2, nothing else is written. A softmax head
cannot leave a variable at position 0 untouched (it can only attend to itself), hence the
pattern is set rather than computed (empirical/theorem_model/layout.py has the same
obstruction for the theorem's own layout, solved there by reordering the positions).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from empirical.ladder.weights import Merged
from empirical.model.config import activation

LOSSES = ("first_order", "ce")


def routing_pattern(tokens: Tensor, p: int, K: int) -> Tensor:
    """[B, L, L] layer-1 attention of the theorem's routing (module docstring)."""
    B, L = tokens.shape
    is_var = (tokens >= p) & (tokens < p + K)
    is_num = tokens < p
    pat = torch.zeros((B, L, L), dtype=torch.float64)
    idx = torch.arange(L)
    pat[:, idx, idx] = (~is_var).to(torch.float64)
    region = L - 4
    for t in range(1, region):
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

    @torch.no_grad()
    def layer1(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """([B, L, d] layer-1 residuals (layer 2's input), [B, L, d] their layer-2 values
        resid1 @ OV2). The input at position t is W_E[tok] + W_pos[t], so the layer-1
        scores and both value maps are tables over (position, token) pairs, gathered (the
        same numbers as the direct products, to rounding)."""
        w = self.w
        L = tokens.shape[1]
        V = w.W_E.shape[0]
        x = w.W_E[tokens] + w.W_pos[:L]
        if self.routing:
            pattern = routing_pattern(tokens, self.p, self.K)
        else:
            X = (w.W_E[None] + w.W_pos[:L, None]).reshape(L * V, -1)
            table = (X @ w.QK1) @ X.T / w.scale
            flat = torch.arange(L) * V + tokens
            scores = table[flat[:, :, None], flat[:, None, :]]
            mask = torch.ones(L, L, dtype=torch.bool).tril()
            pattern = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        E1, P1 = w.W_E @ w.OV1, w.W_pos[:L] @ w.OV1
        v1 = E1[tokens] + P1
        resid1 = x + torch.bmm(pattern, v1)
        v2 = (w.W_E @ w.OV2)[tokens] + w.W_pos[:L] @ w.OV2
        values = v2 + torch.bmm(pattern, (E1 @ w.OV2)[tokens] + P1 @ w.OV2)
        return resid1, values

    def resid1(self, tokens: Tensor) -> Tensor:
        """[B, L, d] layer-1 residuals (layer 2's input)."""
        return self.layer1(tokens)[0]

    def head(self, resid1: Tensor, QK2: Tensor | None = None, values: Tensor | None = None):
        """(logits [B, p], layer-2 pattern of `=` [B, L]) with layer-2 score matrix QK2
        (default the rung's); values: resid1 @ OV2 when already computed."""
        M = self.w.QK2 if QK2 is None else QK2
        return self.head_from_query(resid1, resid1[:, -1] @ M, values)

    def head_from_query(self, resid1: Tensor, query: Tensor, values: Tensor | None = None):
        """`head` with the query row x_T QK2 [B, d] given (linear in QK2: a step's query is
        the sum of the two, so a grid of steps needs no new matrix product)."""
        w = self.w
        last = resid1[:, -1]
        scores = torch.einsum("bd,bld->bl", query, resid1) / w.scale
        pattern = torch.softmax(scores, dim=-1)
        v = resid1 @ w.OV2 if values is None else values
        mid = last + torch.einsum("bl,bld->bd", pattern, v)
        post = mid + activation(w.act_fn)(mid @ w.W_in) @ w.W_out
        return post @ w.W_U, pattern

    def logits(self, tokens: Tensor) -> Tensor:
        with torch.no_grad():
            resid1, values = self.layer1(tokens)
            return self.head(resid1, values=values)[0]


def loss_of(logits: Tensor, labels: Tensor, loss: str) -> Tensor:
    """Mean loss: 'ce' cross-entropy; 'first_order' mean_y f_y - f_{y*} (the theorem's linear
    loss, whose negative gradient is G1; logits = f)."""
    target = logits.gather(1, labels[:, None])[:, 0]
    if loss == "ce":
        return (torch.logsumexp(logits, dim=-1) - target).mean()
    if loss == "first_order":
        return (logits.mean(dim=-1) - target).mean()
    raise ValueError(f"loss={loss!r}: must be one of {list(LOSSES)}")


def qk_gradient(fwd: Forward, resid1: Tensor, labels: Tensor, loss: str, values=None):
    """(loss value, dL/dQK2 [d, d], layer-2 pattern of `=` [B, L]): autograd with the merged
    layer-2 matrix itself as the leaf (the theorem's parameter); values: resid1 @ OV2."""
    M = fwd.w.QK2.clone().requires_grad_(True)
    logits, pattern = fwd.head(resid1, M, values)
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
