"""Dense circuit matrices of one block's single head, as analysis and the theory use them.

    qk_matrix(model, 1)                                   # W_Q W_K^T / sqrt(d_head): the scores
    qk_matrix(model, 1, scaled=False, dtype=torch.float64)  # the theorem's unscaled W_QK
    ov_matrix(model, 0)                                   # W_V W_O

(`model.QK` / `model.OV` hold the same products as FactoredMatrix objects.)
"""

from __future__ import annotations

import torch
from torch import Tensor


def qk_matrix(model, layer: int, scaled: bool = True, dtype: torch.dtype | None = None) -> Tensor:
    """W_Q W_K^T of block `layer` (0 = the paper's layer 1), [d_model (query), d_model (key)];
    divided by sqrt(d_head) when `scaled` (then x_q @ it @ x_k is the attention score),
    computed in `dtype` (default: the model's) from detached weights when a dtype is given."""
    model.cfg.require_one_head("qk_matrix")
    attn = model.blocks[layer].attn
    W_Q, W_K = attn.W_Q[0], attn.W_K[0]
    if dtype is not None:
        W_Q, W_K = W_Q.detach().to(dtype), W_K.detach().to(dtype)
    qk = W_Q @ W_K.T
    return qk / model.cfg.attn_scale if scaled else qk


def ov_matrix(model, layer: int, dtype: torch.dtype | None = None) -> Tensor:
    """W_V W_O of block `layer`, [d_model (source row vector), d_model (written vector)]."""
    model.cfg.require_one_head("ov_matrix")
    attn = model.blocks[layer].attn
    W_V, W_O = attn.W_V[0], attn.W_O[0]
    if dtype is not None:
        W_V, W_O = W_V.detach().to(dtype), W_O.detach().to(dtype)
    return W_V @ W_O
