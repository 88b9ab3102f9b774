"""The paper's transformer on TransformerLens's `HookedRootModule`, with a training fast path.

2 layers, 1 causal attention head each, learned absolute positional embeddings, no biases, no
normalization, no MLP in layer 1 (block 0), a ReLU MLP in layer 2 (block 1), logits read at the
last position (the `=` token). Parameter and hook names are TransformerLens's, so
`cache["pattern", 1]`, `model.W_Q`, `model.QK` mean what an interpretability researcher expects.

Two forward passes share the same `nn.Parameter`s:
- `forward(tokens)`: every activation at every position, through `HookPoint`s (analysis, hooks).
- `forward_fast(tokens)`: the same logits, computing layer 1 from small per-token tables and
  layer 2 only at the answer position (training). Same gradients; see docs/model.md.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformer_lens import ActivationCache, FactoredMatrix, HookedRootModule
from transformer_lens.hook_points import HookPoint

from empirical.config_io import ConfigError
from empirical.model.config import ModelConfig

ReturnType = Literal["logits", "loss", "both"] | None


class Embed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model, dtype=cfg.torch_dtype))

    def forward(self, tokens: Tensor) -> Tensor:  # [batch, pos] -> [batch, pos, d_model]
        return self.W_E[tokens]


class PosEmbed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model, dtype=cfg.torch_dtype))

    def forward(self, tokens: Tensor) -> Tensor:  # [batch, pos] -> [batch, pos, d_model]
        batch, length = tokens.shape
        return self.W_pos[:length].unsqueeze(0).expand(batch, -1, -1).contiguous()


class Attention(nn.Module):
    """Causal multi-head attention without biases (here n_heads = 1), TransformerLens shapes."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        h, d, e, dt = cfg.n_heads, cfg.d_model, cfg.d_head_, cfg.torch_dtype
        self.W_Q = nn.Parameter(torch.empty(h, d, e, dtype=dt))
        self.W_K = nn.Parameter(torch.empty(h, d, e, dtype=dt))
        self.W_V = nn.Parameter(torch.empty(h, d, e, dtype=dt))
        self.W_O = nn.Parameter(torch.empty(h, e, d, dtype=dt))
        mask = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
        self.register_buffer("causal_mask", mask, persistent=False)
        self.hook_q = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()  # [batch, head_index, query_pos, key_pos]
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_result = HookPoint()  # [batch, pos, head_index, d_model]

    def forward(self, x: Tensor) -> Tensor:
        length = x.shape[1]
        q = self.hook_q(torch.einsum("bpd,hde->bphe", x, self.W_Q))
        k = self.hook_k(torch.einsum("bpd,hde->bphe", x, self.W_K))
        v = self.hook_v(torch.einsum("bpd,hde->bphe", x, self.W_V))
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / self.cfg.attn_scale
        scores = scores.masked_fill(~self.causal_mask[:length, :length], float("-inf"))
        scores = self.hook_attn_scores(scores)
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", pattern, v))
        result = self.hook_result(torch.einsum("bqhe,hed->bqhd", z, self.W_O))
        return result.sum(dim=2)

    @property
    def QK(self) -> FactoredMatrix:
        """W_Q W_K^T per head: [n_heads, d_model (query side), d_model (key side)]."""
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:
        """W_V W_O per head: [n_heads, d_model (source), d_model (output)]."""
        return FactoredMatrix(self.W_V, self.W_O)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        dt = cfg.torch_dtype
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp, dtype=dt))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model, dtype=dt))
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        self.hook_post = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        pre = self.hook_pre(x @ self.W_in)
        post = self.hook_post(F.relu(pre))
        return post @ self.W_out


