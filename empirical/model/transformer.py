"""The paper's transformer on TransformerLens's `HookedRootModule`, with a training fast path.

2 layers (`model.n_layers` = 3 or 4: attention-only blocks before the last), `model.n_heads`
causal heads each, learned positional embeddings, no biases or normalization (by default;
model.normalization), a ReLU MLP in the last block only; the answer is read at the last
position (`=`). Parameter and hook names are TransformerLens's (`cache["pattern", 1]`,
`model.W_Q`, `model.QK`, `to_tokens`, `run_with_cache`, `transformer_lens.patching` work as on
a `HookedTransformer`). The computation is empirical.model.forward's: `forward(tokens)`
through the HookPoints, `forward_fast(tokens)` the answer position only (training; same
numbers and gradients, docs/model.md).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformer_lens import ActivationCache, FactoredMatrix, HookedRootModule
from transformer_lens.hook_points import HookPoint
from transformer_lens.utilities import Slice

from empirical.config.io import ConfigError
from empirical.model.config import ModelConfig
from empirical.model.fast import member_weights
from empirical.model.forward import RowContext, forward, point_hooks, row_iterations
from empirical.model.iteration_hooks import IterationHooks, add_norms, initial_count
from empirical.task.vocab import Vocabulary

ReturnType = Literal["logits", "loss", "both"] | None


class Embed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model, dtype=cfg.torch_dtype))


class PosEmbed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model, dtype=cfg.torch_dtype))


class Attention(nn.Module):
    """Causal multi-head attention's weights without biases (TransformerLens shapes) and its
    HookPoints; the computation is empirical.model.forward.attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        h, d, e, dt = cfg.n_heads, cfg.d_model, cfg.d_head_, cfg.torch_dtype
        self.W_Q = nn.Parameter(torch.empty(h, d, e, dtype=dt))
        self.W_K = nn.Parameter(torch.empty(h, d, e, dtype=dt))
        self.W_V = nn.Parameter(torch.empty(h, d, e, dtype=dt))
        self.W_O = nn.Parameter(torch.empty(h, e, d, dtype=dt))
        if cfg.positions == "relative":  # a score bias per head by distance (forward.relative_bias)
            self.b_rel = nn.Parameter(torch.empty(h, cfg.relative_window, dtype=dt))
        if cfg.relative_content:  # a key per head and distance (forward.relative_content_scores)
            self.W_rel = nn.Parameter(torch.empty(h, cfg.relative_window, e, dtype=dt))
        self.hook_q = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()  # [batch, head_index, query_pos, key_pos]
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_result = HookPoint()  # [batch, pos, head_index, d_model]

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


class Block(nn.Module):
    """One block's weights and HookPoints: resid_pre -> + attn -> resid_mid -> (+ MLP, last
    block only) -> resid_post (empirical.model.forward.block).

    The blocks before the last have no MLP: their `hook_resid_mid` and `hook_resid_post` both
    see resid_pre + attn_out and they have no `hook_mlp_out`."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        add_norms(self, cfg, "ln1", *(("ln2",) if layer in cfg.mlp_layers else ()))
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg) if layer in cfg.mlp_layers else None
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        if self.mlp is not None:
            self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()


class Unembed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out, dtype=cfg.torch_dtype))


class AssignAddCache(ActivationCache):
    """`ActivationCache` that knows only the last block has an MLP (`decompose_resid` skips
    the other blocks' absent mlp_out)."""

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
        if apply_ln:  # the cache's ln scales (model.normalization); none: the stack unchanged
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice, mlp_input=mlp_input)
        return (stack, labels) if return_labels else stack


def _stacked(name: str) -> property:
    """A read-only property: every block's attention weight `name`, stacked along a layer axis."""
    return property(lambda self: torch.stack([getattr(b.attn, name) for b in self.blocks], dim=0))


