"""The one fast forward pass of the paper's model, for one model or a stack of M members.

    out = fast_forward(weights, tokens, attn_scale)                 # logits at `=`
    out = fast_forward(weights, tokens, attn_scale, internals=True)  # + patterns, resid_mid

`weights` maps the parameter names of `AssignAddTransformer` (PARAM_NAMES) to tensors with a
leading member axis ([M, *shape]); `tokens` is [M, batch, L]. A single model passes its
parameters with `unsqueeze(0)` (views: autograd flows into them) and drops the axis after.

It computes exactly what the hooked `forward` computes at the last position (the answer, read
at `=`), reparameterised so that no [batch, L, d_model] tensor is ever built:

- Position t carries two ids into C = [W_E; W_pos[:L]] ([N, d], N = V + L): its token and
  V + t, so the layer-1 input is x_t = C[tok_t] + C[V + t]. `pool(w)` ([.., N]) puts a weight
  per position on both ids, so sum_t w_t x_t = pool(w) @ C; `at(r)` reads a per-id row r back
  per position: r[tok_t] + r[V + t].
- Layer-1 scores x_s W_Q W_K^T x_t^T are sums of 4 entries of the [N, N] table T.
- Layer-1 resid_post, never built: resid_t = x_t + sum_s A[t, s] x_s W_V W_O, a weighted sum
  of rows of C and of C_OV = C W_V W_O (pool(A[t])).
- Layer 2 only for the query at L-1: score_t = (last W_Q W_K^T) . resid_t, read from per-id
  rows of last W_Q W_K^T [C; C_OV]^T; the value mix sum_t a_t resid_t W_V W_O is
  pool(a) @ C W_V W_O + pool(a A) @ C_OV W_V W_O.

It is a reparameterisation of the same computation on the same parameters, so autograd gives
the same gradients as the hooked forward (up to float rounding; tested). Used by training
(`AssignAddTransformer.forward_fast`), the batched sweep model (`BatchedModel.forward_fast`)
and analysis (`empirical.analysis.common.light_forward`, with `internals=True`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

# parameter names of AssignAddTransformer, in its parameter order
PARAM_NAMES = (
    "embed.W_E",
    "pos_embed.W_pos",
    "blocks.0.attn.W_Q",
    "blocks.0.attn.W_K",
    "blocks.0.attn.W_V",
    "blocks.0.attn.W_O",
    "blocks.1.attn.W_Q",
    "blocks.1.attn.W_K",
    "blocks.1.attn.W_V",
    "blocks.1.attn.W_O",
    "blocks.1.mlp.W_in",
    "blocks.1.mlp.W_out",
    "unembed.W_U",
)


@dataclass
class FastOutputs:
    """What `fast_forward` returns, each with the leading member axis [M, ...].

    logits [M, B, d_vocab_out] at the last position. With internals: pattern1 [M, B, L, L]
    (layer-1 attention), pattern2 [M, B, L] (layer-2 attention of the last position),
    resid_mid [M, B, d] (the layer-2 MLP's input at the last position), C [M, V + L, d]
    (= [W_E; W_pos[:L]]) and C_OV [M, V + L, d] (= C W_V W_O of layer 1), from which the
    residual after layer 1 at any position can be rebuilt."""

    logits: Tensor
    pattern1: Tensor | None = None
    pattern2: Tensor | None = None
    resid_mid: Tensor | None = None
    C: Tensor | None = None
    C_OV: Tensor | None = None


def fast_forward(
    weights: Mapping[str, Tensor], tokens: Tensor, attn_scale: float, internals: bool = False
) -> FastOutputs:
    """Logits at the last position (and, with `internals`, the attention patterns and the
    MLP input there) of M members on their own token batches; see the module docstring."""
    if tokens.ndim != 3:
        raise ValueError(f"tokens must have shape [members, batch, pos], got {tuple(tokens.shape)}")
    tokens = tokens.long()
    w = weights
    W_E = w["embed.W_E"]
    M, V, d = W_E.shape
    _, batch, length = tokens.shape
    offset = (torch.arange(M, device=tokens.device) * V).view(M, 1, 1)
    gtok = tokens + offset  # row ids into the [M * V, ...] view of a per-member table

    def pool(weights_: Tensor) -> Tensor:  # [M, B, L] -> [M, B, N]
        z = weights_.new_zeros(M, batch, V).scatter_add(2, tokens, weights_)
        return torch.cat([z, weights_], dim=2)

    def at(r: Tensor) -> Tensor:  # [M, B, N] -> [M, B, L]
        return r[..., :V].gather(2, tokens) + r[..., V:]

    def rows(table: Tensor) -> Tensor:  # [M, V, k] -> per-token rows [M, B, L, k]
        k = table.shape[-1]
        flat = table.reshape(M * V, k).index_select(0, gtok.reshape(-1))
        return flat.view(M, batch, length, k)

    C = torch.cat([W_E, w["pos_embed.W_pos"][:, :length]], dim=1)  # [M, N, d]
    N = C.shape[1]
    WQ0, WK0 = w["blocks.0.attn.W_Q"][:, 0], w["blocks.0.attn.W_K"][:, 0]
    WV0, WO0 = w["blocks.0.attn.W_V"][:, 0], w["blocks.0.attn.W_O"][:, 0]
    WQ1, WK1 = w["blocks.1.attn.W_Q"][:, 0], w["blocks.1.attn.W_K"][:, 0]
    WV1, WO1 = w["blocks.1.attn.W_V"][:, 0], w["blocks.1.attn.W_O"][:, 0]

    # layer 1: scores from the [N, N] table of every (query id, key id) pair
    T = torch.bmm(torch.bmm(C, WQ0), torch.bmm(C, WK0).transpose(1, 2)) / attn_scale
    T_tt, T_tp, T_pt, T_pp = T[:, :V, :V], T[:, :V, V:], T[:, V:, :V], T[:, V:, V:]
    tt_index = (gtok[:, :, :, None] * V + tokens[:, :, None, :]).reshape(-1)
    scores = (
        T_tt.reshape(M * V * V).index_select(0, tt_index).view(M, batch, length, length)
        + rows(T_tp)
        + rows(T_pt.transpose(1, 2)).transpose(2, 3)
        + T_pp[:, None]
    )
    causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
    A = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # [M, B, q, k]
    C_OV = torch.bmm(torch.bmm(C, WV0), WO0)  # [M, N, d]
    CC = torch.cat([C, C_OV], dim=1)  # [M, 2N, d]
    x_last = W_E.reshape(M * V, d).index_select(0, gtok[:, :, -1].reshape(-1))
    x_last = x_last.view(M, batch, d) + C[:, -1:]
    last = x_last + torch.bmm(pool(A[:, :, -1]), C_OV)  # layer-1 resid_post at L-1

    # layer 2, query at L-1 only
    r = torch.bmm(last, torch.bmm(WQ1, torch.bmm(WK1.transpose(1, 2), CC.transpose(1, 2))))
    # (batched [L x L] @ [L] products as multiply-and-sum: faster than bmm on CPU)
    scores2 = at(r[..., :N]) + (A * at(r[..., N:]).unsqueeze(2)).sum(-1)
    a2 = torch.softmax(scores2 / attn_scale, dim=-1)  # [M, B, key]
    a2A = (a2.unsqueeze(-1) * A).sum(2)
    mix = torch.cat([pool(a2), pool(a2A)], dim=2)  # [M, B, 2N]
    mid = last + torch.bmm(mix, torch.bmm(torch.bmm(CC, WV1), WO1))
    hidden = F.relu(torch.bmm(mid, w["blocks.1.mlp.W_in"]))
    post = mid + torch.bmm(hidden, w["blocks.1.mlp.W_out"])
    logits = torch.bmm(post, w["unembed.W_U"])
    if not internals:
        return FastOutputs(logits)
    return FastOutputs(logits, A, a2, mid, C, C_OV)


def member_weights(model) -> dict[str, Tensor]:
    """A single model's parameters as a one-member stack (views; gradients flow)."""
    return {name: param.unsqueeze(0) for name, param in model.named_parameters()}
