"""The theorem's model in compare-qk's coordinates (compare_qk.coords.Coordinates): the labels
are exact unit vectors of the basis block (layout.py), unlike what `compare_qk.coords.
coordinates(model, ...)` would infer (sequence positions reordered, layer 1 writing 2 ebar).
"""

from __future__ import annotations

import torch

from empirical.bridge.compare_qk.coords import Coordinates, col_labels, row_labels
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.construct import model_config
from empirical.bridge.theorem_model.layout import Layout


def theorem_coordinates(cfg: TheoremModelConfig) -> Coordinates:
    """compare-qk's labelled query/key vectors of the theorem's model: unit vectors of the
    residual at the basis coordinates of each label, with the model's score scale."""
    lay = Layout(cfg)
    basis, d = lay.basis, lay.d_model
    eye = torch.eye(d, dtype=torch.float64)
    rows = row_labels(cfg.K, cfg.L)
    cols = col_labels(cfg.p, cfg.K, cfg.L)
    return Coordinates(
        rows=rows,
        cols=cols,
        Q=eye[[basis.index(r) for r in rows]],
        K=eye[[basis.index(c) for c in cols]],
        scale=float(model_config(cfg).attn_scale),
        p=cfg.p,
        n_vars=cfg.K,
        L=cfg.L,
    )