class AssignAddTransformer(HookedRootModule):
    """The paper's model. `model(tokens)` -> logits [batch, pos, d_vocab_out] (TransformerLens's
    shape; the answer is `logits[:, -1]`); `model(tokens, last_only=True)` -> [batch, d_vocab_out].

    cfg: a complete ModelConfig (task sizes filled, e.g. by `ModelConfig.for_task(p, K, L)`); the
    model keeps its own copy, with `d_head` filled and `cfg.device` following the model.
    seed / generator: the init RNG (a fresh CPU generator seeded with `seed`; neither: torch's
    global RNG). Weights are drawn in float32 on the CPU in parameter order, then cast to
    cfg.dtype and moved to `device`, so a seed gives the same weights on any device and dtype.
    """

    def __init__(
        self, cfg: ModelConfig, seed: int | None = None,
        generator: torch.Generator | None = None, device: str | torch.device | None = None,
    ):  # fmt: skip
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise ConfigError(f"AssignAddTransformer needs a ModelConfig, got {type(cfg).__name__}")
        cfg.require_complete()
        if seed is not None and generator is not None:
            raise ValueError("pass seed or generator, not both")
        cfg = cfg.filled()  # this model's own copy: d_head an int, its own cfg.device
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        self.pos_embed = PosEmbed(cfg)
        self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.blocks = nn.ModuleList([Block(cfg, layer) for layer in range(cfg.n_layers)])
        # a recurrent model's per-iteration HookPoints (`iter.{t}.blocks.{layer}.*`)
        self.iter = nn.ModuleList([IterationHooks(cfg) for _ in range(initial_count(cfg))])
        if cfg.tied_layers:  # the middle blocks 2..n-2 use block 1's attention weights
            for block in self.blocks[2 : cfg.n_layers - 1]:
                for name in ("W_Q", "W_K", "W_V", "W_O"):
                    setattr(block.attn, name, getattr(self.blocks[1].attn, name))
        add_norms(self, cfg, "ln_final")  # model.normalization: before the unembedding
        self.unembed = Unembed(cfg)
        self.setup()
        if seed is not None:
            generator = torch.Generator().manual_seed(int(seed))
        self.init_weights(generator)
        self.cfg.device = self.embed.W_E.device
        if device is not None:
            self.to(device)

    def _apply(self, fn, *args, **kwargs):
        """`to` / `cuda` / `cpu` / ...: also keep `cfg.device` on the weights' device."""
        out = super()._apply(fn, *args, **kwargs)
        if "cfg" in self.__dict__ and hasattr(self, "embed"):
            self.cfg.device = self.embed.W_E.device
        return out

    @torch.no_grad()
    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """Every weight ~ N(0, cfg.init_std_) (TransformerLens's "gpt2" init, no biases); b_rel
        ~ N(0, init_std_ / relative_gain), so that the bias it adds starts as wide at any gain."""
        std = self.cfg.init_std_
        for name, param in self.named_parameters():
            width = std / self.cfg.relative_gain if name.endswith("b_rel") else std
            draw = torch.randn(param.shape, generator=generator, dtype=torch.float32) * width
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

    def ensure_iterations(self, count: int) -> None:
        """HookPoints for iterations 0..count-1 of a recurrent model (added when missing; a
        forward adds those it runs before running, `run_with_hooks` / `run_with_cache`
        before attaching hooks)."""
        if self.cfg.recurrent and count > len(self.iter):
            for _ in range(len(self.iter), count):
                self.iter.append(IterationHooks(self.cfg))
            self.setup()

    def _ensure_for(self, tokens, context: RowContext | None) -> None:
        if self.cfg.recurrent and isinstance(tokens, Tensor):
            rows = row_iterations(self.cfg, tokens, context or RowContext())
            self.ensure_iterations(int(rows.max()) if len(rows) else 1)

    def run_with_hooks(self, *model_args, **model_kwargs):
        if model_args:
            self._ensure_for(model_args[0], model_kwargs.get("context"))
        return super().run_with_hooks(*model_args, **model_kwargs)

    def forward(
        self, tokens: Tensor | str | list[str], labels: Tensor | None = None,
        return_type: ReturnType = "logits", fast: bool = False, last_only: bool = False,
        context: RowContext | None = None,
    ):  # fmt: skip
        """Through every HookPoint: the logits at every position, [batch, pos, d_vocab_out]
        (the task's answer is the last one, `logits[:, -1]`). tokens: [batch, pos] ids, or
        text / a list of texts. return_type: "logits"; "loss": the mean cross-entropy of the
        last position's logits against `labels` [batch] (not TransformerLens's next-token
        loss); "both": (logits, loss); None. last_only: [batch, d_vocab_out] (every activation
        still computed at every position). fast: `forward_fast` (no hooks, last position).
        context: what the forward knows of each row besides its tokens (positional offsets;
        a recurrent model's iterations and value slots: empirical.model.forward.RowContext)."""
        if isinstance(tokens, (str, list, tuple)):
            tokens = self.to_tokens(tokens)
        if fast:
            return self.forward_fast(tokens, labels, return_type)
        tokens = self._check_tokens(tokens)
        self._ensure_for(tokens, context)
        weights = dict(self.named_parameters(remove_duplicate=False))
        hook = point_hooks(self.hook_dict)
        if last_only or return_type in ("loss", None):
            logits = forward(weights, tokens, self.cfg, hook=hook, last_only=True, context=context)
            return self._output(logits, labels, return_type)
        logits = forward(weights, tokens, self.cfg, hook=hook, context=context)
        if return_type == "logits":
            return logits
        _, loss = self._output(logits[:, -1], labels, "both")
        if return_type == "both":
            return logits, loss
        return self._output(logits[:, -1], labels, return_type)  # raises: unknown return_type

    def forward_fast(
        self, tokens: Tensor, labels: Tensor | None = None, return_type: ReturnType = "logits"
    ):
        """Training path: logits at the last position [batch, d_vocab_out] (or the loss), the
        hooked forward's numbers and gradients there, without HookPoints or any
        [batch, L, d_model] tensor (empirical.model.fast; docs/model.md)."""
        if self.has_active_hooks():
            raise RuntimeError(
                "forward_fast bypasses HookPoints but hooks are attached; use forward() "
                "(or model.reset_hooks())"
            )
        tokens = self._check_tokens(tokens)
        if self.cfg.recurrent:
            raise ValueError(
                "forward_fast is the feedforward model's answer position; a recurrent model "
                "reads every position: use forward(tokens, context=...)"
            )
        logits = forward(member_weights(self), tokens.unsqueeze(0), self.cfg, positions="answer")
        return self._output(logits[0], labels, return_type)

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

    # -- text (the task's tokenizer, empirical.task.Vocabulary) ---------------------------------

    @property
    def vocab(self) -> Vocabulary:
        """The task's tokenizer for this model: p = d_vocab_out, K = d_vocab - p - 3, L = n_ctx."""
        vocab = self.__dict__.get("_vocab")
        if vocab is None:
            p = self.cfg.d_vocab_out
            vocab = Vocabulary(p, self.cfg.d_vocab - p - 3, self.cfg.n_ctx)
            self.__dict__["_vocab"] = vocab
        return vocab

    def attach_vocab(self, vocab: Vocabulary) -> None:
        """Use `vocab` (the run's task tokenizer, e.g. a chain task's, whose text has pointer
        assignments `b=a`) for to_tokens / to_str_tokens; `load_run` attaches the run's."""
        sizes = (vocab.d_vocab, vocab.n_classes, vocab.L)
        if sizes != (self.cfg.d_vocab, self.cfg.d_vocab_out, self.cfg.n_ctx):
            raise ValueError(
                f"vocabulary sizes (d_vocab, d_vocab_out, n_ctx) = {sizes} do not match the "
                f"model's {(self.cfg.d_vocab, self.cfg.d_vocab_out, self.cfg.n_ctx)}"
            )
        self.__dict__["_vocab"] = vocab

    def to_tokens(
        self, input: str | list[str] | tuple[str, ...], check: bool = True,
        move_to_device: bool = True, prepend_bos: bool | None = None, **_ignored,
    ) -> Tensor:  # fmt: skip
        """Text -> token ids [1, n_ctx] (a list of texts -> [n, n_ctx]), long, on the model's
        device. Either of the task's text forms: `"c=1, b=17, a=42, b+19=?"` or the token form
        `"c 1 pad b 17 pad ... + b 19 ="`. `check`: refuse sequences whose answer is undefined
        (a variable operand never assigned, a variable assigned twice). There is no BOS token:
        `prepend_bos=True` is an error."""
        if prepend_bos:
            raise ValueError("this model has no BOS token: pass prepend_bos=False (or nothing)")
        if isinstance(input, str):
            texts = [input]
        elif isinstance(input, (list, tuple)) and input and all(isinstance(t, str) for t in input):
            texts = list(input)
        else:
            raise TypeError("to_tokens expects a str or a non-empty list of str")
        tokens = torch.stack([self.vocab.encode(t, check=check) for t in texts])
        return tokens.to(self.device) if move_to_device else tokens

    def to_str_tokens(
        self, input: str | list[str] | Tensor, **kwargs
    ) -> list[str] | list[list[str]]:
        """The token names ("c", "1", "pad", ..., "+", "b", "19", "=") of text or token ids.
        One sequence (a str, ids [pos] or [1, pos]) -> a list of str; several (a list of str,
        ids [n, pos] with n > 1) -> a list of lists."""
        if isinstance(input, (list, tuple)):
            return [self.to_str_tokens(t, **kwargs) for t in input]
        if isinstance(input, str):
            input = self.to_tokens(input, move_to_device=False, **kwargs)
        if not isinstance(input, Tensor):
            raise TypeError("to_str_tokens expects text, a list of texts, or a token tensor")
        if input.ndim == 2 and input.shape[0] == 1:
            input = input[0]
        if input.ndim == 2:
            return [self.to_str_tokens(row) for row in input]
        if input.ndim != 1:
            raise ValueError(f"token ids must be [pos] or [batch, pos], got {tuple(input.shape)}")
        names = self.vocab.names
        ids = input.tolist()
        bad = [t for t in ids if not 0 <= t < len(names)]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary 0..{len(names) - 1}")
        return [names[t] for t in ids]

    # -- hooks and caches -------------------------------------------------------------------

    def has_active_hooks(self) -> bool:
        return any(hp.fwd_hooks or hp.bwd_hooks for hp in self.hook_dict.values())

    def run_with_cache(
        self, *model_args, return_cache_object: bool = True, remove_batch_dim: bool = False, **kw
    ):
        """`(output, cache)`, cache an `ActivationCache` (subclass `AssignAddCache`) with this
        model as `cache.model`, so `cache["pattern", 1]`, `accumulated_resid()`,
        `decompose_resid()`, `stack_activation(...)`, `stack_head_results()` work."""
        if model_args:
            self._ensure_for(model_args[0], kw.get("context"))
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

    W_Q = _stacked("W_Q")  # [n_layers, n_heads, d_model, d_head]
    W_K = _stacked("W_K")  # [n_layers, n_heads, d_model, d_head]
    W_V = _stacked("W_V")  # [n_layers, n_heads, d_model, d_head]
    W_O = _stacked("W_O")  # [n_layers, n_heads, d_head, d_model]

    @property
    def W_in(self) -> Tensor:
        """The one MLP's (the last block's) input weights, [d_model, d_mlp] (not stacked)."""
        return self.blocks[-1].mlp.W_in

    @property
    def W_out(self) -> Tensor:
        """The one MLP's (the last block's) output weights, [d_mlp, d_model] (not stacked)."""
        return self.blocks[-1].mlp.W_out

    @property
    def QK(self) -> FactoredMatrix:  # [n_layers, n_heads, d_model, d_model]
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:  # [n_layers, n_heads, d_model, d_model]
        return FactoredMatrix(self.W_V, self.W_O)

    def tokens_to_residual_directions(self, tokens: int | Tensor) -> Tensor:
        """Unembedding directions of output classes: [..., d_model] (for `cache.logit_attrs`)."""
        return self.W_U.T[tokens]
