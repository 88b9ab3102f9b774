"""The transformer's computation, once: every forward of the paper's model runs through here.

    logits = forward(weights, tokens, cfg)                          # every position
    logits = forward(weights, tokens, cfg, hook=point_hooks(model.hook_dict))  # + HookPoints
    logits = forward(weights, tokens, cfg, positions="answer")      # the answer only (training)

`weights` maps `AssignAddTransformer`'s parameter names (`param_names(n_layers)`, tied middle
blocks under each block's name) to tensors; `cfg` is the ModelConfig. positions="all": every
activation at every position, block by block, in TransformerLens's shapes and hook names
(`hook(name, x) -> x` at every hook point, so `run_with_hooks`, `run_with_cache` and patching
act on it). positions="answer": the logits at the last position for member-stacked weights
(one model: M = 1), the kernel of `empirical.model.fast`: the same numbers up to rounding and
the same gradients, with exactly the float operations training has always done. The float64
split at layer 2's input (compare-qk, the ladder) is `empirical.model.partial`. All three
compute attention with `empirical.model.attention`, where a variant of attention goes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from empirical.model.attention import LINEAR_MIX_KINDS, Hook, attend, no_hook, pattern
from empirical.model.config import activation
from empirical.model.fast import fast_forward

if TYPE_CHECKING:
    from empirical.model.config import ModelConfig


def point_hooks(points: Mapping[str, Callable[[Tensor], Tensor]]) -> Hook:
    """The hook that runs the HookPoint of each name (`HookedRootModule.hook_dict`)."""

    def hook(name: str, x: Tensor) -> Tensor:
        point = points.get(name)
        return x if point is None else point(x)

    return hook


def _under(hook: Hook, prefix: str) -> Hook:
    if hook is no_hook:
        return no_hook
    return lambda name, x: hook(prefix + name, x)


# -- the components (positions="all") -------------------------------------------------------


def embed(W_E: Tensor, W_pos: Tensor, tokens: Tensor, hook: Hook = no_hook) -> Tensor:
    """Token plus learned positional embedding, [batch, pos] -> [batch, pos, d_model]."""
    batch, length = tokens.shape
    positions = W_pos[:length].unsqueeze(0).expand(batch, -1, -1).contiguous()
    return hook("hook_embed", W_E[tokens]) + hook("hook_pos_embed", positions)


def attention(
    x: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, W_O: Tensor, attn_scale: float,
    hook: Hook = no_hook, kind: str = "softmax",
) -> Tensor:  # fmt: skip
    """Causal multi-head attention without biases, TransformerLens's shapes and hook names:
    x [batch, pos, d_model], W_Q/W_K/W_V [n_heads, d_model, d_head], W_O [n_heads, d_head,
    d_model] -> the heads' summed output [batch, pos, d_model]; `kind`: model.attention
    (empirical.model.attention)."""
    q = hook("hook_q", torch.einsum("bpd,hde->bphe", x, W_Q))
    k = hook("hook_k", torch.einsum("bpd,hde->bphe", x, W_K))
    v = hook("hook_v", torch.einsum("bpd,hde->bphe", x, W_V))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / attn_scale
    return attend(pattern(scores, hook, kind), v.transpose(1, 2), W_O, hook=hook, kind=kind)


def mlp(x: Tensor, W_in: Tensor, W_out: Tensor, act_fn: str, hook: Hook = no_hook) -> Tensor:
    """The MLP without biases: act(x W_in) W_out (hook_pre, hook_post)."""
    pre = hook("hook_pre", x @ W_in)
    post = hook("hook_post", activation(act_fn)(pre))
    return post @ W_out


def block(
    resid: Tensor, weights: Mapping[str, Tensor], layer: int, cfg: ModelConfig,
    hook: Hook = no_hook,
) -> Tensor:  # fmt: skip
    """resid_pre -> + attn -> resid_mid -> (+ MLP, last block only) -> resid_post. The
    blocks before the last have no MLP: their hook_resid_mid and hook_resid_post both see
    resid_pre + attn_out."""
    prefix = f"blocks.{layer}."
    hook = _under(hook, prefix)
    resid = hook("hook_resid_pre", resid)
    W = [weights[f"{prefix}attn.W_{m}"] for m in "QKVO"]
    attn_out = attention(resid, *W, cfg.attn_scale, _under(hook, "attn."), cfg.attention)
    resid = hook("hook_resid_mid", resid + hook("hook_attn_out", attn_out))
    if layer in cfg.mlp_layers:
        W_in, W_out = weights[f"{prefix}mlp.W_in"], weights[f"{prefix}mlp.W_out"]
        resid = resid + hook("hook_mlp_out", mlp(resid, W_in, W_out, cfg.act_fn,
                                                 _under(hook, "mlp.")))  # fmt: skip
    return hook("hook_resid_post", resid)


def residual_stream(
    weights: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig, hook: Hook = no_hook
) -> Tensor:
    """The residual stream after the last block, [batch, pos, d_model] (positions="all")."""
    resid = embed(weights["embed.W_E"], weights["pos_embed.W_pos"], tokens, hook)
    for layer in range(cfg.n_layers):
        resid = block(resid, weights, layer, cfg, hook)
    return resid


def answer_logits(weights: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig) -> Tensor:
    """The logits at the last position [batch, d_vocab_out] through the blocks themselves:
    every block but the last at every position, the last one's attention for its last query
    and its MLP there only (what positions="answer" computes for an attention whose value mix
    the kernel's tables cannot rewrite: HYLA). The same numbers as the full forward up to
    rounding, and the same gradients."""
    resid = embed(weights["embed.W_E"], weights["pos_embed.W_pos"], tokens)
    for layer in range(cfg.n_layers - 1):
        resid = block(resid, weights, layer, cfg)
    prefix = f"blocks.{cfg.n_layers - 1}."
    W_Q, W_K, W_V, W_O = (weights[f"{prefix}attn.W_{m}"] for m in "QKVO")
    q = torch.einsum("bd,hde->bhe", resid[:, -1], W_Q)
    k = torch.einsum("bpd,hde->bhpe", resid, W_K)
    v = torch.einsum("bpd,hde->bhpe", resid, W_V)
    scores = torch.einsum("bhe,bhke->bhk", q, k)[:, :, None] / cfg.attn_scale  # one query
    out = attend(pattern(scores, kind=cfg.attention), v, W_O, kind=cfg.attention)[:, 0]
    mid = resid[:, -1] + out
    W_in, W_out = weights[f"{prefix}mlp.W_in"], weights[f"{prefix}mlp.W_out"]
    return (mid + mlp(mid, W_in, W_out, cfg.act_fn)) @ weights["unembed.W_U"]


# -- the one entry point ------------------------------------------------------------------


def forward(
    weights: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig,
    positions: Literal["all", "answer"] = "all", hook: Hook = no_hook, last_only: bool = False,
) -> Tensor:  # fmt: skip
    """The model's logits (module docstring). positions="all": [batch, pos, d_vocab_out]
    (`last_only`: [batch, d_vocab_out], every activation still computed at every position);
    positions="answer": [M, batch, d_vocab_out] for member-stacked weights and tokens
    [M, batch, pos] (no hooks: the kernel builds no per-position activation; model.attention
    "hyla", whose value mix the kernel's tables cannot rewrite: `answer_logits`, member by
    member, the same numbers and gradients, slower)."""
    if positions == "answer":
        if hook is not no_hook:
            raise ValueError("positions='answer' has no hook points; use positions='all'")
        if cfg.attention in LINEAR_MIX_KINDS:
            return fast_forward(weights, tokens, cfg.attn_scale, act_fn=cfg.act_fn,
                                attention=cfg.attention).logits  # fmt: skip
        logits = [answer_logits({n: w[m] for n, w in weights.items()}, t, cfg)
                  for m, t in enumerate(tokens)]  # fmt: skip
        return torch.stack(logits)
    if positions != "all":
        raise ValueError(f"positions must be 'all' or 'answer', got {positions!r}")
    resid = residual_stream(weights, tokens, cfg, hook)
    W_U = weights["unembed.W_U"]
    return resid[:, -1] @ W_U if last_only else resid @ W_U
