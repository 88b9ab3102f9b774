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
[B, L, d] queries and keys; these are the float operations compare-qk has always done. The
attention (mask, pattern, value mix, heads) is `empirical.model.attention`'s. Heads: a
per-head weight is one head's matrix ([d, e], a one-head model's: patterns [B, L, L], [B, L])
or every head's ([h, d, e]: patterns [B, h, L, L], [B, h, L]); inputs follow the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from disentangled.gradient import first_order_terms
from empirical.config.io import ConfigError
from empirical.model import attention
from empirical.model.config import activation

LOSSES = ("ce", "first_order")


@dataclass
class Weights:
    """float64 copies of a 2-layer model's weights, by role (W_OV1 = W_V W_O of layer 1,
    merged: only the product reaches layer 2's input); the attention weights per head (module
    docstring). W_K1, W_K2, W_O2 None: the identity (merged matrices W_Q := W_Q W_K^T,
    W_V := W_V W_O, as the ladder stores them; no product with an identity is computed)."""

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
    attention: str = "softmax"  # model.attention: one whose value mix is linear in the values

    @staticmethod
    def of(model) -> Weights:
        cfg = model.cfg
        if cfg.n_layers != 2:
            raise ValueError(
                f"the split forward reads a 2-layer model; this one has n_layers = {cfg.n_layers}"
            )
        if cfg.attention not in attention.LINEAR_MIX_KINDS:
            raise ConfigError(
                f"the split forward merges W_V W_O, a value mix linear in the values; this "
                f"model has model.attention = {cfg.attention!r} (use the hooked model)"
            )
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn

        def d(t):
            return t.detach().to(torch.float64).cpu().clone()

        def h(t):  # one head: its matrix; more: every head's
            return d(t[0] if cfg.n_heads == 1 else t)

        return Weights(
            W_E=d(model.W_E), W_pos=d(model.W_pos), W_Q1=h(a0.W_Q), W_K1=h(a0.W_K),
            W_OV1=h(a0.W_V) @ h(a0.W_O), W_Q2=h(a1.W_Q), W_K2=h(a1.W_K), W_V2=h(a1.W_V),
            W_O2=h(a1.W_O), W_in=d(model.W_in), W_out=d(model.W_out), W_U=d(model.W_U),
            scale=float(cfg.attn_scale), act_fn=cfg.act_fn, attention=cfg.attention,
        )  # fmt: skip

    def to(self, dtype: torch.dtype) -> Weights:
        """The same weights in `dtype` (e.g. the model's own, for its accuracies)."""
        return Weights(**{k: v.to(dtype) if isinstance(v, Tensor) else v
                          for k, v in vars(self).items()})  # fmt: skip


class OneHeadWeights(Weights):
    """`Weights` for the analyses that read the single head (compare-qk): `of` refuses heads."""

    @staticmethod
    def of(model) -> Weights:
        model.cfg.require_one_head("compare-qk (the split forward's one-head analyses)")
        return Weights.of(model)


def _heads(W: Tensor | None) -> Tensor | None:
    """W with a head axis first (one head's matrix [d, e]: a view [1, d, e])."""
    return W[None] if W is not None and W.ndim == 2 else W


@dataclass
class Layer1:
    pattern1: Tensor  # [B, L, L] ([B, h, L, L])
    x: Tensor  # [B, L, d] embeddings (token + position)
    resid1: Tensor  # [B, L, d] after layer 1 (layer 2's input)


@torch.no_grad()
def layer1(w: Weights, tokens: Tensor, pattern1: Tensor | None = None) -> Layer1:
    """Layer 1 (attention only) at every position (module docstring): score(t, u; s, v) =
    (W_E[u] + W_pos[t]) W_Q W_K^T (W_E[v] + W_pos[s])^T / scale from one table per head, the
    values (W_E W_OV)[tok] + W_pos W_OV. `pattern1` [B, L, L] ([B, h, L, L]): layer 1's
    attention pattern set instead of computed (as a hook on blocks.0.attn.hook_pattern)."""
    if w.attention not in attention.LINEAR_MIX_KINDS:
        raise ValueError("the split forward merges W_V W_O: a mix linear in the values only")
    B, L = tokens.shape
    V, d = w.W_E.shape
    X = (w.W_E[None] + w.W_pos[:L, None]).reshape(L * V, d)  # every (position, token) input
    flat = torch.arange(L) * V + tokens  # [B, L]: row of each position's input in the table
    one = w.W_OV1.ndim == 2
    if pattern1 is None:  # [h, L V, L V] tables, read at [h, B, L, L]
        W_K = _heads(w.W_K1)
        keys = X if W_K is None else X @ W_K
        table = (X @ _heads(w.W_Q1)) @ keys.transpose(-1, -2) / w.scale
        scores = table[:, flat[:, :, None], flat[:, None, :]].transpose(0, 1)
        heads = attention.pattern(scores, kind=w.attention)
    else:
        heads = pattern1[:, None] if one else pattern1  # [B, h, L, L]
    # the inputs and values per position read from their [L * V, d] tables (the same sums
    # W_E[u] + W_pos[t], done once per (position, token) instead of once per sequence)
    rows = flat.reshape(-1)
    x = X.index_select(0, rows).view(B, L, d)
    W_OV = _heads(w.W_OV1)
    values = (w.W_E @ W_OV)[:, None] + (w.W_pos[:L] @ W_OV)[:, :, None]  # [h, L, V, d]
    values = values.reshape(-1, L * V, d).index_select(1, rows).view(-1, B, L, d).transpose(0, 1)
    resid1 = x + attention.attend(heads.to(values.dtype), values)
    return Layer1(heads[:, 0] if one else heads, x, resid1)


def layer2(
    w: Weights, resid1: Tensor, W_Q2: Tensor | None = None, W_K2: Tensor | None = None,
    P: Tensor | None = None, query: Tensor | None = None, pattern: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(logits [B, p], layer-2 pattern of `=` [B, L] ([B, h, L])) from layer-1 residuals, the
    last block at the answer position: W_Q2 / W_K2 replace the weights' (for autograd), P
    [d, d] is added to W_Q2 W_K2^T; `query` [B, d]: the query row x_T (W_Q2 W_K2^T + P) given
    instead; `pattern` [B, L]: `=`'s layer-2 attention given instead of computed (per head:
    [h, ...] matrices, [B, h, d] queries, [B, h, L] patterns)."""
    last, one = resid1[:, -1], w.W_V2.ndim == 2
    if pattern is None:
        if query is None:  # [h, B, d] (one head's matrices [d, e]: the product as it always was)
            W_Q2 = w.W_Q2 if W_Q2 is None else W_Q2
            W_K2 = w.W_K2 if W_K2 is None else W_K2
            query = last @ W_Q2 if W_K2 is None else (last @ W_Q2) @ W_K2.transpose(-1, -2)
            if P is not None:
                query = query + last @ P
            query = query[None] if query.ndim == 2 else query
        else:
            query = query[None] if one else query.transpose(0, 1)
        scores = torch.einsum("hbd,bld->bhl", query, resid1) / w.scale
        heads = attention.pattern(scores[:, :, None], kind=w.attention)  # [B, h, 1 query, L]
    else:
        heads = (pattern[:, None] if one else pattern)[:, :, None]
    mixed = attention.attend(heads, resid1[:, None], _heads(w.W_V2), _heads(w.W_O2))
    mid = last + mixed[:, 0]
    post = mid + activation(w.act_fn)(mid @ w.W_in) @ w.W_out
    return post @ w.W_U, heads[:, 0, 0] if one else heads[:, :, 0]


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
