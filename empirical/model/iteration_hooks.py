"""The HookPoints of a recurrent model's iterations: `iter.{t}.blocks.{layer}.*` (the same
names under each block as the feedforward model's `blocks.{layer}.*`), `iter.{t}.hook_readout`
(the readout after iteration t, [batch, pos, d_vocab_out]) and `iter.{t}.hook_value_embed`
(the fed-back values' embedding, t >= 1, with model.discrete_state), and with
model.normalization `ln1` / `ln2` / `ln_final` (`LayerNormHooks`). No parameters: the block's
weights are the model's `blocks.{layer}.*`.
"""

from __future__ import annotations

from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from empirical.model.forward import layer_norm_pre


class LayerNormHooks(nn.Module):
    """A weightless LayerNorm's HookPoints (TransformerLens's LayerNormPre: hook_scale
    [batch, pos, 1], hook_normalized [batch, pos, d_model]; empirical.model.forward.normalized)."""

    def __init__(self):
        super().__init__()
        self.hook_scale = HookPoint()
        self.hook_normalized = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        """The normalization itself, through these HookPoints (what TransformerLens's
        `ActivationCache.apply_ln_to_stack` calls on `model.ln_final`)."""
        return layer_norm_pre(x, lambda name, value: getattr(self, name)(value))


def add_norms(module: nn.Module, cfg, *names: str) -> None:
    """`module.{name}` = LayerNormHooks() for each name, when model.normalization is set."""
    if cfg.normalization != "none":
        for name in names:
            setattr(module, name, LayerNormHooks())


class AttentionHooks(nn.Module):
    def __init__(self):
        super().__init__()
        for name in ("q", "k", "v", "attn_scores", "pattern", "z", "result"):
            setattr(self, f"hook_{name}", HookPoint())


class MLPHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()


class BlockHooks(nn.Module):
    """One block's HookPoints (empirical.model.transformer.Block's, without weights)."""

    def __init__(self, cfg, has_mlp: bool):
        super().__init__()
        add_norms(self, cfg, "ln1", *(("ln2",) if has_mlp else ()))
        self.attn = AttentionHooks()
        self.mlp = MLPHooks() if has_mlp else None
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        if has_mlp:
            self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()


class IterationHooks(nn.Module):
    """Iteration t's HookPoints: its blocks', its readout's, its fed-back values'."""

    def __init__(self, cfg):
        super().__init__()
        self.blocks = nn.ModuleList(
            [BlockHooks(cfg, layer in cfg.mlp_layers) for layer in range(cfg.n_layers)]
        )
        add_norms(self, cfg, "ln_final")
        self.hook_value_embed = HookPoint()
        self.hook_readout = HookPoint()


def initial_count(cfg) -> int:
    """Iterations with HookPoints when a model is built: model.iterations ("fixed"); with
    "depth" the model adds more before a forward that runs longer (`ensure_iterations`)."""
    return cfg.iterations if cfg.recurrent else 0
