"""The rungs of the assumption ladder: from Theorem C.1's model to the trained model at one
snapshot, each differing from the one before in one named piece (`RUNG_NAMES`, `CHANGED`,
`DESCRIPTION`; docs/ladder.md, "The rungs"). A rung's residual is the theorem's (2 dim + p)
followed by the trained model's; a trained piece reads the first through the label map P
(`label_map`) and the second as is, and writes into the second.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor

from disentangled.basis import Basis
from disentangled.model import fourier_mlp_weights
from empirical.bridge.compare_qk.coords import (
    Coordinates,
    col_labels,
    coordinates,
    ebar_vectors,
    row_labels,
)
from empirical.bridge.ladder.weights import DTYPE, Merged

RUNG_NAMES = (
    "theorem", "order", "data", "loss", "readout", "layer1", "embeddings", "trained", "optimiser",
)  # fmt: skip
CHANGED = {
    "theorem": None, "order": "order", "data": "data", "loss": "loss", "readout": "readout",
    "layer1": "layer1", "embeddings": "embeddings", "trained": "qk", "optimiser": "update",
}  # fmt: skip
DESCRIPTION = {
    "theorem": "Theorem C.1's model, first-order loss, 1-var data with the variable second, "
    "unrestricted",
    "order": "either operand order (the task's 1-var sequences), still unrestricted",
    "data": "the run's 1-var training restrictions (r1/r2, held-out pairs): its 1-var training "
    "distribution, compare-qk's batch",
    "loss": "cross-entropy at the trained model's logit scale instead of the first-order loss",
    "readout": "trained layer-2 OV + MLP + unembedding instead of the theorem's W_OV and F",
    "layer1": "trained layer 1 (attention and OV) instead of the theorem's routing",
    "embeddings": "trained token and position embeddings (W^0 lifted through them)",
    "trained": "trained layer-2 W_QK instead of W^0: the trained model",
    "optimiser": "the AdamW update to the next snapshot instead of the gradient",
}
# the pieces a rung is made of, and which of them each rung takes from the trained model
PIECES = ("order", "data", "loss", "readout", "layer1", "embeddings", "qk", "update")


@dataclass
class Rung:
    """One rung: its model's merged weights, whether layer 1 is the theorem's routing, its
    loss and data, its labelled vectors (compare-qk Coordinates) and the pieces it holds."""

    name: str
    w: Merged
    routing: bool
    loss: str
    data: str  # 'theorem' (fixed, unrestricted), 'mixed' (unrestricted) or 'run' (training)
    coords: Coordinates
    pieces: dict = field(default_factory=dict)  # piece -> 'theorem' or 'trained'
    notes: str = ""


@dataclass
class Sizes:
    """Index maps of the hybrid residual: theorem basis [0, dim), its W_OV space
    [dim, 2 dim), F's output [2 dim, 2 dim + p), the trained model's space after that."""

    p: int
    K: int
    L: int
    d_trained: int

    @property
    def basis(self) -> Basis:
        return Basis(self.p, self.K, self.L)

    @property
    def dim(self) -> int:
        return self.basis.dim

    @property
    def f_offset(self) -> int:
        return 2 * self.dim

    @property
    def e_offset(self) -> int:
        return 2 * self.dim + self.p

    @property
    def d(self) -> int:
        return self.e_offset + self.d_trained


def label_map(t: Merged, s: Sizes) -> Tensor:
    """P [e_offset, d_trained]: each coordinate of the theorem's residual to the trained
    vector of its label (n{m} -> W_E[m], v{u} -> W_E[var u], `=`, `+`, pad -> W_E,
    pos{t} -> W_pos[t], bar_v{u} -> ebar_u = W_E[var u] W_OV^1, bar_n -> 0); W_OV's and F's
    spaces to 0."""
    b, p, K = s.basis, s.p, s.K
    P = torch.zeros((s.e_offset, s.d_trained), dtype=DTYPE)
    ebar = t.W_E[p : p + K] @ t.OV1
    for m in range(p):
        P[b.n(m)] = t.W_E[m]
    for u in range(K):
        P[b.v(u)] = t.W_E[p + u]
        P[b.bar_v(u)] = ebar[u]
    for label, vid in (("=", p + K + 1), ("+", p + K), ("pad", p + K + 2)):
        P[b.index(label)] = t.W_E[vid]
    for pos in range(s.L):
        P[b.pos(pos)] = t.W_pos[pos]
    return P


def w0_block(beta: float, rows: list[str], cols: list[str], L: int) -> np.ndarray:
    """W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T as a labelled block."""
    S = np.zeros((len(rows), len(cols)))
    for c in (f"pos{L - 3}", f"pos{L - 2}"):
        S[rows.index("="), cols.index(c)] = beta
    return S


def theorem_coords(s: Sizes, bar_v: Tensor | None = None) -> Coordinates:
    """Labelled vectors of a rung with the theorem's embeddings: unit vectors at the basis
    coordinates; bar_v: [K, d] vectors of the bar_v labels instead (what a trained layer 1
    writes)."""
    b, d = s.basis, s.d
    eye = torch.eye(d, dtype=DTYPE)
    rows, cols = row_labels(s.K, s.L), col_labels(s.p, s.K, s.L)

    def vec(label):
        if bar_v is not None and label.startswith("bar_v"):
            return bar_v[int(label[5:])]
        return eye[b.index(label)]

    return Coordinates(
        rows=rows, cols=cols, Q=torch.stack([vec(r) for r in rows]),
        K=torch.stack([vec(c) for c in cols]), scale=float(np.sqrt(d)), p=s.p, n_vars=s.K,
        L=s.L,
    )  # fmt: skip


def _zeros(*shape) -> Tensor:
    return torch.zeros(shape, dtype=DTYPE)


def theorem_weights(s: Sizes, beta: float, xi: float) -> Merged:
    """Merged weights of the theorem's model in the hybrid residual (trained space unused)."""
    b, d, p, K, dim = s.basis, s.d, s.p, s.K, s.dim
    scale = float(np.sqrt(d))
    W_E = _zeros(p + K + 3, d)
    for m in range(p):
        W_E[m, b.n(m)] = 1.0
    for u in range(K):
        W_E[p + u, b.v(u)] = 1.0
    for label, vid in (("=", p + K + 1), ("+", p + K), ("pad", p + K + 2)):
        W_E[vid, b.index(label)] = 1.0
    W_pos = _zeros(s.L, d)
    for t in range(s.L):
        W_pos[t, b.pos(t)] = 1.0
    OV1 = _zeros(d, d)
    for u in range(K):
        OV1[b.v(u), b.bar_v(u)] = 2.0
    QK2 = _zeros(d, d)
    for t in (s.L - 3, s.L - 2):
        QK2[b.index("="), b.pos(t)] = beta * scale
    OV2 = _zeros(d, d)
    OV2[torch.arange(dim), dim + torch.arange(dim)] = 1.0
    A, B = fourier_mlp_weights(p)
    W_in = _zeros(d, 4 * p)
    W_in[[dim + b.n(m) for m in range(p)]] = A
    W_out = _zeros(4 * p, d)
    W_out[:, s.f_offset : s.f_offset + p] = B
    W_U = _zeros(d, p)
    W_U[s.f_offset : s.f_offset + p] = xi * torch.eye(p, dtype=DTYPE)
    return Merged(W_E, W_pos, _zeros(d, d), OV1, QK2, OV2, W_in, W_out, W_U, scale, "quadratic")


