"""Named orthonormal basis of the disentangled model.

Order: ``n0..n{p-1}`` (number tokens e_m), ``v0..v{K-1}`` (variable tokens), ``=``, ``+``,
``pad``, ``pos0..pos{L-1}`` (positional embeddings pi_t), ``bar_n0..bar_n{p-1}`` and
``bar_v0..bar_v{K-1}`` (remapped embeddings ebar_z written by layer 1).  Every vector or
matrix of the model is expressed in this basis; a matrix ``M`` is read as
``M[row, col] = <e_row, M e_col>``, and for the key-query matrix the row is the query
component and the column the key component (score_t = x_T^T W x_t).
"""

from __future__ import annotations

import torch

from .config import SimConfig


class Basis:
    """Labels and index arithmetic of the orthonormal basis for (p, K, L)."""

    def __init__(self, p: int, K: int, L: int = 16):
        self.p, self.K, self.L = p, K, L
        self.labels: list[str] = (
            [f"n{m}" for m in range(p)]
            + [f"v{u}" for u in range(K)]
            + ["=", "+", "pad"]
            + [f"pos{t}" for t in range(L)]
            + [f"bar_n{m}" for m in range(p)]
            + [f"bar_v{u}" for u in range(K)]
        )
        self.dim: int = len(self.labels)
        self._index = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def from_config(cls, cfg: SimConfig) -> Basis:
        return cls(cfg.p, cfg.K, cfg.L)

    # index helpers -------------------------------------------------------------------
    def index(self, label: str) -> int:
        try:
            return self._index[label]
        except KeyError:
            raise KeyError(f"unknown basis label {label!r}") from None

    def n(self, m: int) -> int:
        return m

    def v(self, u: int) -> int:
        return self.p + u

    @property
    def eq(self) -> int:
        return self.p + self.K

    @property
    def plus(self) -> int:
        return self.p + self.K + 1

    @property
    def pad(self) -> int:
        return self.p + self.K + 2

    def pos(self, t: int) -> int:
        return self.p + self.K + 3 + t

    def bar_n(self, m: int) -> int:
        return self.p + self.K + 3 + self.L + m

    def bar_v(self, u: int) -> int:
        return 2 * self.p + self.K + 3 + self.L + u

    def labels_of(self, prefix: str) -> list[str]:
        """All labels of one family, e.g. ``labels_of('bar_v')`` -> bar_v0..bar_v{K-1}."""
        count = {"n": self.p, "v": self.K, "pos": self.L, "bar_n": self.p, "bar_v": self.K}
        return [f"{prefix}{i}" for i in range(count[prefix])]

    # reading vectors and matrices ------------------------------------------------------
    def vector(self, label) -> torch.Tensor:
        """Float64 one-hot vector of ``label`` (or the sum for a list of labels)."""
        out = torch.zeros(self.dim, dtype=torch.float64)
        for lab in [label] if isinstance(label, str) else label:
            out[self.index(lab)] += 1.0
        return out

    def block(self, M: torch.Tensor, rows: list[str], cols: list[str]) -> torch.Tensor:
        r = [self.index(x) for x in rows]
        c = [self.index(x) for x in cols]
        return M[r][:, c]

    def entry(self, M: torch.Tensor, row: str, col: str) -> float:
        return float(M[self.index(row), self.index(col)])

    def read(self, x: torch.Tensor, tol: float = 0.0) -> dict[str, float]:
        """Nonzero coordinates of a vector by label."""
        return {lab: float(x[i]) for i, lab in enumerate(self.labels) if abs(float(x[i])) > tol}

    def largest_entries(self, M: torch.Tensor, k: int = 20) -> list[tuple[str, str, float]]:
        """The ``k`` largest-magnitude entries of ``M`` as (row label, col label, value)."""
        flat = M.detach().reshape(-1)
        k = min(k, flat.numel())
        idx = torch.argsort(flat.abs(), descending=True, stable=True)[:k]
        return [
            (self.labels[int(i) // self.dim], self.labels[int(i) % self.dim], float(flat[i]))
            for i in idx
        ]
