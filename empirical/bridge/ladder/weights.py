"""The merged weights a ladder rung's forward reads (score matrices W_Q W_K^T, value-output
matrices W_V W_O), taken from an `AssignAddTransformer`, and written back into a fresh float64
one with d_head = d_model (W_Q := M, W_K := I; W_V := OV, W_O := I: any [d, d] matrix exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer

DTYPE = torch.float64


@dataclass
class Merged:
    """float64 merged weights of a 2-layer model: embeddings, layer-1 score matrix QK1 and
    value-output OV1, layer-2 QK2 and OV2 (each M with score = x M y^T / scale), the layer-2
    MLP (W_in, W_out, act_fn) and the unembedding."""

    W_E: Tensor
    W_pos: Tensor
    QK1: Tensor
    OV1: Tensor
    QK2: Tensor
    OV2: Tensor
    W_in: Tensor
    W_out: Tensor
    W_U: Tensor
    scale: float
    act_fn: str

    @staticmethod
    def of(model: AssignAddTransformer) -> Merged:
        """The merged weights of `model` (float64 copies)."""

        def d(t):
            return t.detach().to(DTYPE).cpu().clone()

        model.cfg.require_one_head("the ladder's merged weights")
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        return Merged(
            W_E=d(model.W_E), W_pos=d(model.W_pos),
            QK1=d(a0.W_Q[0]) @ d(a0.W_K[0]).T, OV1=d(a0.W_V[0]) @ d(a0.W_O[0]),
            QK2=d(a1.W_Q[0]) @ d(a1.W_K[0]).T, OV2=d(a1.W_V[0]) @ d(a1.W_O[0]),
            W_in=d(model.W_in), W_out=d(model.W_out), W_U=d(model.W_U),
            scale=float(model.cfg.attn_scale), act_fn=model.cfg.act_fn,
        )  # fmt: skip

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]


@torch.no_grad()
def build_model(w: Merged, p: int, K: int, L: int) -> AssignAddTransformer:
    """A float64 AssignAddTransformer (d_head = d_model) holding exactly the merged weights
    `w`; its attention scale sqrt(d_model) must equal w.scale (ValueError otherwise)."""
    d = w.d_model
    cfg = ModelConfig.for_task(
        p, K, L, d_model=d, d_head=d, d_mlp=w.W_in.shape[1], dtype="float64", act_fn=w.act_fn
    )
    model = AssignAddTransformer(cfg, seed=0)
    if abs(float(model.cfg.attn_scale) - w.scale) > 1e-12 * w.scale:
        raise ValueError(f"scale {w.scale} differs from the model's {model.cfg.attn_scale}")
    eye = torch.eye(d, dtype=DTYPE)
    model.W_E.copy_(w.W_E)
    model.W_pos.copy_(w.W_pos)
    for block, QK, OV in ((0, w.QK1, w.OV1), (1, w.QK2, w.OV2)):
        attn = model.blocks[block].attn
        attn.W_Q[0].copy_(QK)
        attn.W_K[0].copy_(eye)
        attn.W_V[0].copy_(OV)
        attn.W_O[0].copy_(eye)
    model.W_in.copy_(w.W_in)
    model.W_out.copy_(w.W_out)
    model.W_U.copy_(w.W_U)
    model.eval()
    return model
