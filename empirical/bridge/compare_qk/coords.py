"""The theorem's coordinates in a real checkpoint: labelled query and key vectors.

The theory (shared/spec/theorem_c1.md, theory/) writes the layer-2 key-query matrix W in an
orthonormal basis whose entries are scores, score_t = x_T^T W x_t. A checkpoint of
`AssignAddTransformer` has no such basis, so we name one vector of the model's residual
space per basis label and read the layer-2 key-query matrix between them:

    query rows    '='        W_E[=]                       (token part of the query)
                  'pos{L-1}' W_pos[L-1]                   (its position)
                  'bar_v{u}' ebar_u = W_E[var u] @ W_OV^1 (what layer 1 copies into `=`)
    key columns   'n{m}'     W_E[m]          'v{u}' W_E[var u]
                  '=', '+', 'pad'  W_E[...]  'pos{t}' W_pos[t]
                  'bar_v{u}' ebar_u          (what layer 1 copies into an assigned number)

with W_OV^1 = W_V^1 W_O^1 (block 0) and the score block

    S = Q @ W_QK^2 @ K^T / sqrt(d_head),   W_QK^2 = W_Q^2 W_K^2^T (block 1),

so S[i, j] is the attention score (as the model computes it) between query component i and
key component j: the theory's W entry for that pair.

Frames: how a [d, d] matrix X of W_QK's space (a gradient, an update, the state) is read as a
labelled block. Write s = sqrt(d_head). A loss that depends on W_QK through the labelled
scores S = Q W_QK K^T / s, with label-space gradient G = dL/dS, has the parameter-space
gradient dL/dW_QK = Q^T G K / s (`gradient_of`); a gradient step along it changes the
labelled scores by (Q Q^T) G (K K^T) / s^2. The three readings of X = Q^T G K / s:

    'raw'   Q X K^T / s                         = (QQ^T) G (KK^T) / s^2   (the score change)
    'orth'  Q~ X K~^T / s, Q~ = (QQ^T)^-1/2 Q   = (QQ^T)^1/2 G (KK^T)^1/2 / s^2  (Loewdin)
    'dual'  s Q* X K*^T,  Q* = (QQ^T)^+ Q       = G                        (exact)

so only the dual frame reads a label-space gradient back as itself (`dual`, tested by a round
trip); with linearly dependent labels it reads P_Q G P_K, the part of G the checkpoint's
vectors can express (P: the projector onto the span of the Gram matrix). `frames.py` builds
the comparisons on these readings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from empirical.model import circuits
from empirical.model.labels import (  # noqa: F401 (row_labels, col_labels: re-exported)
    RTOL,
    col_labels,
    dual_vectors,
    ebar_of,
    query_key_vectors,
    row_labels,
)


@dataclass
class Coordinates:
    """Labelled query vectors Q [R, d] and key vectors K [C, d] of one checkpoint (float64),
    and the score scale sqrt(d_head)."""

    rows: list[str]
    cols: list[str]
    Q: Tensor
    K: Tensor
    scale: float
    p: int
    n_vars: int
    L: int

    def project(self, W: Tensor) -> np.ndarray:
        """S = Q W K^T / scale for a [d, d] matrix in W_QK's convention (score = x W y / scale)."""
        W = W.detach().to(torch.float64)
        return ((self.Q @ W @ self.K.T) / self.scale).cpu().numpy()

    def lift(self, S: np.ndarray, rcond: float = 1e-6) -> Tensor:
        """The minimum-norm [d, d] W with Q W K^T / scale = S (least squares when Q or K is
        rank deficient): W = scale * pinv(Q) S pinv(K)^T."""
        Qp = torch.linalg.pinv(self.Q, rtol=rcond)  # [d, R]
        Kp = torch.linalg.pinv(self.K, rtol=rcond)  # [d, C]
        S_t = torch.as_tensor(S, dtype=torch.float64, device=self.Q.device)
        return self.scale * (Qp @ S_t @ Kp.T)

    def gradient_of(self, G: np.ndarray) -> Tensor:
        """Q^T G K / scale, [d, d]: the gradient dL/dW_QK of a loss whose gradient with respect
        to the labelled scores S = Q W_QK K^T / scale is G (the chain rule through S); a
        gradient step along G moves W_QK by a multiple of it. `dual().project` reads it back
        as G (exactly for independent labels)."""
        G_t = torch.as_tensor(G, dtype=torch.float64, device=self.Q.device)
        return (self.Q.T @ G_t @ self.K) / self.scale

    def dual(self) -> Coordinates:
        """The dual frame: vectors Q* = (Q Q^T)^+ Q and K* = (K K^T)^+ K with the inverse scale,
        so that `project(X)` = scale Q* X K*^T is the label-space matrix G with
        X = Q^T G K / scale (`gradient_of`): exact for a gradient or a gradient step whatever
        the Gram matrices, where the other frames read (QQ^T)^a G (KK^T)^a (raw: a = 1; orth:
        a = 1/2). Gram eigenvalues below RTOL * max are dropped (merged labels, see
        `deficit`): the frame then reads P_Q G P_K, P the projector onto the Gram's span.
        `lift` in this frame is `gradient_of` (Q = pinv(Q*)^T)."""
        return Coordinates(
            self.rows, self.cols, dual_vectors(self.Q), dual_vectors(self.K), 1.0 / self.scale,
            self.p, self.n_vars, self.L,
        )  # fmt: skip

    def read(self, X: Tensor, frame: str) -> np.ndarray:
        """X [d, d] read as a labelled block in `frame` ('raw', 'orth' or 'dual'; see the
        module docstring)."""
        if frame == "raw":
            return self.project(X)
        if frame == "orth":
            return self.orthonormalized().project(X)
        if frame == "dual":
            return self.dual().project(X)
        raise ValueError(f"frame must be one of {READINGS}, got {frame!r}")

    def gram(self) -> tuple[np.ndarray, np.ndarray]:
        """(Q Q^T, K K^T): the inner products of the coordinate vectors."""
        return (self.Q @ self.Q.T).cpu().numpy(), (self.K @ self.K.T).cpu().numpy()

    def index(self, label: str, side: str) -> int:
        return (self.rows if side == "row" else self.cols).index(label)

    @property
    def exact(self) -> bool:
        """Whether the labelled vectors are linearly independent on each side, up to the
        relative tolerance RTOL on the Gram eigenvalues (so `lift` realises any block and the
        orth frame is orthonormal). Needs at least as many residual dimensions as key labels,
        p + 2K + L + 3 <= d_model, and no two labels merged (see `deficit`)."""
        return self.deficit() == (0, 0)

    def deficit(self) -> tuple[int, int]:
        """(query, key) directions the orth frame drops: Gram eigenvalues below RTOL * max.
        In trained models W_E[+] and W_pos[L-4] (always together) become parallel under
        weight decay, and so can W_E[=] and W_pos[L-1]; each such pair costs one."""
        return _deficit(self.Q), _deficit(self.K)

    def orthonormalized(self) -> Coordinates:
        """The same labels on the closest orthonormal vectors (Loewdin / symmetric
        orthonormalisation, V -> (V V^T)^{-1/2} V, done separately for the query and the key
        side): the frame in which the theorem's "orthogonal embeddings" hold by construction.
        In it `lift` is well conditioned (and exact when `exact`)."""
        return Coordinates(
            self.rows, self.cols, lowdin(self.Q), lowdin(self.K), self.scale, self.p,
            self.n_vars, self.L,
        )  # fmt: skip


