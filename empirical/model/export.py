"""Export our model to a TransformerLens 3.x `HookedTransformer` (for tools written against it).

    ht = to_hooked_transformer(model)            # needs transformer-lens >= 3.9, < 4
    ht(tokens)                                   # the same logits [batch, pos, p] (to ~1e-6)
    ht.run_with_cache(tokens)                    # TransformerLens 3's hook names, same values

Our architecture in its terms: every bias zero, the MLPs of the blocks before the last all
zeros (they add exactly 0), our token ids and no tokenizer (pass ids, e.g.
`model.to_tokens(text)`); same dtype and device, eval mode. TransformerLens 4 has no
`HookedTransformer`: there this raises an ImportError saying so.
"""

from __future__ import annotations

import torch

from empirical.config.io import ConfigError
from empirical.model.transformer import AssignAddTransformer


def hooked_transformer_classes():
    """(HookedTransformer, HookedTransformerConfig) from TransformerLens 3.x, or ImportError."""
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as exc:
        import transformer_lens

        version = getattr(transformer_lens, "__version__", "4.x")
        raise ImportError(
            "to_hooked_transformer needs TransformerLens 3.x (pip install "
            f"'transformer-lens>=3.9,<4'): this TransformerLens ({version}) has no "
            "HookedTransformer. AssignAddTransformer itself works with TransformerLens 3 and 4."
        ) from exc
    return HookedTransformer, HookedTransformerConfig


def hooked_transformer_config(model: AssignAddTransformer):
    """The `HookedTransformerConfig` of our architecture."""
    _, HookedTransformerConfig = hooked_transformer_classes()
    cfg = model.cfg
    return HookedTransformerConfig(
        n_layers=cfg.n_layers, d_model=cfg.d_model, n_ctx=cfg.n_ctx, d_head=cfg.d_head_,
        n_heads=cfg.n_heads, d_mlp=cfg.d_mlp, d_vocab=cfg.d_vocab, d_vocab_out=cfg.d_vocab_out,
        act_fn="relu", normalization_type=None, attn_only=False,
        positional_embedding_type="standard", attention_dir="causal",
        original_architecture="AssignAddTransformer", default_prepend_bos=False,
        init_weights=False, device=str(model.device), dtype=model.dtype,
    )  # fmt: skip


@torch.no_grad()
def to_hooked_transformer(model: AssignAddTransformer):
    """A TransformerLens 3.x `HookedTransformer` computing the same function as `model`
    (softmax attention: TransformerLens has no linear attention or HYLA)."""
    if model.cfg.attention != "softmax":
        raise ConfigError(
            f"to_hooked_transformer: TransformerLens's attention is softmax; this model has "
            f"model.attention = {model.cfg.attention!r}"
        )
    HookedTransformer, _ = hooked_transformer_classes()
    ht = HookedTransformer(hooked_transformer_config(model))
    ours = model.state_dict()
    absent_mlps = tuple(f"blocks.{i}.mlp." for i in range(model.cfg.n_layers - 1))
    state = {}
    for name, value in ht.state_dict().items():
        if name in ours:
            if ours[name].shape != value.shape:
                raise ValueError(
                    f"{name}: our shape {tuple(ours[name].shape)} != HookedTransformer's "
                    f"{tuple(value.shape)}"
                )
            state[name] = ours[name].detach().clone()
        elif any(part in name for part in (".b_", "b_U")) or name.startswith(absent_mlps):
            state[name] = torch.zeros_like(value)  # biases and the absent MLPs (all but last)
        else:
            state[name] = value  # buffers (causal mask, IGNORE)
    missing = set(ours) - set(state)
    if missing:
        raise ValueError(f"weights with no place in the HookedTransformer: {sorted(missing)}")
    ht.load_state_dict(state)
    return ht.to(model.device).eval()
