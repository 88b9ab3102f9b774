"""The two-hop chain model's coordinates in a trained chain run (docs/compare_qk.md, "Deeper
models (chain runs)", "The map"): the middle hop's W2 and the last hop's W3 are the key-query
matrices of blocks n-2 and n-1 (0-based), read between labelled residual vectors as
`coords.coordinates` does for the one-hop model, the ebar rows through the OV of the layer
that writes them in the construction (`hop_blocks`). `chain_chunk` turns a run's sequences
into the disentangled chain model's inputs, on which `qk_theory` evaluates the theory.
"""

from __future__ import annotations

import torch
from torch import Tensor

from disentangled.basis import Basis
from disentangled.population import CompactChunk as ChainChunk
from empirical.bridge.compare_qk.coords import (
    Coordinates,
    col_labels,
    labelled_coordinates,
    row_labels,
)
from empirical.model import circuits


def ov_image(model, p: int, K: int, block: int) -> Tensor:
    """W_E[var u] @ W_OV of `block` for the K variables, [K, d] (float64)."""
    E = model.W_E.detach().to(torch.float64)
    return E[p : p + K] @ circuits.ov_matrix(model, block, dtype=torch.float64)


@torch.no_grad()
def layer_coordinates(model, vocab, block: int, query_ov: int, key_ov: int = 0) -> Coordinates:
    """The labelled query / key vectors for the key-query matrix of `block` (0-based), the
    query's ebar through block `query_ov`'s OV, the keys' through block `key_ov`'s."""
    p, K, L = vocab.p, vocab.K, vocab.L
    q_bar, k_bar = ov_image(model, p, K, query_ov), ov_image(model, p, K, key_ov)
    return labelled_coordinates(model, p, K, L, q_bar, k_bar)


def hop_blocks(n_layers: int) -> dict[str, dict[str, int]]:
    """{"last": {"block", "query_ov"}, "middle": {...}} (0-based blocks) of an n-layer model."""
    if n_layers < 3:
        raise ValueError(f"a two-hop map needs >= 3 layers, got {n_layers}")
    return {
        "last": {"block": n_layers - 1, "query_ov": n_layers - 2},
        "middle": {"block": n_layers - 2, "query_ov": 0},
    }


def label_block(M: Tensor, basis: Basis, L: int) -> Tensor:
    """M [dim, dim] of the basis (row = query, column = key) restricted to the comparison's
    rows (`coords.row_labels`) and columns (`coords.col_labels`)."""
    rows = [basis.index(r) for r in row_labels(basis.K, L)]
    cols = [basis.index(c) for c in col_labels(basis.p, basis.K, L)]
    return M[rows][:, cols]


def chain_chunk(tokens: Tensor, labels: Tensor, vocab, weight: float = 1.0) -> ChainChunk:
    """The disentangled chain model's inputs for the run's sequences `tokens` [N, L]: every
    sequence weighted weight / N. Fields the forward pass does not read (bound, pointer_rhs,
    resolved) are left empty (-1)."""
    p, K, L = vocab.p, vocab.K, vocab.L
    basis = Basis(p, K, L)
    N = int(tokens.shape[0])
    lut = torch.full((vocab.d_vocab,), basis.dim, dtype=torch.long)
    lut[:p] = torch.tensor([basis.n(m) for m in range(p)])
    lut[p : p + K] = torch.tensor([basis.v(u) for u in range(K)])
    lut[vocab.plus], lut[vocab.eq], lut[vocab.pad] = basis.plus, basis.eq, basis.pad
    tok = lut[tokens.long()]
    bars = torch.full((N, L, 2), basis.dim, dtype=torch.long)
    for n in range(N):
        assigns, a, b = vocab._parse_ids(tokens[n])
        for var, _value, lhs in assigns:
            bars[n, lhs + 1, 0] = basis.bar_v(var)
        for k, operand in enumerate((a, b)):
            if p <= operand < p + K:
                bars[n, L - 1, k] = basis.bar_v(operand - p)
    empty = torch.full((N, L), -1, dtype=torch.long)
    return ChainChunk(
        tok=tok,
        bars=bars,
        labels=labels.long().clone(),
        weights=torch.full((N,), weight / N, dtype=torch.float64),
        bound=empty,
        pointer_rhs=empty.clone(),
        resolved=torch.full((N, 2), -1, dtype=torch.long),
    )
