"""Scalar comparisons of a predicted and an observed labelled block."""

from __future__ import annotations

import numpy as np

# sub-blocks: name -> (row predicate, column predicate) on labels
SUBBLOCKS = {
    "all": (lambda r: True, lambda c: True),
    "barv_barv": (lambda r: r.startswith("bar_v"), lambda c: c.startswith("bar_v")),
    "barv_v": (lambda r: r.startswith("bar_v"), lambda c: c[0] == "v"),
    "tokens": (lambda r: True, lambda c: not c.startswith("pos")),
    "positions": (lambda r: True, lambda c: c.startswith("pos")),
    "numbers": (lambda r: True, lambda c: c[0] == "n"),
}


def cosine(x: np.ndarray, y: np.ndarray) -> float:
    """<x, y> / (|x| |y|) over all entries (nan if either is zero)."""
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0 or not (np.isfinite(nx) and np.isfinite(ny)):
        return float("nan")
    return float(x @ y / (nx * ny))


def subblock(M: np.ndarray, rows: list[str], cols: list[str], name: str) -> np.ndarray:
    rp, cp = SUBBLOCKS[name]
    ri = [i for i, r in enumerate(rows) if rp(r)]
    ci = [j for j, c in enumerate(cols) if cp(c)]
    return M[np.ix_(ri, ci)]


def subblock_cosines(pred, obs, rows, cols) -> dict[str, float]:
    return {
        name: cosine(subblock(pred, rows, cols, name), subblock(obs, rows, cols, name))
        for name in SUBBLOCKS
    }


def barv_block(M: np.ndarray, rows: list[str], cols: list[str]) -> np.ndarray:
    """The [K, K] bar_v{u} x bar_v{v} block, ordered by u (rows) and v (columns)."""
    ri = sorted((int(r[5:]), i) for i, r in enumerate(rows) if r.startswith("bar_v"))
    ci = sorted((int(c[5:]), j) for j, c in enumerate(cols) if c.startswith("bar_v"))
    return M[np.ix_([i for _, i in ri], [j for _, j in ci])]


def identity_score(B: np.ndarray) -> dict[str, float]:
    """Diagonal dominance of a square block: the fraction of rows whose strict argmax is the
    diagonal, and (mean diagonal - mean off-diagonal) / std of all entries."""
    B = np.asarray(B, float)
    K = B.shape[0]
    if K < 2:
        return {"row_argmax_on_diag": float("nan"), "diag_margin_over_std": float("nan")}
    off = ~np.eye(K, dtype=bool)
    hits = 0
    for i in range(K):
        others = np.delete(B[i], i)
        hits += int(B[i, i] > others.max())
    std = B.std()
    margin = B.diagonal().mean() - B[off].mean()
    return {
        "row_argmax_on_diag": hits / K,
        "diag_margin_over_std": float(margin / std) if std > 0 else float("nan"),
    }


def attenuation_entries(rows: list[str], cols: list[str], L: int, order: str) -> list[tuple]:
    """The theorem's attenuation entries: every query component against the variable
    operand's position (pos{L-2}, fixed order; both operand positions for mixed order), and
    bar_v{u} against the token v{u}."""
    out = []
    positions = [f"pos{L - 2}"] if order == "fixed" else [f"pos{L - 3}", f"pos{L - 2}"]
    for r in rows:
        for pos in positions:
            if pos in cols:
                out.append((r, pos))
        if r.startswith("bar_v") and f"v{r[5:]}" in cols:
            out.append((r, f"v{r[5:]}"))
    return out


def sign_agreement(pred, obs, rows, cols, entries) -> dict:
    """Fraction of `entries` (row, col) where obs has the sign of pred, and the values."""
    vals = []
    for r, c in entries:
        i, j = rows.index(r), cols.index(c)
        vals.append((r, c, float(pred[i, j]), float(obs[i, j])))
    agree = [np.sign(pv) == np.sign(ov) for _, _, pv, ov in vals if pv != 0]
    return {
        "fraction": float(np.mean(agree)) if agree else float("nan"),
        "entries": [{"row": r, "col": c, "pred": pv, "obs": ov} for r, c, pv, ov in vals],
    }


def gram_stats(V: np.ndarray) -> dict[str, float]:
    """Max and mean |cos| between distinct rows of V (nan for fewer than 2 rows)."""
    V = np.asarray(V, float)
    if V.shape[0] < 2:
        return {"max_abs_cos": float("nan"), "mean_abs_cos": float("nan")}
    n = np.linalg.norm(V, axis=1, keepdims=True)
    C = (V / np.where(n > 0, n, 1)) @ (V / np.where(n > 0, n, 1)).T
    off = np.abs(C[~np.eye(len(C), dtype=bool)])
    return {"max_abs_cos": float(off.max()), "mean_abs_cos": float(off.mean())}


def cross_cos_max(A: np.ndarray, B: np.ndarray) -> float:
    """max |cos(a, b)| over rows a of A and b of B."""
    A = A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-300)
    B = B / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), 1e-300)
    return float(np.abs(A @ B.T).max())
