"""The 2-layer model split at layer 2's input, in float64: the forward the theory comparisons
take apart (compare-qk's observations, the assumption ladder's rungs).

    w = Weights.of(model)                      # float64 copies, W_QK and W_OV by factor
    l1 = layer1(w, tokens)                     # layer-1 residuals at every position
    logits, pattern2 = layer2(w, l1.resid1)    # the last block at the answer position only

The model's own computation (the same numbers to rounding, tests/test_compare_qk.py,
tests/test_ladder.py), opened where the theory needs it: the layer-1 residual at every
position (the theorem's keys), and layer 2 at the answer with its key-query matrix free
(factors to differentiate, a perturbation P, or the query row given) and either pattern
settable. Layer 1 reads scores and values from (position, token) tables instead of forming
[B, L, d] queries and keys; these are the float operations compare-qk has always done.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from disentangled.gradient import first_order_terms
from empirical.model.config import activation

LOSSES = ("ce", "first_order")


@dataclass
class Weights:
    """float64 copies of a 2-layer, one-head model's weights, by role (W_OV1 = W_V W_O of
    layer 1, merged: only the product reaches layer 2's input). W_K1, W_K2, W_O2 None: the
    identity (merged matrices W_Q := W_Q W_K^T, W_V := W_V W_O, as the ladder stores them; no
    product with an identity is computed)."""

    W_E: Tensor
    W_pos: Tensor
    W_Q1: Tensor
    W_K1: Tensor | None
    W_OV1: Tensor
    W_Q2: Tensor
    W_K2: Tensor | None
    W_V2: Tensor
    W_O2: Tensor | None
    W_in: Tensor
    W_out: Tensor
    W_U: Tensor
    scale: float
    act_fn: str = "relu"

    @staticmethod
    def of(model) -> Weights:
        cfg = model.cfg
        cfg.require_one_head("the split forward (empirical.model.partial)")
        if cfg.n_layers != 2:
            raise ValueError(
                f"the split forward reads a 2-layer model; this one has n_layers = {cfg.n_layers}"
            )
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn

        def d(t):
            return t.detach().to(torch.float64).cpu().clone()

        return Weights(
            W_E=d(model.W_E), W_pos=d(model.W_pos), W_Q1=d(a0.W_Q[0]), W_K1=d(a0.W_K[0]),
            W_OV1=d(a0.W_V[0]) @ d(a0.W_O[0]), W_Q2=d(a1.W_Q[0]), W_K2=d(a1.W_K[0]),
            W_V2=d(a1.W_V[0]), W_O2=d(a1.W_O[0]), W_in=d(model.W_in), W_out=d(model.W_out),
            W_U=d(model.W_U), scale=float(cfg.attn_scale), act_fn=cfg.act_fn,
        )  # fmt: skip

    def to(self, dtype: torch.dtype) -> Weights:
        """The same weights in `dtype` (e.g. the model's own, for its accuracies)."""
        return Weights(**{k: v.to(dtype) if isinstance(v, Tensor) else v
                          for k, v in vars(self).items()})  # fmt: skip


def _times(x: Tensor, W: Tensor | None) -> Tensor:
    return x if W is None else x @ W


@dataclass
class Layer1:
    pattern1: Tensor  # [B, L, L]
    x: Tensor  # [B, L, d] embeddings (token + position)
    resid1: Tensor  # [B, L, d] after layer 1 (layer 2's input)


@torch.no_grad()
def layer1(w: Weights, tokens: Tensor, pattern1: Tensor | None = None) -> Layer1:
    """Layer 1 (attention only) at every position (module docstring): score(t, u; s, v) =
    (W_E[u] + W_pos[t]) W_Q W_K^T (W_E[v] + W_pos[s])^T / scale from one table, the values
    (W_E W_OV)[tok] + W_pos W_OV. `pattern1` [B, L, L]: layer 1's attention pattern set
    instead of computed (as a hook on blocks.0.attn.hook_pattern would)."""
    B, L = tokens.shape
    V, d = w.W_E.shape
    X = w.W_E[None] + w.W_pos[:L, None]  # [L, V, d]: every (position, token) input
    flat = torch.arange(L) * V + tokens  # [B, L]: row of each position's input in the table
    if pattern1 is None:
        keys = _times(X, w.W_K1).reshape(L * V, -1)
        table = ((X @ w.W_Q1).reshape(L * V, -1) @ keys.T) / w.scale
        scores = table[flat[:, :, None], flat[:, None, :]]  # [B, L, L]
        mask = torch.ones(L, L, dtype=torch.bool).tril()
        pattern1 = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    # the inputs and values per position read from their [L * V, d] tables (the same sums
    # W_E[u] + W_pos[t], done once per (position, token) instead of once per sequence)
    values = (w.W_E @ w.W_OV1)[None] + (w.W_pos[:L] @ w.W_OV1)[:, None]  # [L, V, d]
    rows = flat.reshape(-1)
    x = X.reshape(L * V, d).index_select(0, rows).view(B, L, d)
    v = values.reshape(L * V, d).index_select(0, rows).view(B, L, d)
    return Layer1(pattern1, x, x + torch.bmm(pattern1.to(v.dtype), v))


def layer2(
    w: Weights, resid1: Tensor, W_Q2: Tensor | None = None, W_K2: Tensor | None = None,
    P: Tensor | None = None, query: Tensor | None = None, pattern: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(logits [B, p], layer-2 pattern of `=` [B, L]) from layer-1 residuals, the last block
    at the answer position: W_Q2 / W_K2 replace the weights' (for autograd), P [d, d] is added
    to W_Q2 W_K2^T; `query` [B, d]: the query row x_T (W_Q2 W_K2^T + P) given instead;
    `pattern` [B, L]: `=`'s layer-2 attention given instead of computed."""
    last = resid1[:, -1]
    if pattern is None:
        if query is None:
            W_Q2 = w.W_Q2 if W_Q2 is None else W_Q2
            W_K2 = w.W_K2 if W_K2 is None else W_K2
            query = last @ W_Q2 if W_K2 is None else (last @ W_Q2) @ W_K2.T
            if P is not None:
                query = query + last @ P
        scores = torch.einsum("bd,bld->bl", query, resid1) / w.scale
        pattern = torch.softmax(scores, dim=-1)
    mid = last + _times(torch.einsum("bl,bld->bd", pattern, resid1) @ w.W_V2, w.W_O2)
    post = mid + activation(w.act_fn)(mid @ w.W_in) @ w.W_out
    return post @ w.W_U, pattern


def loss_of(logits: Tensor, labels: Tensor, kind: str) -> Tensor:
    """Mean loss of last-position logits f: "ce" cross-entropy; "first_order" mean_y f_y -
    f_{y*}, the first-order (small-output, xi -> 0) term of the cross-entropy in the logit
    scale, whose negative gradient is the theorem's G1 for the real network
    (`disentangled.gradient.first_order_terms`, the one definition)."""
    if kind == "ce":
        return F.cross_entropy(logits, labels)
    if kind == "first_order":
        return first_order_terms(logits, labels).mean()
    raise ValueError(f"loss kind must be one of {list(LOSSES)}, got {kind!r}")
