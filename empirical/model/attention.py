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

A variant of attention is a change here, picked up by every path: linear attention (the
normalisation alone) is `pattern`; HYLA (scores normalised across heads, dim -3, instead of
over keys; the heads' values mixed by the code, a ReLU, mixed again) is `pattern` and `mix`
with LINEAR_MIX = False. The kernel's tables and the split forward's merged W_V W_O are
rewritings of a mix linear in the values: with LINEAR_MIX False the one forward computes
positions="answer" through every position instead, and the split forward refuses.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Hook = Callable[[str, Tensor], Tensor]

# `mix` is pattern @ values, linear in the values: what fast.py's tables and partial.py's
# merged W_V W_O rely on (module docstring)
LINEAR_MIX = True


def no_hook(name: str, x: Tensor) -> Tensor:
    """The hook of a forward without hook points: every activation unchanged."""
    return x


def stack_heads(per_head: list[Tensor], dim: int = -3) -> Tensor:
    """Per-head tensors on a head axis `dim` (one head: a view, nothing copied)."""
    return per_head[0].unsqueeze(dim) if len(per_head) == 1 else torch.stack(per_head, dim)


def unstack_heads(x: Tensor, dim: int = -3) -> list[Tensor]:
    """The inverse of `stack_heads` (views)."""
    return [x.squeeze(dim)] if x.shape[dim] == 1 else list(x.unbind(dim))


def pattern(scores: Tensor, hook: Hook = no_hook) -> Tensor:
    """Attention weights from scaled scores [..., heads, queries, keys], the queries being
    the last of the keys' positions: the causal mask (an additive 0 / -inf bias: the same
    scores where kept, one broadcast add), then softmax over the keys. A single query (the
    last position) sees every key: no mask. Hook points hook_attn_scores, hook_pattern."""
    queries, keys = scores.shape[-2:]
    if queries > 1:
        bias = torch.full((queries, keys), float("-inf"), dtype=scores.dtype, device=scores.device)
        scores = scores + bias.triu(keys - queries + 1)
    return hook("hook_pattern", torch.softmax(hook("hook_attn_scores", scores), dim=-1))


def mix(pattern: Tensor, values: Tensor) -> Tensor:
    """Each head's pattern-weighted values: [..., heads, queries, keys] x [..., heads (or 1),
    keys, e] -> [..., heads, queries, e]."""
    return torch.matmul(pattern, values)


def project(z: Tensor, W: Tensor | None) -> Tensor:
    """Each head's z [..., heads, queries, e] times its matrix W [heads, e, f] (None: the
    identity, a merged matrix applied before)."""
    return z if W is None else torch.einsum("...hqe,hef->...hqf", z, W)


def _tl(hook: Hook, name: str, x: Tensor) -> Tensor:
    """Hook point `name` on x [..., heads, pos, e], seen in TransformerLens's [..., pos,
    heads, e]."""
    return x if hook is no_hook else hook(name, x.transpose(-3, -2)).transpose(-3, -2)


def attend(pattern: Tensor, values: Tensor, *W: Tensor | None, hook: Hook = no_hook) -> Tensor:
    """The heads' summed output [..., queries, d]: `mix`, then `project` by each of W in turn
    (W_O; W_V then W_O where the values are the inputs), then the sum over heads. Hook points
    hook_z, hook_result (TransformerLens's layout)."""
    z = _tl(hook, "hook_z", mix(pattern, values))
    for matrix in W:
        z = project(z, matrix)
    return _tl(hook, "hook_result", z).sum(-3)
