"""The answer-only kernel of the one forward (empirical.model.forward, positions="answer"):
the logits at the last position, for one model or a stack of M members, at every depth
(model.n_layers = 2..4) and every head count (model.n_heads).

    out = fast_forward(weights, tokens, attn_scale)                 # logits at `=`
    out = fast_forward(weights, tokens, attn_scale, internals=True)  # + patterns, resid_mid

`weights` maps the parameter names of `AssignAddTransformer` (`param_names(n_layers)`) to
tensors with a leading member axis ([M, *shape]; a single model: `member_weights(model)`);
the depth is read from them. `tokens` is [M, batch, L].

It computes what the hooked `forward` computes at the last position, reparameterised so that
no [batch, L, d_model] tensor is built: position t reads two ids of C = [W_E; W_pos[:L]]
(its token and V + t), layer-1 scores are entries of an [N, N] table, and the residual stream
is a tree of [N, d] tables (`_Resid`) read per position and mixed by attention patterns;
docs/model.md derives it step by step. Patterns and value mixes are empirical.model.attention's
(the values mixed in table form: a mix linear in them). With one head these are, op for op,
the float operations training has always done (tests/test_forward_bits.py), and autograd
gives the hooked forward's gradients up to rounding (tested at depths 2, 3, 4, 2 and 4 heads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from empirical.model import attention as attn
from empirical.model.config import activation


def param_names(n_layers: int = 2) -> tuple[str, ...]:
    """Parameter names of an `AssignAddTransformer` of `n_layers` blocks, in its parameter
    order: embeddings, every block's attention, the last block's MLP, the unembedding."""
    attention = [f"blocks.{i}.attn.W_{m}" for i in range(n_layers) for m in "QKVO"]
    mlp = [f"blocks.{n_layers - 1}.mlp.W_{m}" for m in ("in", "out")]
    return ("embed.W_E", "pos_embed.W_pos", *attention, *mlp, "unembed.W_U")


# parameter names of the default (2-layer) AssignAddTransformer, in its parameter order
PARAM_NAMES = param_names(2)


def tied_source(name: str, n_layers: int) -> str:
    """With model.tied_layers, the parameter that `name` is: a middle block's attention weight
    (blocks 2..n-2) is block 1's; any other name is itself."""
    parts = name.split(".")
    if parts[0] == "blocks" and parts[2] == "attn" and 2 <= int(parts[1]) <= n_layers - 2:
        return ".".join(["blocks", "1", *parts[2:]])
    return name


def unique_param_names(n_layers: int = 2, tied_layers: bool = False) -> tuple[str, ...]:
    """The distinct parameters of a model (`param_names`, without the tied copies)."""
    names = param_names(n_layers)
    return tuple(n for n in names if not tied_layers or tied_source(n, n_layers) == n)


def depth_of(weights: Mapping[str, Tensor]) -> int:
    """The number of blocks of a model given by its weights (blocks with an attention)."""
    return sum(1 for name in weights if name.startswith("blocks.") and name.endswith(".attn.W_Q"))


@dataclass
class FastOutputs:
    """What `fast_forward` returns, each with the leading member axis [M, ...]: logits
    [M, B, d_vocab_out] at the last position; with internals (2-layer models) pattern1
    [M, B, L, L], pattern2 [M, B, L] (of the last position), resid_mid [M, B, d] (the MLP's
    input there), C = [W_E; W_pos[:L]] and C_OV = C W_V W_O of layer 1 ([M, V + L, d]: the
    residual after layer 1 at any position can be rebuilt from them)."""

    logits: Tensor
    pattern1: Tensor | None = None
    pattern2: Tensor | None = None
    resid_mid: Tensor | None = None
    C: Tensor | None = None
    C_OV: Tensor | None = None