def _deficit(V: Tensor, rtol: float = RTOL) -> int:
    e = torch.linalg.eigvalsh(V @ V.T)
    return int((e <= rtol * e.max()).sum())


def lowdin(V: Tensor, rtol: float = RTOL) -> Tensor:
    """(V V^T)^{-1/2} V: orthonormal rows, each as close to its row of V as possible.

    Needs linearly independent rows (as many as the residual width at most); otherwise the
    inverse square root is taken on the span only (eigenvalues below rtol * max dropped) and
    the rows form a tight frame of that span rather than an orthonormal set (see
    `Coordinates.exact`). E.g. two labels whose vectors have become parallel get the same
    row (their common direction / sqrt 2) instead of rows dominated by their tiny, noisy
    difference."""
    G = V @ V.T
    e, U = torch.linalg.eigh(G)
    keep = e > rtol * e.max()
    inv = torch.where(keep, e.clamp_min(1e-300).rsqrt(), torch.zeros_like(e))
    return (U @ torch.diag(inv) @ U.T) @ V


READINGS = ("raw", "orth", "dual")  # how a [d, d] matrix is read as a labelled block


@torch.no_grad()
def ebar_vectors(model, p: int, K: int) -> Tensor:
    """ebar_u = W_E[p + u] @ W_V^1 @ W_O^1 for the K variables, [K, d] (float64)."""
    a0 = model.blocks[0].attn
    E = model.W_E.detach().to(torch.float64)
    return ebar_of(E, a0.W_V[0].detach().double(), a0.W_O[0].detach().double(), p, K)


def theorem_w(model, layer: int = 1) -> Tensor:
    """The theorem's W: W_Q W_K^T of block `layer`, unscaled, [d, d], in float64."""
    return circuits.qk_matrix(model, layer, scaled=False, dtype=torch.float64)


@torch.no_grad()
def coordinates(model, p: int, K: int, L: int) -> Coordinates:
    """The labelled query / key vectors of `model` (see the module docstring)."""
    ebar = ebar_vectors(model, p, K)
    return labelled_coordinates(model, p, K, L, ebar, ebar)


@torch.no_grad()
def labelled_coordinates(
    model, p: int, K: int, L: int, query_ebar: Tensor, key_ebar: Tensor
) -> Coordinates:
    """Query rows `=`, pos{L-1}, bar_v{u} (query_ebar [K, d]) and key columns: the token
    embeddings, the positions and bar_v{u} (key_ebar), from `model`'s embeddings (float64).
    The token ids are the vocabulary's: numbers 0..p-1, variables p..p+K-1, then +, =, pad."""
    E = model.W_E.detach().to(torch.float64)
    P = model.W_pos.detach().to(torch.float64)
    Q, Kv = query_key_vectors(E, P, query_ebar, key_ebar, p, K, L)
    return Coordinates(
        rows=row_labels(K, L),
        cols=col_labels(p, K, L),
        Q=Q,
        K=Kv,
        scale=float(model.cfg.attn_scale),
        p=p,
        n_vars=K,
        L=L,
    )


def set_qk(model, W: Tensor, layer: int = 1) -> None:
    """Set block `layer`'s W_Q W_K^T to W (unscaled [d, d]) in place: W_Q = W, W_K = I when
    d_head = d_model (exact); otherwise the best rank-d_head factorisation by SVD."""
    attn = model.blocks[layer].attn
    d, e = attn.W_Q.shape[1], attn.W_Q.shape[2]
    W = W.to(torch.float64)
    if d == e:
        WQ, WK = W, torch.eye(d, dtype=torch.float64)
    else:
        U, s, Vh = torch.linalg.svd(W)
        r = s[:e].sqrt()
        WQ, WK = U[:, :e] * r, Vh[:e].T * r
    with torch.no_grad():
        attn.W_Q[0].copy_(WQ.to(attn.W_Q.dtype))
        attn.W_K[0].copy_(WK.to(attn.W_K.dtype))