def _lift_reader(P: Tensor, R: Tensor) -> Tensor:
    """A trained reading matrix R [d_trained, k] as a reader of the hybrid residual:
    [P R; R]."""
    return torch.cat([P @ R, R])


def _into_trained(s: Sizes, X: Tensor) -> Tensor:
    """[rows, d_trained] written into the trained coordinates of the hybrid residual."""
    out = _zeros(X.shape[0], s.d)
    out[:, s.e_offset :] = X
    return out


def with_readout(base: Merged, t: Merged, s: Sizes) -> Merged:
    """`base` with the trained layer-2 OV, MLP and unembedding reading through the label map."""
    P = label_map(t, s)
    OV2 = torch.zeros_like(base.OV2)
    OV2[:, s.e_offset :] = _lift_reader(P, t.OV2)
    W_out = _zeros(t.W_out.shape[0], s.d)
    W_out[:, s.e_offset :] = t.W_out
    return replace(base, OV2=OV2, W_in=_lift_reader(P, t.W_in), W_out=W_out,
                   W_U=_lift_reader(P, t.W_U), act_fn=t.act_fn)  # fmt: skip


def with_layer1(base: Merged, t: Merged, s: Sizes) -> Merged:
    """`base` with the trained layer 1 (scores and OV) reading through the label map and
    writing into the trained coordinates."""
    P = label_map(t, s)
    R = torch.cat([P, torch.eye(s.d_trained, dtype=DTYPE)])  # [d, d_trained]
    QK1 = R @ (t.QK1 / t.scale) @ R.T * base.scale
    OV1 = torch.zeros_like(base.OV1)
    OV1[:, s.e_offset :] = R @ t.OV1
    return replace(base, QK1=QK1, OV1=OV1)


