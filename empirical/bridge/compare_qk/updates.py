"""What an observed snapshot-to-snapshot update is made of: AdamW's weight decay
(`decay_factor`, `undecayed_update`) and the parts of the labelled score change from W_QK
changing and from the vectors moving (`score_attribution`).
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from empirical.bridge.compare_qk.coords import Coordinates
from empirical.bridge.compare_qk.metrics import subblock
from empirical.train.schedule import learning_rate, schedule_of


def decay_factor(train_cfg, step: int, next_step: int) -> float:
    """prod_{k = step}^{next_step - 1} (1 - lr_k * weight_decay): what AdamW's decoupled weight
    decay alone does to a parameter between two snapshots (lr_k from the run's schedule; a
    resume that changed lr or weight decay is not seen: the run's config is used)."""
    wd = float(train_cfg.weight_decay)
    kw = schedule_of(train_cfg)
    c = 1.0
    for k in range(step, next_step):
        c *= 1.0 - learning_rate(k, train_cfg.lr, **kw) * wd
    return c


def undecayed_update(W_Q0: Tensor, W_K0: Tensor, W_Q1: Tensor, W_K1: Tensor, c: float) -> Tensor:
    """W_Q1' W_K1'^T - W_Q0 W_K0^T with F1' = F1 + (1 - c) F0 for each factor F (W_Q, W_K):
    the merged update with the starting factors' weight decay added back, c = `decay_factor`
    (pure decay gives 0 exactly)."""
    Q1 = W_Q1 + (1.0 - c) * W_Q0
    K1 = W_K1 + (1.0 - c) * W_K0
    return Q1 @ K1.T - W_Q0 @ W_K0.T


def score_attribution(c0: Coordinates, c1: Coordinates, W0: Tensor, W1: Tensor) -> dict:
    """The change of the labelled scores S = Q W_QK K^T / s (raw) between two snapshots,
    split exactly into w_qk = Q0 dW K0^T / s (W_QK changes, vectors held), vectors =
    (Q1 W0 K1^T - Q0 W0 K0^T) / s and cross = Q1 dW K1^T / s - w_qk. Returns {'norm': {sub:
    {part: Frobenius norm}}, 'share': {sub: {part: <part, total> / |total|^2}}} for 'all'
    and 'barv_barv'; the three shares sum to 1."""
    S0 = c0.project(W0)
    parts = {
        "total": c1.project(W1) - S0,
        "w_qk": c0.project(W1 - W0),
        "vectors": c1.project(W0) - S0,
    }
    parts["cross"] = c1.project(W1 - W0) - parts["w_qk"]
    out: dict = {"norm": {}, "share": {}}
    for sub in ("all", "barv_barv"):
        blk = {k: subblock(v, c0.rows, c0.cols, sub) for k, v in parts.items()}
        tot2 = float((blk["total"] ** 2).sum())
        out["norm"][sub] = {k: float(np.linalg.norm(v)) for k, v in blk.items()}
        out["share"][sub] = {
            k: (float((v * blk["total"]).sum()) / tot2 if tot2 > 0 else float("nan"))
            for k, v in blk.items()
            if k != "total"
        }
    return out
