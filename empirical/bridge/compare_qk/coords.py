"""The theorem's coordinates in a real checkpoint: one labelled vector of the residual per
label (query rows `=`, pos{L-1}, bar_v{u}; key columns the tokens, positions, bar_v{u}), and a
[d, d] key-query matrix read between them as S = Q W_QK K^T / sqrt(d_head) in the readings
'raw', 'orth' (Loewdin) and 'dual' (`Coordinates`; `coordinates(model, p, K, L)` builds them).
Definitions: docs/compare_qk.md, "Coordinates" and "Frames".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
        """Q^T G K / scale, [d, d]: dL/dW_QK of a loss whose gradient with respect to the
        labelled scores is G; `dual().project` reads it back as G (independent labels)."""
        G_t = torch.as_tensor(G, dtype=torch.float64, device=self.Q.device)
        return (self.Q.T @ G_t @ self.K) / self.scale

    def dual(self) -> Coordinates:
        """The dual frame: Q* = (Q Q^T)^+ Q, K* = (K K^T)^+ K, inverse scale, so that
        `project(X)` is G for X = Q^T G K / scale (`gradient_of`); with merged labels (see
        `deficit`) it reads P_Q G P_K. `lift` in this frame is `gradient_of`."""
        return replace(self, Q=dual_vectors(self.Q), K=dual_vectors(self.K), scale=1 / self.scale)

    def read(self, X: Tensor, frame: str) -> np.ndarray:
        """X [d, d] read as a labelled block in `frame` ('raw', 'orth' or 'dual')."""
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

    @property
    def exact(self) -> bool:
        """Whether the labelled vectors are linearly independent on each side (Gram
        eigenvalues above RTOL * max), so `lift` realises any block and the orth frame is
        orthonormal. Needs p + 2K + L + 3 <= d_model and no two labels merged (`deficit`)."""
        return self.deficit() == (0, 0)

    def deficit(self) -> tuple[int, int]:
        """(query, key) directions the orth frame drops: Gram eigenvalues below RTOL * max.
        In trained models W_E[+] and W_pos[L-4] (always together) become parallel under
        weight decay, and so can W_E[=] and W_pos[L-1]; each such pair costs one."""
        return _deficit(self.Q), _deficit(self.K)

    def orthonormalized(self) -> Coordinates:
        """The same labels on the closest orthonormal vectors (Loewdin, `lowdin`, each side
        apart): the theorem's "orthogonal embeddings" by construction; `lift` well conditioned."""
        return replace(self, Q=lowdin(self.Q), K=lowdin(self.K))


def _deficit(V: Tensor, rtol: float = RTOL) -> int:
    e = torch.linalg.eigvalsh(V @ V.T)
    return int((e <= rtol * e.max()).sum())


def lowdin(V: Tensor, rtol: float = RTOL) -> Tensor:
    """(V V^T)^{-1/2} V: orthonormal rows, each as close to its row of V as possible. For
    dependent rows the inverse square root is taken on the span only (eigenvalues below
    rtol * max dropped): a tight frame, e.g. two parallel labels get the same row."""
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
    """The labelled query / key vectors of `model` (module docstring)."""
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
    return Coordinates(rows=row_labels(K, L), cols=col_labels(p, K, L), Q=Q, K=Kv,
                       scale=float(model.cfg.attn_scale), p=p, n_vars=K, L=L)  # fmt: skip


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
