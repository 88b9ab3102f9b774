"""The HookPoints of a recurrent model's iterations: `iter.{t}.blocks.{layer}.*` (the same
names under each block as the feedforward model's `blocks.{layer}.*`), `iter.{t}.hook_readout`
(the readout after iteration t, [batch, pos, d_vocab_out]) and `iter.{t}.hook_value_embed`
(the fed-back values' embedding, t >= 1, with model.discrete_state). No parameters: the
block's weights are the model's `blocks.{layer}.*`.
"""

from __future__ import annotations

from torch import nn
from transformer_lens.hook_points import HookPoint


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

    def __init__(self, has_mlp: bool):
        super().__init__()
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
            [BlockHooks(layer in cfg.mlp_layers) for layer in range(cfg.n_layers)]
        )
        self.hook_value_embed = HookPoint()
        self.hook_readout = HookPoint()


def initial_count(cfg) -> int:
    """Iterations with HookPoints when a model is built: model.iterations ("fixed"); with
    "depth" the model adds more before a forward that runs longer (`ensure_iterations`)."""
    return cfg.iterations if cfg.recurrent else 0
