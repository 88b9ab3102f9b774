"""The theorem's labelled vectors of a checkpoint, from its weights (the one implementation:
compare-qk's coordinates, the attribution's score target and train.project_out build them).

    ebar = ebar_of(W_E, W_V1, W_O1, p, K)        # [K, d]: layer 1's copy of each variable
    Q, Kv = query_key_vectors(W_E, W_pos, ebar, ebar, p, K, L)

Query rows: W_E[=], W_pos[L-1], the query ebar; key columns: W_E of the p numbers, the K
variables, `=`, `+`, pad, W_pos[0..L-1], the key ebar (empirical/bridge/compare_qk/coords.py
names them). Plain differentiable tensor functions, in their inputs' dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor

from disentangled.basis import Basis

RTOL = 1e-6  # Gram eigenvalues below RTOL * max count as zero (a merged pair of labels)


def row_labels(K: int, L: int) -> list[str]:
    """Query-side labels: `=`, pos{L-1}, bar_v{u}."""
    return ["=", f"pos{L - 1}"] + [f"bar_v{u}" for u in range(K)]


def col_labels(p: int, K: int, L: int) -> list[str]:
    """Key-side labels: the simulator's basis without the bar_n (never a key in the model)."""
    return [lab for lab in Basis(p, K, L).labels if not lab.startswith("bar_n")]


def ebar_of(W_E: Tensor, W_V: Tensor, W_O: Tensor, p: int, K: int) -> Tensor:
    """ebar_u = W_E[p + u] @ W_V @ W_O for the K variables, [K, d] (W_V, W_O of one head of
    layer 1: [d, d_head], [d_head, d])."""
    return W_E[p : p + K] @ W_V @ W_O


def query_key_vectors(
    W_E: Tensor, W_pos: Tensor, query_ebar: Tensor, key_ebar: Tensor, p: int, K: int, L: int
) -> tuple[Tensor, Tensor]:
    """(Q [2 + K, d], K [p + K + 3 + L + K, d]): the labelled query and key vectors (module
    docstring). The token ids are the vocabulary's: numbers 0..p-1, variables p..p+K-1, then
    +, =, pad."""
    plus, eq, pad = p + K, p + K + 1, p + K + 2
    Q = torch.cat([W_E[eq][None], W_pos[L - 1][None], query_ebar])
    Kv = torch.cat([W_E[:p], W_E[p : p + K], W_E[[eq, plus, pad]], W_pos[:L], key_ebar])
    return Q, Kv


def dual_vectors(V: Tensor, rtol: float = RTOL) -> Tensor:
    """(V V^T)^+ V: the dual basis of the rows of V on their span (rows r with
    <r*_i, v_j> = delta_ij when the rows of V are independent); Gram eigenvalues below
    rtol * max are dropped (as compare-qk's Loewdin frame does)."""
    G = V @ V.T
    e, U = torch.linalg.eigh(G)
    keep = e > rtol * e.max()
    inv = torch.where(keep, 1.0 / e.clamp_min(1e-300), torch.zeros_like(e))
    return (U @ torch.diag(inv) @ U.T) @ V
