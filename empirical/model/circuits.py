"""Dense circuit matrices of one block's heads, as analysis and the theory use them.

    qk_matrix(model, 1)                                   # W_Q W_K^T / sqrt(d_head): the scores
    qk_matrix(model, 1, scaled=False, dtype=torch.float64)  # the theorem's unscaled W_QK
    qk_matrix(model, 1, head=2)                           # head 2's, of a multi-head model
    ov_matrix(model, 0)                                   # W_V W_O
    layer_ov(model, 1)                                    # sum over the heads of W_V W_O

`head=None` reads the single head (a model with more heads refuses: say which head); `layer_ov`
is the layer's value-output map when every head attends alike (docs/heads.md). HYLA's value
path (model.attention = "hyla") is no W_V W_O: the OV functions refuse it (`ov_applies`).
(`model.QK` / `model.OV` hold the same products per head as FactoredMatrix objects.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from empirical.config.io import ConfigError
from empirical.model.attention import LINEAR_MIX_KINDS


def _head(model, head: int | None, what: str) -> int:
    if head is None:
        model.cfg.require_one_head(what)
        return 0
    if not 0 <= head < model.cfg.n_heads:
        raise ValueError(f"{what}: head {head} of a model with {model.cfg.n_heads} heads")
    return head


def ov_applies(cfg) -> str | None:
    """None where a layer's value path is W_V W_O per head; else why not (HYLA)."""
    if cfg.attention in LINEAR_MIX_KINDS:
        return None
    return (f"model.attention = {cfg.attention!r}: the value path is a ReLU network mixed by "
            "the heads' code, not W_V W_O")  # fmt: skip


def qk_matrix(
    model, layer: int, scaled: bool = True, dtype: torch.dtype | None = None,
    head: int | None = None,
) -> Tensor:  # fmt: skip
    """W_Q W_K^T of block `layer` (0 = the paper's layer 1), [d_model (query), d_model (key)];
    divided by sqrt(d_head) when `scaled` (then x_q @ it @ x_k is the attention score),
    computed in `dtype` (default: the model's) from detached weights when a dtype is given;
    `head`: which head (None: the single head)."""
    h = _head(model, head, "qk_matrix")
    attn = model.blocks[layer].attn
    W_Q, W_K = attn.W_Q[h], attn.W_K[h]
    if dtype is not None:
        W_Q, W_K = W_Q.detach().to(dtype), W_K.detach().to(dtype)
    qk = W_Q @ W_K.T
    return qk / model.cfg.attn_scale if scaled else qk


def ov_matrix(
    model, layer: int, dtype: torch.dtype | None = None, head: int | None = None
) -> Tensor:
    """W_V W_O of block `layer`, [d_model (source row vector), d_model (written vector)];
    `head`: which head (None: the single head)."""
    reason = ov_applies(model.cfg)
    if reason:
        raise ConfigError(f"ov_matrix: {reason}")
    h = _head(model, head, "ov_matrix")
    attn = model.blocks[layer].attn
    W_V, W_O = attn.W_V[h], attn.W_O[h]
    if dtype is not None:
        W_V, W_O = W_V.detach().to(dtype), W_O.detach().to(dtype)
    return W_V @ W_O


def layer_ov(model, layer: int, dtype: torch.dtype | None = None) -> Tensor:
    """The sum over block `layer`'s heads of W_V W_O (one head: `ov_matrix`, the same
    numbers): what the layer writes from a position every head attends to alike."""
    if model.cfg.n_heads == 1:
        return ov_matrix(model, layer, dtype)
    return sum(ov_matrix(model, layer, dtype, h) for h in range(model.cfg.n_heads))
