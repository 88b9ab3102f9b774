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
from dataclasses import dataclass
from functools import partial
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


@dataclass(frozen=True)
class RowContext:
    """What a forward may know of each row beyond its tokens (positions="all" only).

    pos_offset (batch,): the positional-embedding row of each row's first token (None: 0;
    the rows after it wrap around after n_ctx);
    iterations (batch,): each row's T (a recurrent model; needed with model.recurrence =
    "depth", else all rows take model.iterations); slots (batch, pos) bool: the positions
    whose value is read out and embedded again between iterations (model.discrete_state);
    corrupt: replace each fed-back value by a uniform one with odds model.corruption (training;
    torch's global generator; model.corruption_scope "last": only the values of the nodes of
    depth t fed into iteration t + 1, from teacher_depths); every_iteration: return every
    iteration's readout, [T, batch, pos, d_vocab_out] (T the largest of the rows'; a row's own
    end is iteration iterations - 1, the ones after it are computed and not its answer); teacher,
    teacher_depths (batch, pos): the true values and depths of the nodes (model.teacher_forcing,
    training): iteration t + 1 is fed the true value at the slots of depth <= t."""

    pos_offset: Tensor | None = None
    iterations: Tensor | None = None
    slots: Tensor | None = None
    corrupt: bool = False
    every_iteration: bool = False
    teacher: Tensor | None = None
    teacher_depths: Tensor | None = None