class Block(nn.Module):
    """resid_pre -> + attn -> resid_mid -> (+ MLP, layer 2 only) -> resid_post.

    Block 0 has no MLP: its `hook_resid_mid` and `hook_resid_post` both see resid_pre + attn_out
    and it has no `hook_mlp_out`."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg) if layer in cfg.mlp_layers else None
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        if self.mlp is not None:
            self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, resid: Tensor) -> Tensor:
        resid = self.hook_resid_pre(resid)
        resid = self.hook_resid_mid(resid + self.hook_attn_out(self.attn(resid)))
        if self.mlp is not None:
            resid = resid + self.hook_mlp_out(self.mlp(resid))
        return self.hook_resid_post(resid)


class Unembed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out, dtype=cfg.torch_dtype))

    def forward(self, resid: Tensor) -> Tensor:
        return resid @ self.W_U


class AssignAddCache(ActivationCache):
    """`ActivationCache` that knows layer 0 has no MLP (`decompose_resid` skips its mlp_out)."""

    def decompose_resid(
        self,
        layer: int | None = None,
        mlp_input: bool = False,
        mode: Literal["all", "mlp", "attn"] = "all",
        apply_ln: bool = False,
        pos_slice=None,
        incl_embeds: bool = True,
        return_labels: bool = False,
    ):
        from transformer_lens.utilities import Slice

        if not isinstance(pos_slice, Slice):
            pos_slice = Slice(pos_slice)
        n_layers = self.model.cfg.n_layers
        if layer is None or layer == -1:
            layer = n_layers
        components, labels = [], []
        if incl_embeds:
            for key, label in (("hook_embed", "embed"), ("hook_pos_embed", "pos_embed")):
                if key in self.cache_dict:
                    components.append(self[key])
                    labels.append(label)
        for l in range(layer):
            if mode != "mlp":
                components.append(self[("attn_out", l)])
                labels.append(f"{l}_attn_out")
            if mode != "attn" and l in self.model.cfg.mlp_layers:
                components.append(self[("mlp_out", l)])
                labels.append(f"{l}_mlp_out")
        if mlp_input and mode != "mlp":
            components.append(self[("attn_out", layer)])
            labels.append(f"{layer}_attn_out")
        stack = torch.stack([pos_slice.apply(c, dim=-2) for c in components], dim=0)
        if apply_ln:  # no normalization in this model: returns the stack unchanged
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice, mlp_input=mlp_input)
        return (stack, labels) if return_labels else stack


class AssignAddTransformer(HookedRootModule):
    """The paper's model. `model(tokens)` -> logits at the last position, [batch, d_vocab_out].

    cfg: a complete ModelConfig (task sizes filled, e.g. by `ModelConfig.for_task(p, K, L)`).
    seed / generator: the init RNG (a fresh CPU generator seeded with `seed`; neither: torch's
    global RNG). Weights are drawn in float32 on the CPU in parameter order, then cast to
    cfg.dtype and moved to `device`, so a seed gives the same weights on any device and dtype.
    """

    def __init__(
        self,
        cfg: ModelConfig,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        device: str | torch.device | None = None,
    ):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise ConfigError(f"AssignAddTransformer needs a ModelConfig, got {type(cfg).__name__}")
        cfg.require_complete()
        if seed is not None and generator is not None:
            raise ValueError("pass seed or generator, not both")
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        self.pos_embed = PosEmbed(cfg)
        self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.blocks = nn.ModuleList([Block(cfg, layer) for layer in range(cfg.n_layers)])
        self.unembed = Unembed(cfg)
        self.setup()
        if seed is not None:
            generator = torch.Generator().manual_seed(int(seed))
        self.init_weights(generator)
        if device is not None:
            self.to(device)

    @torch.no_grad()
    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """Every weight ~ N(0, cfg.init_std_) (TransformerLens's "gpt2" init, no biases)."""
        std = self.cfg.init_std_
        for param in self.parameters():
            draw = torch.randn(param.shape, generator=generator, dtype=torch.float32) * std
            param.copy_(draw)

    # -- forward passes ---------------------------------------------------------------------

    def _check_tokens(self, tokens: Tensor) -> Tensor:
        if not isinstance(tokens, Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError("tokens must be an integer (long) tensor of shape [batch, pos]")
        if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= self.cfg.n_ctx:
            raise ValueError(
                f"tokens must have shape [batch, pos] with 1 <= pos <= n_ctx = {self.cfg.n_ctx}, "
                f"got {tuple(tokens.shape)}"
            )
        return tokens.long()

    def forward(
        self,
        tokens: Tensor,
        labels: Tensor | None = None,
        return_type: ReturnType = "logits",
        fast: bool = False,
    ):
        """Logits at the last position [batch, d_vocab_out] (or the mean cross-entropy loss
        against `labels`, or both), through every HookPoint. `fast=True`: `forward_fast`."""
        if fast:
            return self.forward_fast(tokens, labels, return_type)
        tokens = self._check_tokens(tokens)
        resid = self.hook_embed(self.embed(tokens)) + self.hook_pos_embed(self.pos_embed(tokens))
        for block in self.blocks:
            resid = block(resid)
        return self._output(self.unembed(resid[:, -1]), labels, return_type)

    def forward_fast(
        self, tokens: Tensor, labels: Tensor | None = None, return_type: ReturnType = "logits"
    ):
        """Training path: the same logits as `forward`, no HookPoints, layer 2 at the last
        position only. A reparameterisation of the same computation on the same parameters, so
        autograd gives the same gradients (see docs/model.md)."""
        if self.has_active_hooks():
            raise RuntimeError(
                "forward_fast bypasses HookPoints but hooks are attached; use forward() "
                "(or model.reset_hooks())"
            )
        tokens = self._check_tokens(tokens)
        batch, length = tokens.shape
        V = self.cfg.d_vocab
        attn0, attn1, mlp = self.blocks[0].attn, self.blocks[1].attn, self.blocks[1].mlp
        scale = self.cfg.attn_scale

        # Position t carries two ids into C = [W_E; W_pos[:L]] ([N, d], N = V + L): tok_t and
        # V + t, and the layer-1 input is x_t = C[tok_t] + C[V + t]. `pool(w)` ([B, N]) puts a
        # weight per position on both ids, so sum_t w_t x_t = pool(w) @ C; `at(r)` reads a
        # per-id row r ([B, N]) back per position: r[tok_t] + r[V + t].
        def pool(w: Tensor) -> Tensor:
            return torch.cat([w.new_zeros(batch, V).scatter_add(1, tokens, w), w], dim=1)

        def at(r: Tensor) -> Tensor:
            return r[:, :V].gather(1, tokens) + r[:, V:]

        C = torch.cat([self.embed.W_E, self.pos_embed.W_pos[:length]])
        N = C.shape[0]

        # Layer 1 scores x_s W_Q W_K^T x_t^T: sums of 4 entries of the [N, N] table T.
        T = ((C @ attn0.W_Q[0]) @ (C @ attn0.W_K[0]).T) / scale
        T_tt, T_tp, T_pt, T_pp = T[:V, :V], T[:V, V:], T[V:, :V], T[V:, V:]
        flat = tokens.reshape(-1)  # index_select: the fastest gather-with-backward on CPU
        scores = (
            torch.take(T_tt, tokens[:, :, None] * V + tokens[:, None, :])
            + T_tp.index_select(0, flat).view(batch, length, length)
            + T_pt.T.index_select(0, flat).view(batch, length, length).transpose(1, 2)
            + T_pp
        )
        scores = scores.masked_fill(~attn0.causal_mask[:length, :length], float("-inf"))
        A = torch.softmax(scores, dim=-1)  # layer-1 pattern [B, query, key]
        # Layer-1 resid_post, never built: resid_t = x_t + sum_s A[t, s] x_s W_V W_O, a
        # weighted sum of rows of C (weight 1 on t's two ids) and of C_OV (pool(A[t])).
        C_OV = (C @ attn0.W_V[0]) @ attn0.W_O[0]
        CC = torch.cat([C, C_OV])  # [2N, d]
        x_last = self.embed.W_E.index_select(0, tokens[:, -1]) + C[-1]
        last = x_last + pool(A[:, -1]) @ C_OV  # layer-1 resid_post at L-1, [B, d]

        # Layer 2, query at L-1 only: score_t = (last W_Q W_K^T) . resid_t, read from per-id
        # rows r = last W_Q W_K^T [C; C_OV]^T; the value mix sum_t a_t resid_t W_V W_O is
        # pool(a) @ C W_V W_O + pool(a A) @ C_OV W_V W_O.
        r = last @ (attn1.W_Q[0] @ (attn1.W_K[0].T @ CC.T))  # [B, 2N]
        # (batched [16 x 16] @ [16] products as multiply-and-sum: faster than bmm on CPU)
        scores2 = at(r[:, :N]) + (A * at(r[:, N:]).unsqueeze(1)).sum(-1)
        a2 = torch.softmax(scores2 / scale, dim=-1)  # layer-2 pattern at L-1, [B, key]
        a2A = (a2.unsqueeze(-1) * A).sum(1)
        attn_out = torch.cat([pool(a2), pool(a2A)], dim=1) @ ((CC @ attn1.W_V[0]) @ attn1.W_O[0])
        mid = last + attn_out
        post = mid + F.relu(mid @ mlp.W_in) @ mlp.W_out
        return self._output(post @ self.unembed.W_U, labels, return_type)

    @staticmethod
    def _output(logits: Tensor, labels: Tensor | None, return_type: ReturnType):
        if return_type == "logits":
            return logits
        if return_type is None:
            return None
        if return_type not in ("loss", "both"):
            raise ValueError(
                f"return_type must be 'logits', 'loss', 'both' or None, got {return_type!r}"
            )
        if labels is None:
            raise ValueError(f"return_type={return_type!r} needs labels")
        loss = F.cross_entropy(logits, labels)
        return loss if return_type == "loss" else (logits, loss)

    # -- hooks and caches -------------------------------------------------------------------

    def has_active_hooks(self) -> bool:
        return any(hp.fwd_hooks or hp.bwd_hooks for hp in self.hook_dict.values())

    def run_with_cache(
        self, *model_args, return_cache_object: bool = True, remove_batch_dim: bool = False, **kw
    ):
        """`(output, cache)`, cache an `ActivationCache` (subclass `AssignAddCache`) with this
        model as `cache.model`, so `cache["pattern", 1]`, `accumulated_resid()`,
        `decompose_resid()`, `stack_activation(...)`, `stack_head_results()` work."""
        out, cache_dict = super().run_with_cache(
            *model_args, remove_batch_dim=remove_batch_dim, **kw
        )
        if not return_cache_object:
            return out, cache_dict
        return out, AssignAddCache(cache_dict, self, has_batch_dim=not remove_batch_dim)

    # -- weights in TransformerLens shapes --------------------------------------------------

    @property
    def device(self) -> torch.device:
        return self.embed.W_E.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.W_E.dtype

    @property
    def W_E(self) -> Tensor:  # [d_vocab, d_model]
        return self.embed.W_E

    @property
    def W_pos(self) -> Tensor:  # [n_ctx, d_model]
        return self.pos_embed.W_pos

    @property
    def W_U(self) -> Tensor:  # [d_model, d_vocab_out]
        return self.unembed.W_U

    def _stack(self, name: str) -> Tensor:
        return torch.stack([getattr(block.attn, name) for block in self.blocks], dim=0)

    @property
    def W_Q(self) -> Tensor:  # [n_layers, n_heads, d_model, d_head]
        return self._stack("W_Q")

    @property
    def W_K(self) -> Tensor:  # [n_layers, n_heads, d_model, d_head]
        return self._stack("W_K")

    @property
    def W_V(self) -> Tensor:  # [n_layers, n_heads, d_model, d_head]
        return self._stack("W_V")

    @property
    def W_O(self) -> Tensor:  # [n_layers, n_heads, d_head, d_model]
        return self._stack("W_O")

    @property
    def W_in(self) -> Tensor:
        """The one MLP's (layer 2, block 1) input weights, [d_model, d_mlp] (not stacked)."""
        return self.blocks[1].mlp.W_in

    @property
    def W_out(self) -> Tensor:
        """The one MLP's (layer 2, block 1) output weights, [d_mlp, d_model] (not stacked)."""
        return self.blocks[1].mlp.W_out

    @property
    def QK(self) -> FactoredMatrix:  # [n_layers, n_heads, d_model, d_model]
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:  # [n_layers, n_heads, d_model, d_model]
        return FactoredMatrix(self.W_V, self.W_O)

    def tokens_to_residual_directions(self, tokens: int | Tensor) -> Tensor:
        """Unembedding directions of output classes: [..., d_model] (for `cache.logit_attrs`)."""
        return self.W_U.T[tokens]
