"""Attention, once: every path of the model computes its heads' attention here.

    weights = pattern(scores)                # scaled scores [..., heads, queries, keys]
    out = attend(weights, values, W_O)       # values [..., heads, keys, e] -> [..., queries, d]

The paths are the hooked forward (empirical.model.forward: per-position activations), the
answer-only training kernel (empirical.model.fast: [N, N] id tables, the residual as a tree of
tables) and the float64 split at layer 2's input (empirical.model.partial: (position, token)
tables). Each computes its scores and values its own way (their float operations are each
path's since it was written) and passes all heads at once, the head axis third from the end;
the causal mask, the normalisation (`pattern`), the pattern-weighted values (`mix`), the
per-head output projection (`project`) and the sum over heads (`attend`) are these functions.

The variants of attention (`model.attention`, `KINDS`; docs/heads.md) are `pattern` and `mix`
with their `kind`, picked up by every path:

- "softmax" (the default, the paper's): the causal mask, softmax over the keys, the pattern
  times the values. The float operations of every path are those it has always done.
- "linear" (seed 003's linear attention, its "rms_head" normalisation alone): masked scores
  set to 0, then each score divided by its root mean square over the heads (dim -3, no learned
  scale, eps = RMS_EPS): a[h, q, k] = s[h, q, k] / sqrt(mean_h s[h, q, k]^2 + eps). The value
  mix is the pattern times the values.
- "hyla" (HYLA: rms_head + the "mlp_relu" value network): the pattern as "linear", and the
  heads' values mixed by the code, a ReLU, mixed again:
  u[q, k] = relu(sum_h a[h, q, k] v[h, k]); z[h, q] = sum_k a[h, q, k] u[q, k].

The kernel's tables (empirical.model.fast) and the split forward's merged W_V W_O
(empirical.model.partial) are rewritings of a mix linear in the values: they take "softmax"
and "linear" and refuse "hyla" (`LINEAR_MIX_KINDS`); the one forward computes HYLA's
positions="answer" through every position instead (exact, slower).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from empirical.model.config import ATTENTION_KINDS

Hook = Callable[[str, Tensor], Tensor]

# model.attention's values (module docstring); the default is the first, the paper's
KINDS = ATTENTION_KINDS
# the kinds whose `mix` is pattern @ values, linear in the values: what fast.py's tables and
# partial.py's merged W_V W_O rely on
LINEAR_MIX_KINDS = ("softmax", "linear")
# rms_head's epsilon: the authors' RMSNorm(use_scale=False, reduction_axes=-3) is flax's, whose
# default epsilon is 1e-6 (hyla/models/attention.py of smonsays/hypernetwork-attention)
RMS_EPS = 1e-6


def no_hook(name: str, x: Tensor) -> Tensor:
    """The hook of a forward without hook points: every activation unchanged."""
    return x


def stack_heads(per_head: list[Tensor], dim: int = -3) -> Tensor:
    """Per-head tensors on a head axis `dim` (one head: a view, nothing copied)."""
    return per_head[0].unsqueeze(dim) if len(per_head) == 1 else torch.stack(per_head, dim)


def unstack_heads(x: Tensor, dim: int = -3) -> list[Tensor]:
    """The inverse of `stack_heads` (views)."""
    return [x.squeeze(dim)] if x.shape[dim] == 1 else list(x.unbind(dim))


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"attention kind must be one of {list(KINDS)}, got {kind!r}")


def pattern(scores: Tensor, hook: Hook = no_hook, kind: str = "softmax") -> Tensor:
    """Attention weights from scaled scores [..., heads, queries, keys], the queries being
    the last of the keys' positions. "softmax": the causal mask (an additive 0 / -inf bias: the
    same scores where kept, one broadcast add), then softmax over the keys. "linear" and
    "hyla": masked scores set to 0, then each divided by its root mean square over the heads
    (module docstring). A single query (the last position) sees every key: no mask. Hook
    points hook_attn_scores, hook_pattern."""
    queries, keys = scores.shape[-2:]
    if kind == "softmax":
        if queries > 1:
            bias = torch.full((queries, keys), float("-inf"), dtype=scores.dtype,
                              device=scores.device)  # fmt: skip
            scores = scores + bias.triu(keys - queries + 1)
        return hook("hook_pattern", torch.softmax(hook("hook_attn_scores", scores), dim=-1))
    check_kind(kind)
    if queries > 1:
        future = torch.ones(queries, keys, dtype=torch.bool, device=scores.device)
        scores = scores.masked_fill(future.triu(keys - queries + 1), 0.0)
    scores = hook("hook_attn_scores", scores)
    rms = torch.sqrt(scores.square().mean(dim=-3, keepdim=True) + RMS_EPS)
    return hook("hook_pattern", scores / rms)


def mix(pattern: Tensor, values: Tensor, kind: str = "softmax") -> Tensor:
    """Each head's mixed values: [..., heads, queries, keys] x [..., heads (or 1), keys, e] ->
    [..., heads, queries, e]. "softmax", "linear": pattern @ values. "hyla": the code mixes
    the heads' values per (query, key), a ReLU, then mixes again over the keys (module
    docstring; the values' head axis must be the pattern's)."""
    if kind != "hyla":
        return torch.matmul(pattern, values)
    u = torch.relu(torch.einsum("...hqk,...hke->...qke", pattern, values))
    return torch.einsum("...hqk,...qke->...hqe", pattern, u)


def project(z: Tensor, W: Tensor | None) -> Tensor:
    """Each head's z [..., heads, queries, e] times its matrix W [heads, e, f] (None: the
    identity, a merged matrix applied before)."""
    return z if W is None else torch.einsum("...hqe,hef->...hqf", z, W)


def _tl(hook: Hook, name: str, x: Tensor) -> Tensor:
    """Hook point `name` on x [..., heads, pos, e], seen in TransformerLens's [..., pos,
    heads, e]."""
    return x if hook is no_hook else hook(name, x.transpose(-3, -2)).transpose(-3, -2)


def attend(
    pattern: Tensor, values: Tensor, *W: Tensor | None, hook: Hook = no_hook,
    kind: str = "softmax",
) -> Tensor:  # fmt: skip
    """The heads' summed output [..., queries, d]: `mix`, then `project` by each of W in turn
    (W_O; W_V then W_O where the values are the inputs: a mix linear in the values only),
    then the sum over heads. Hook points hook_z, hook_result (TransformerLens's layout)."""
    if kind not in LINEAR_MIX_KINDS and len(W) != 1:
        raise ValueError(f"attention {kind!r} mixes the heads' values (after W_V): pass W_O only")
    z = _tl(hook, "hook_z", mix(pattern, values, kind))
    for matrix in W:
        z = project(z, matrix)
    return _tl(hook, "hook_result", z).sum(-3)