@dataclass
class _Resid:
    """A residual stream at every position, as a tree of [M, N, d] tables.

    A leaf is a table T, read per position (T[tok_t] + T[V + t]); a node is
    `base + sum over heads of pattern_h @ moved_h`: the residual before an attention layer
    plus that layer's output, `moved_h` being the same tree with every table times head h's
    W_V W_O."""

    table: Tensor | None = None
    base: _Resid | None = None
    heads: tuple[tuple[Tensor, _Resid], ...] = ()  # (pattern [M, B, L, L], moved) per head

    def leaves(self) -> list[Tensor]:
        """The tables, depth first (base before the heads' moved trees, in head order)."""
        if self.table is not None:
            return [self.table]
        out = self.base.leaves()
        for _, moved in self.heads:
            out = out + moved.leaves()
        return out

    def mapped(self, fn: Callable[[Tensor], Tensor]) -> _Resid:
        """The same tree with every table T replaced by fn(T)."""
        if self.table is not None:
            return _Resid(table=fn(self.table))
        base = self.base.mapped(fn)  # first: the order of the products is autograd's order
        heads = tuple((pattern, moved.mapped(fn)) for pattern, moved in self.heads)
        return _Resid(base=base, heads=heads)

    def after_attention(
        self, patterns: list[Tensor], W_V: list[Tensor], W_O: list[Tensor]
    ) -> _Resid:
        """The residual after an attention layer whose head h has patterns[h], W_V[h] and
        W_O[h] ([M, d, e], [M, e, d]) reads this one."""
        heads = tuple(
            (pattern, self.mapped(lambda T, h=h: torch.bmm(torch.bmm(T, W_V[h]), W_O[h])))
            for h, pattern in enumerate(patterns)
        )
        return _Resid(base=self, heads=heads)

    def combine(self, per_leaf: Iterator[Tensor], mix: Callable[[Tensor, Tensor], Tensor]):
        """Sum the per-leaf reads (in `leaves()` order) up the tree: a node gives
        base + the sum over heads of mix(pattern, moved)."""
        if self.table is not None:
            return next(per_leaf)
        out = self.base.combine(per_leaf, mix)
        for pattern, moved in self.heads:
            out = out + mix(pattern, moved.combine(per_leaf, mix))
        return out

    def leaf_weights(self, a: Tensor) -> list[Tensor]:
        """For position weights a [M, B, L]: the weights [M, B, L] on each leaf's per-position
        reads (in `leaves()` order) such that sum_t a_t resid_t = sum over leaves of
        pool(weights) @ table."""
        if self.table is not None:
            return [a]
        moved_a = [(a.unsqueeze(-1) * pattern).sum(2) for pattern, _ in self.heads]  # a @ pattern
        out = self.base.leaf_weights(a)
        for (_, moved), weights in zip(self.heads, moved_a, strict=True):
            out = out + moved.leaf_weights(weights)
        return out


def _mix_keys(pattern: Tensor, scores: Tensor) -> Tensor:  # [M, B, q, k] @ pattern^T
    return torch.matmul(scores, pattern.transpose(-1, -2))


def _mix_scalars(pattern: Tensor, values: Tensor) -> Tensor:  # [M, B, L, L] @ [M, B, L]
    # (batched [L x L] @ [L] products as multiply-and-sum: faster than bmm on CPU)
    return (pattern * values.unsqueeze(2)).sum(-1)


def _cat(parts: list[Tensor], dim: int) -> Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)


class _Reads:
    """Reading [M, N, ...] per-id tables per position for one token batch [M, B, L] (the
    index arithmetic shared by every layer)."""

    def __init__(self, tokens: Tensor, V: int):
        M, batch, length = tokens.shape
        self.tokens, self.M, self.V, self.batch, self.length = tokens, M, V, batch, length
        offset = (torch.arange(M, device=tokens.device) * V).view(M, 1, 1)
        self.gtok = tokens + offset  # row ids into the [M * V, ...] view of a per-member table
        # int32 index arithmetic where the [M * V * V] table allows it (a third of int64's
        # time on a CPU; index_select takes either)
        small = torch.int32 if M * V * V < 2**31 else torch.long
        gtok = self.gtok.to(small)
        self.tt_index = (gtok[:, :, :, None] * V + tokens.to(small)[:, :, None, :]).reshape(-1)
        # T_pt[q, tok_s] read per (query position q, key position s), in the [M, B, q, s] layout
        member_q = (torch.arange(M * length, device=tokens.device) * V).view(M, 1, length, 1)
        self.pt_index = (member_q.to(small) + tokens.to(small)[:, :, None, :]).reshape(-1)

    def pool(self, weights: Tensor) -> Tensor:  # [M, B, L] -> [M, B, N]
        z = weights.new_zeros(self.M, self.batch, self.V).scatter_add(2, self.tokens, weights)
        return torch.cat([z, weights], dim=2)

    def at(self, r: Tensor) -> Tensor:  # [M, B, N] -> [M, B, L]
        return r[..., : self.V].gather(2, self.tokens) + r[..., self.V :]

    def rows(self, table: Tensor) -> Tensor:  # [M, V, k] -> per-token rows [M, B, L, k]
        k = table.shape[-1]
        flat = table.reshape(self.M * self.V, k).index_select(0, self.gtok.reshape(-1))
        return flat.view(self.M, self.batch, self.length, k)

    def pair_read(self, T: Tensor) -> Tensor:  # [M, N, N] (query id, key id) -> [M, B, L, L]
        M, V, B, L = self.M, self.V, self.batch, self.length
        T_tt, T_tp, T_pt, T_pp = T[:, :V, :V], T[:, :V, V:], T[:, V:, :V], T[:, V:, V:]
        return (
            T_tt.reshape(M * V * V).index_select(0, self.tt_index).view(M, B, L, L)
            + self.rows(T_tp)
            + T_pt.reshape(M * L * V).index_select(0, self.pt_index).view(M, B, L, L)
            + T_pp[:, None]
        )