def embed(
    W_E: Tensor, W_pos: Tensor | None, tokens: Tensor, hook: Hook = no_hook,
    pos_offset: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """Token plus learned positional embedding, [batch, pos] -> [batch, pos, d_model] (W_pos
    None: the token's alone, model.positions = "relative"); row
    b's positions start at pos_offset[b] (None: 0) and wrap around after the last row of
    W_pos (n_ctx): token j takes row (pos_offset[b] + j) mod n_ctx."""
    batch, length = tokens.shape
    if W_pos is None:  # model.positions = "relative": where a token is lives in the scores
        return hook("hook_embed", W_E[tokens])
    if pos_offset is None:
        positions = W_pos[:length].unsqueeze(0).expand(batch, -1, -1).contiguous()
    else:
        index = pos_offset[:, None] + torch.arange(length, device=tokens.device)
        positions = W_pos[index % W_pos.shape[0]]
    return hook("hook_embed", W_E[tokens]) + hook("hook_pos_embed", positions)


def attention(
    x: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, W_O: Tensor, attn_scale: float,
    hook: Hook = no_hook, kind: str = "softmax", b_rel: Tensor | None = None,
    W_rel: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """Causal multi-head attention without biases, TransformerLens's shapes and hook names:
    x [batch, pos, d_model], W_Q/W_K/W_V [n_heads, d_model, d_head], W_O [n_heads, d_head,
    d_model] -> the heads' summed output [batch, pos, d_model]; `kind`: model.attention
    (empirical.model.attention); b_rel [n_heads, window]: model.positions = "relative"'s bias
    by distance (`relative_bias`), added to the scaled scores; W_rel [n_heads, window, d_head]:
    model.relative_content's key per distance (`relative_content_scores`), scaled as q . k."""
    q = hook("hook_q", torch.einsum("bpd,hde->bphe", x, W_Q))
    k = hook("hook_k", torch.einsum("bpd,hde->bphe", x, W_K))
    v = hook("hook_v", torch.einsum("bpd,hde->bphe", x, W_V))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k)
    if W_rel is not None:
        scores = scores + relative_content_scores(q, W_rel)
    scores = scores / attn_scale
    if b_rel is not None:
        scores = scores + relative_bias(b_rel, scores.shape[-1])
    return attend(pattern(scores, hook, kind), v.transpose(1, 2), W_O, hook=hook, kind=kind)


def clipped_distances(length: int, window: int, device) -> Tensor:
    """[query, key]: min(q - k, window - 1), 0 for the keys after the query (which the causal
    mask removes): the index of a relative position's learned entry."""
    at = torch.arange(length, device=device)
    return (at[:, None] - at[None, :]).clamp(0, window - 1)


def relative_bias(b_rel: Tensor, length: int) -> Tensor:
    """[n_heads, length, length]: b_rel[h, min(q - k, window - 1)] for query q and key k <= q
    (the keys after the query get b_rel[h, 0]; the causal mask removes them)."""
    return b_rel[:, clipped_distances(length, b_rel.shape[-1], b_rel.device)]


def normalized(x: Tensor, cfg: ModelConfig, hook: Hook = no_hook) -> Tensor:
    """model.normalization: x unchanged ("none"), or `layer_norm_pre(x)` ("LNPre")."""
    return x if cfg.normalization == "none" else layer_norm_pre(x, hook)


def layer_norm_pre(x: Tensor, hook: Hook = no_hook, eps: float = 1e-5) -> Tensor:
    """TransformerLens's LayerNormPre: x - mean(x) over d_model, divided by sqrt(its mean
    square + eps) (hook_scale, hook_normalized); no weights."""
    x = x - x.mean(-1, keepdim=True)
    scale = hook("hook_scale", (x.pow(2).mean(-1, keepdim=True) + eps).sqrt())
    return hook("hook_normalized", x / scale)


def relative_content_scores(q: Tensor, W_rel: Tensor) -> Tensor:
    """[batch, n_heads, length, length]: q_i . W_rel[h, min(i - j, window - 1)] for query i
    and key j <= i (DeBERTa's content-to-position term: a key per head and distance)."""
    by_distance = torch.einsum("bqhe,hde->bhqd", q, W_rel)  # [batch, head, query, distance]
    distance = clipped_distances(q.shape[1], W_rel.shape[1], q.device)  # [query, key]
    return by_distance.gather(-1, distance.expand(*by_distance.shape[:2], -1, -1))


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
    b_rel = weights.get(f"{prefix}attn.b_rel")
    if b_rel is not None:
        b_rel = cfg.relative_gain * b_rel  # exact at the default gain 1
    attn_in = normalized(resid, cfg, _under(hook, "ln1."))
    attn_out = attention(attn_in, *W, cfg.attn_scale, _under(hook, "attn."), cfg.attention,
                         b_rel, weights.get(f"{prefix}attn.W_rel"))  # fmt: skip
    resid = hook("hook_resid_mid", resid + hook("hook_attn_out", attn_out))
    if layer in cfg.mlp_layers:
        W_in, W_out = weights[f"{prefix}mlp.W_in"], weights[f"{prefix}mlp.W_out"]
        mlp_in = normalized(resid, cfg, _under(hook, "ln2."))
        resid = resid + hook("hook_mlp_out", mlp(mlp_in, W_in, W_out, cfg.act_fn,
                                                 _under(hook, "mlp.")))  # fmt: skip
    return hook("hook_resid_post", resid)


def positional(weights: Mapping[str, Tensor], cfg: ModelConfig) -> Tensor | None:
    """The learned positional embedding the residual stream adds (None: model.positions =
    "relative", whose W_pos is kept, unused, so every tool finds the model's parameters)."""
    return weights["pos_embed.W_pos"] if cfg.positions == "learned" else None


def residual_stream(
    weights: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig, hook: Hook = no_hook,
    pos_offset: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """The residual stream after the last block, [batch, pos, d_model] (positions="all")."""
    resid = embed(weights["embed.W_E"], positional(weights, cfg), tokens, hook, pos_offset)
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


def row_iterations(cfg: ModelConfig, tokens: Tensor, context: RowContext) -> Tensor:
    """Each row's T (batch,): model.iterations ("fixed"), or the rows' own (`context`)."""
    if context.iterations is None:
        if cfg.recurrence == "depth":
            raise ValueError(
                "model.recurrence = 'depth' takes each row's T from its graph's depth: pass "
                "RowContext(iterations=...) (empirical.train.targets.row_context builds it)"
            )
        return torch.full((tokens.shape[0],), cfg.iterations, device=tokens.device)
    T = context.iterations
    if T.shape != tokens.shape[:1] or (len(T) and int(T.min()) < 1):
        raise ValueError("RowContext.iterations: one T >= 1 per row")
    return context.iterations


def recurrent_readouts(
    weights: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig, hook: Hook,
    context: RowContext,
) -> Tensor:  # fmt: skip
    """The recurrent model (model.recurrence): the n_layers blocks applied T times with shared
    weights, hook names `iter.{t}.blocks.{layer}.*`, the readout W_U after each iteration
    (`iter.{t}.hook_readout`). model.discrete_state: iteration t + 1 starts from the input's
    embedding plus, at the slots, the embedding of the value read out there
    (`iter.{t+1}.hook_value_embed`); else from the residual stream iteration t left. Returns
    every readout [T, batch, pos, d_vocab_out] (context.every_iteration) or each row's own
    last one [batch, pos, d_vocab_out]."""
    T_rows = row_iterations(cfg, tokens, context)
    T = int(T_rows.max()) if len(T_rows) else 1
    W_E, W_U = weights["embed.W_E"], weights["unembed.W_U"]
    embedded = embed(W_E, positional(weights, cfg), tokens, hook, context.pos_offset)
    resid, values, readouts, final = embedded, None, [], None
    if cfg.discrete_state and context.slots is None:
        raise ValueError("model.discrete_state needs RowContext(slots=...): where values go")
    for t in range(T):
        at = _under(hook, f"iter.{t}.")
        if values is not None:
            fed = torch.where(context.slots[..., None], W_E[values], 0.0)
            resid = embedded + at("hook_value_embed", fed)
        for layer in range(cfg.n_layers):
            resid = block(resid, weights, layer, cfg, at)
        logits = at("hook_readout", normalized(resid, cfg, _under(at, "ln_final.")) @ W_U)
        if context.every_iteration:
            readouts.append(logits)
        ends = (T_rows == t + 1)[:, None, None]
        final = logits if final is None else torch.where(ends, logits, final)
        if cfg.discrete_state and t + 1 < T:
            values = logits.detach().argmax(-1)
            if context.teacher is not None:
                known = (context.teacher_depths <= t) & (context.teacher >= 0)
                values = torch.where(known, context.teacher, values)
            if context.corrupt and cfg.corruption:
                noise = torch.rand(values.shape, device=values.device) < cfg.corruption
                if cfg.corruption_scope == "last":
                    noise &= context.teacher_depths == t
                random = torch.randint_like(values, W_U.shape[-1])
                values = torch.where(noise, random, values)
    return torch.stack(readouts) if context.every_iteration else final


# -- the one entry point ------------------------------------------------------------------


def forward(
    weights: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig,
    positions: Literal["all", "answer"] = "all", hook: Hook = no_hook, last_only: bool = False,
    context: RowContext | None = None,
) -> Tensor:  # fmt: skip
    """The model's logits (module docstring). positions="all": [batch, pos, d_vocab_out]
    (`last_only`: [batch, d_vocab_out], every activation still computed at every position;
    a recurrent model: `recurrent_readouts`, with what `context` says of each row);
    positions="answer": [M, batch, d_vocab_out] for member-stacked weights and tokens
    [M, batch, pos] (no hooks: the kernel builds no per-position activation; model.attention
    "hyla", whose value mix the kernel's tables cannot rewrite: `answer_logits`, member by
    member, the same numbers and gradients, slower; relative positions or a normalization,
    which the kernel does not compute: positions="all" member by member, read at the last
    position)."""
    if positions == "answer":
        if hook is not no_hook:
            raise ValueError("positions='answer' has no hook points; use positions='all'")
        if cfg.recurrent or context is not None:
            raise ValueError(
                "positions='answer' is the feedforward model's last position; a recurrent "
                "model, or rows with a context, read every position: use positions='all'"
            )
        if cfg.paper_layout and cfg.attention in LINEAR_MIX_KINDS:
            return fast_forward(weights, tokens, cfg.attn_scale, act_fn=cfg.act_fn,
                                attention=cfg.attention).logits  # fmt: skip
        one_member = answer_logits if cfg.paper_layout else partial(forward, last_only=True)
        logits = [one_member({n: w[m] for n, w in weights.items()}, t, cfg)
                  for m, t in enumerate(tokens)]  # fmt: skip
        return torch.stack(logits)
    if positions != "all":
        raise ValueError(f"positions must be 'all' or 'answer', got {positions!r}")
    context = context or RowContext()
    if cfg.recurrent:
        logits = recurrent_readouts(weights, tokens, cfg, hook, context)
        return logits[..., -1, :] if last_only else logits
    if context.every_iteration:
        raise ValueError("RowContext.every_iteration: a feedforward model has one readout")
    resid = residual_stream(weights, tokens, cfg, hook, context.pos_offset)
    resid = normalized(resid, cfg, _under(hook, "ln_final."))
    W_U = weights["unembed.W_U"]
    return resid[:, -1] @ W_U if last_only else resid @ W_U