def square_scale(t: Merged) -> Merged:
    """`t` with its score matrices rescaled to the scale sqrt(d_model) of a d_head = d_model
    model (the same scores): QK * sqrt(d_model) / scale."""
    r = float(np.sqrt(t.d_model)) / t.scale
    return replace(t, QK1=t.QK1 * r, QK2=t.QK2 * r, scale=float(np.sqrt(t.d_model)))


def build_rungs(trained_model, p: int, K: int, L: int, beta: float, xi: float) -> list[Rung]:
    """The ladder's rungs 'theorem' .. 'trained' for the trained model at one snapshot (the
    'optimiser' rung is the 'trained' model with the update as its direction; pipeline).
    beta: scale of W^0 (the trained model's effective beta); xi: the 'loss' rung's logit
    scale."""
    t = square_scale(Merged.of(trained_model))
    s = Sizes(p, K, L, t.d_model)
    th1 = theorem_weights(s, beta, 1.0)
    thx = theorem_weights(s, beta, xi)
    tc = theorem_coords(s)
    pieces = {k: "theorem" for k in PIECES}
    out = [Rung("theorem", th1, True, "first_order", "theorem", tc, dict(pieces))]

    def step(name, w, routing, loss, data, coords, piece, notes=""):
        pieces[piece] = "trained"
        out.append(Rung(name, w, routing, loss, data, coords, dict(pieces), notes))

    step("order", th1, True, "first_order", "mixed", tc, "order")
    step("data", th1, True, "first_order", "run", tc, "data")
    step("loss", thx, True, "ce", "run", tc, "loss",
         f"xi = {xi:.4g}: RMS of the trained model's centred logits over F's")  # fmt: skip
    ro = with_readout(thx, t, s)
    step("readout", ro, True, "ce", "run", tc, "readout",
         "the trained OV, MLP and unembedding read the theorem's residual through the label "
         "map P (each label's coordinate -> its trained vector; W_OV's and F's spaces "
         "-> 0)")  # fmt: skip
    l1 = with_layer1(ro, t, s)
    ebar = _into_trained(s, ebar_vectors(trained_model, p, K))
    step("layer1", l1, False, "ce", "run", theorem_coords(s, bar_v=ebar), "layer1",
         "the trained layer 1 reads the theorem's embeddings through P (so it sees exactly "
         "the trained embeddings) and writes into the trained space; bar_v labels = "
         "its ebar_u there")  # fmt: skip
    tc_trained = coordinates(trained_model, p, K, L)
    tc_trained = Coordinates(tc_trained.rows, tc_trained.cols, tc_trained.Q, tc_trained.K,
                             t.scale, p, K, L)  # fmt: skip
    W0 = tc_trained.lift(w0_block(beta, tc_trained.rows, tc_trained.cols, L))
    emb = replace(t, QK2=W0)
    step("embeddings", emb, False, "ce", "run", tc_trained, "embeddings",
         "W^0 kept as the same label-space block, lifted through the trained label vectors "
         "(minimum-norm W_QK with those labelled scores, compare-qk's Coordinates.lift); the "
         "theorem's coordinates are empty from here on, so the model is the trained "
         "width")  # fmt: skip
    step("trained", t, False, "ce", "run", tc_trained, "qk")
    return out