def _layer(
    reads: _Reads, resid: _Resid, heads: tuple[list[Tensor], ...], N: int, attn_scale: float,
    kind: str = "softmax",
) -> _Resid:  # fmt: skip
    """The residual after an attention layer at every position (every block but the last):
    scores from the [N, N] tables of every pair of leaves (query leaf i, key leaf j), read at
    the positions' ids and mixed by the leaves' patterns on both sides, per head (layer 1: the
    one leaf C, T = (C W_Q)(C W_K)^T / scale)."""
    WQ, WK, WV, WO = heads
    leaves = _cat(resid.leaves(), 1)  # [M, n_leaves * N, d]
    spans = [slice(j * N, (j + 1) * N) for j in range(leaves.shape[1] // N)]
    scores = []
    for h in range(len(WQ)):
        queries, keys = torch.bmm(leaves, WQ[h]), torch.bmm(leaves, WK[h])
        TT = torch.bmm(queries, keys.transpose(1, 2)) / attn_scale
        per_query_leaf = [
            resid.combine(
                iter([reads.pair_read(TT[:, q, k] if len(spans) > 1 else TT) for k in spans]),
                _mix_keys,
            )
            for q in spans
        ]
        scores.append(resid.combine(iter(per_query_leaf), attn.mix))  # [M, B, L, L]
    patterns = attn.pattern(attn.stack_heads(scores), kind=kind)  # [M, B, h, L, L]
    return resid.after_attention(attn.unstack_heads(patterns), WV, WO)


def _last_layer(
    reads: _Reads, resid: _Resid, last: Tensor, CC: Tensor, heads: tuple[list[Tensor], ...],
    N: int, attn_scale: float, kind: str = "softmax",
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(mid [M, B, d]: the MLP's input at L-1, the last head's pattern of the query at L-1
    [M, B, L]) of the last block, its query at L-1 only; `last`: the root leaf's read at L-1,
    CC: the leaf tables side by side."""
    WQ, WK, WV, WO = heads
    n_leaves = CC.shape[1] // N
    outputs, node = [], resid
    while node.table is None:  # every attention layer's output at L-1
        layer_outputs = []
        for pattern, moved in node.heads:
            pooled = [reads.pool(a) for a in moved.leaf_weights(pattern[:, :, -1])]
            layer_outputs.append(torch.bmm(_cat(pooled, 2), _cat(moved.leaves(), 1)))
        outputs.append(layer_outputs)
        node = node.base
    for layer_outputs in reversed(outputs):  # layer 1's first
        for output in layer_outputs:
            last = last + output
    scores, values = [], []
    for h in range(len(WQ)):
        r = torch.bmm(last, torch.bmm(WQ[h], torch.bmm(WK[h].transpose(1, 2), CC.transpose(1, 2))))
        reads_h = (reads.at(r[..., j * N : (j + 1) * N]) for j in range(n_leaves))
        scores.append(resid.combine(reads_h, _mix_scalars) / attn_scale)  # [M, B, key]
        values.append(torch.bmm(torch.bmm(CC, WV[h]), WO[h]))  # the tables' values, [M, n N, d]
    patterns = attn.pattern(attn.stack_heads(scores, -2).unsqueeze(-2), kind=kind)
    mid = last
    for a2, table in zip(attn.unstack_heads(patterns.squeeze(-2), -2), values, strict=True):
        pooled = torch.cat([reads.pool(a) for a in resid.leaf_weights(a2)], dim=2)  # [M, B, n N]
        mid = mid + torch.bmm(pooled, table)
    return mid, a2


def fast_forward(
    weights: Mapping[str, Tensor], tokens: Tensor, attn_scale: float, internals: bool = False,
    act_fn: str = "relu", attention: str = "softmax",
) -> FastOutputs:  # fmt: skip
    """Logits at the last position (and, with `internals`, the attention patterns and the
    MLP input there) of M members on their own token batches; see the module docstring.
    `act_fn`: the MLP activation (`ModelConfig.act_fn`, looked up by `activation`);
    `attention`: `ModelConfig.attention`, one whose value mix is linear in the values."""
    if tokens.ndim != 3:
        raise ValueError(f"tokens must have shape [members, batch, pos], got {tuple(tokens.shape)}")
    n_layers = depth_of(weights)
    n_heads = weights["blocks.0.attn.W_Q"].shape[1]
    if internals and (n_layers, n_heads) != (2, 1):
        has = (f"2-layer model; this one has {n_layers} layers" if n_layers != 2
               else f"one-head model; this one has {n_heads} heads per block")  # fmt: skip
        raise ValueError(f"fast_forward internals are those of a {has} (use the hooked "
                         "forward: run_with_cache)")  # fmt: skip
    if attention not in attn.LINEAR_MIX_KINDS:
        raise ValueError(f"the kernel's tables need a value mix linear in the values "
                         f"({list(attn.LINEAR_MIX_KINDS)}), not {attention!r}")  # fmt: skip
    tokens = tokens.long()
    w = weights
    W_E = w["embed.W_E"]
    M, V, d = W_E.shape
    length = tokens.shape[2]
    reads = _Reads(tokens, V)

    def block(i: int) -> tuple[list[Tensor], ...]:  # block i's W_Q, K, V, O, per head
        return tuple([w[f"blocks.{i}.attn.W_{m}"][:, h] for h in range(n_heads)] for m in "QKVO")

    C = torch.cat([W_E, w["pos_embed.W_pos"][:, :length]], dim=1)  # [M, N, d]
    N = C.shape[1]
    resid = _Resid(table=C)  # the embeddings: the one leaf C, read per position
    for i in range(n_layers - 1):  # layer 1 (leaves C, C W_V W_O per head) and middle layers
        resid = _layer(reads, resid, block(i), N, attn_scale, attention)

    # the last layer, query at L-1 only
    heads = block(n_layers - 1)
    tables = resid.leaves()
    CC = torch.cat(tables, dim=1)  # [M, n_leaves * N, d]
    x_last = W_E.reshape(M * V, d).index_select(0, reads.gtok[:, :, -1].reshape(-1))
    last = x_last.view(M, reads.batch, d) + C[:, -1:]  # the root leaf's read at L-1
    mid, a2 = _last_layer(reads, resid, last, CC, heads, N, attn_scale, attention)
    mlp = f"blocks.{n_layers - 1}.mlp"
    pre = torch.bmm(mid, w[f"{mlp}.W_in"])
    # ReLU in place: the same values without writing a second [M, B, d_mlp] tensor (its
    # backward reads only the output; the product's backward does not need `pre`)
    hidden = pre.relu_() if act_fn == "relu" else activation(act_fn)(pre)
    post = mid + torch.bmm(hidden, w[f"{mlp}.W_out"])
    logits = torch.bmm(post, w["unembed.W_U"])
    if not internals:
        return FastOutputs(logits)
    return FastOutputs(logits, resid.heads[0][0], a2, mid, C, tables[1])


def member_weights(model) -> dict[str, Tensor]:
    """A single model's parameters as a one-member stack (views; gradients flow), every name
    of `param_names` included (a tied middle block's weights under each block's name)."""
    named = model.named_parameters(remove_duplicate=False)
    return {name: param.unsqueeze(0) for name, param in named}
