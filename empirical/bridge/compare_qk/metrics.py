"""Scalar comparisons of a predicted and an observed labelled block."""

from __future__ import annotations

from functools import cache

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


@cache
def _subblock_index(rows: tuple, cols: tuple, name: str):
    rp, cp = SUBBLOCKS[name]
    ri = [i for i, r in enumerate(rows) if rp(r)]
    ci = [j for j, c in enumerate(cols) if cp(c)]
    return np.ix_(ri, ci)


def subblock(M: np.ndarray, rows: list[str], cols: list[str], name: str) -> np.ndarray:
    return M[_subblock_index(tuple(rows), tuple(cols), name)]


def subblock_cosines(pred, obs, rows, cols) -> dict[str, float]:
    return {
        name: cosine(subblock(pred, rows, cols, name), subblock(obs, rows, cols, name))
        for name in SUBBLOCKS
    }


def _by_number(labels: list[str], prefix: str) -> list[int]:
    """Indices of the labels `{prefix}{u}`, ordered by u."""
    found = sorted((int(x[len(prefix) :]), i) for i, x in enumerate(labels) if x.startswith(prefix))
    return [i for _, i in found]


def barv_block(M: np.ndarray, rows: list[str], cols: list[str]) -> np.ndarray:
    """The [K, K] bar_v{u} x bar_v{v} block, ordered by u (rows) and v (columns)."""
    return M[np.ix_(_by_number(rows, "bar_v"), _by_number(cols, "bar_v"))]


def identity_score(B: np.ndarray) -> dict[str, float]:
    """Diagonal dominance of a square block: the fraction of rows whose strict argmax is the
    diagonal, and (mean diagonal - mean off-diagonal) / std of all entries."""
    B = np.asarray(B, float)
    K = B.shape[0]
    if K < 2:
        return {"row_argmax_on_diag": float("nan"), "diag_margin_over_std": float("nan")}
    off = ~np.eye(K, dtype=bool)
    hits = sum(int(B[i, i] > np.delete(B[i], i).max()) for i in range(K))
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
        out += [(r, pos) for pos in positions if pos in cols]
        if r.startswith("bar_v") and f"v{r[5:]}" in cols:
            out.append((r, f"v{r[5:]}"))
    return out


def sign_agreement(pred, obs, rows, cols, entries) -> dict:
    """Fraction of `entries` (row, col) where obs has the sign of pred, and the values."""
    ij = [(r, c, rows.index(r), cols.index(c)) for r, c in entries]
    vals = [(r, c, float(pred[i, j]), float(obs[i, j])) for r, c, i, j in ij]
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


# -- the theorem's decomposition of a block -------------------------------------------------------

TERMS = ("assignment_wide", "memory", "operand_attenuation", "token_attenuation")


def theorem_terms(M: np.ndarray, rows: list[str], cols: list[str], L: int) -> dict:
    """Split a labelled block by orthogonal projection into the terms of the theorem's G1
    (`TERMS` and a residual; docs/compare_qk.md, "The theorem's terms").

    Returns {'energy': {term: |term|^2 ..., 'residual', 'total'}, 'share': {term: energy /
    total}, 'aw_share_vs_memory': assignment-wide / (assignment-wide + memory) energy,
    'aw_share_of_structured': assignment-wide / the four terms' energy,
    'aw_over_memory_amplitude': |assignment_wide| / |memory|, 'c_mem', 'c_tok' (the
    coefficients of K I - J; positive c_mem: the bound number is raised more than the
    others), 'rho': the fitted key vector, 'terms': {term: block}}."""
    M = np.asarray(M, float)
    q = _assignment_query(rows, L)
    rho = (q @ M) / (q @ q)
    A = np.outer(q, rho)
    op = [j for j, c in enumerate(cols) if c in (f"pos{L - 3}", f"pos{L - 2}")]
    A_op = np.zeros_like(A)
    A_op[:, op] = A[:, op]
    terms = {"assignment_wide": A - A_op, "operand_attenuation": A_op}
    coef = {}
    for name, prefix in (("memory", "bar_v"), ("token_attenuation", "v")):
        terms[name], coef[name] = _centred_identity_term(M, rows, cols, prefix)
    energy = {k: float((v * v).sum()) for k, v in terms.items()}
    total = float((M * M).sum())
    energy["residual"] = max(total - sum(energy.values()), 0.0)
    energy["total"] = total
    return {
        "energy": energy,
        **_term_shares(energy),
        "c_mem": coef["memory"],
        "c_tok": coef["token_attenuation"],
        "rho": rho,
        "terms": terms,
    }


def _assignment_query(rows: list[str], L: int) -> np.ndarray:
    """q of the theorem's q rho^T term: weight 1 on rows `=` and pos{L-1}, 1/K on each bar_v."""
    K = sum(r.startswith("bar_v") for r in rows)
    q = np.zeros(len(rows))
    for i, r in enumerate(rows):
        if r in ("=", f"pos{L - 1}"):
            q[i] = 1.0
        elif r.startswith("bar_v"):
            q[i] = 1.0 / K
    return q


def _centred_identity_term(M, rows, cols, prefix: str) -> tuple[np.ndarray, float]:
    """(the projection of M onto c (K I - J) on the bar_v x {prefix}{u} block, c): the
    associative memory (prefix 'bar_v') or the token attenuation ('v'); c is nan where the
    block is not K x K with K >= 2."""
    ii, jj = _by_number(rows, "bar_v"), _by_number(cols, prefix)
    K = len(ii)
    T = np.zeros_like(M)
    if K >= 2 and len(jj) == K:
        C = K * np.eye(K) - np.ones((K, K))
        c = float((M[np.ix_(ii, jj)] * C).sum() / (C * C).sum())
        T[np.ix_(ii, jj)] = c * C
    else:
        c = float("nan")
    return T, c


def _term_shares(energy: dict) -> dict:
    """The shares `theorem_terms` reports, from the terms' energies (nan where undefined)."""
    total = energy["total"]
    aw, mem = energy["assignment_wide"], energy["memory"]
    structured = sum(energy[k] for k in TERMS)
    return {
        "share": {
            k: (energy[k] / total if total > 0 else float("nan")) for k in (*TERMS, "residual")
        },  # fmt: skip
        "aw_share_vs_memory": aw / (aw + mem) if aw + mem > 0 else float("nan"),
        "aw_share_of_structured": aw / structured if structured > 0 else float("nan"),
        "aw_over_memory_amplitude": float(np.sqrt(aw / mem)) if mem > 0 else float("nan"),
    }


# -- null levels ---------------------------------------------------------------------------------


def sign_flips(n: int, draws: int = 1000, seed: int = 20) -> np.ndarray:
    """[draws, n] random signs (+1 / -1), deterministic in (n, draws, seed)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(draws, n), dtype=np.int8).astype(float) * 2.0 - 1.0


def sign_null95(x: np.ndarray, y: np.ndarray, signs: np.ndarray | None = None,
                draws: int = 1000, seed: int = 20) -> float:  # fmt: skip
    """95% quantile of |cos(e * x, y)| over random signs e (one per entry): the cosine two
    blocks with x's and y's magnitude patterns but unrelated signs reach (far above
    `null_cos95` where a few entries hold most of the energy). signs: [draws, >= n] from
    `sign_flips` (its first n columns are used; default: drawn from `seed`). Deterministic."""
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if len(x) < 2 or nx == 0 or ny == 0 or not (np.isfinite(nx) and np.isfinite(ny)):
        return float("nan")
    if signs is None:
        signs = sign_flips(len(x), draws, seed)
    c = np.abs(signs[:, : len(x)] @ (x * y)) / (nx * ny)
    return float(np.quantile(c, 0.95))


def null_cos95(n: int, draws: int = 20000) -> float:
    """95% quantile of |cos| between a fixed n-vector and a uniformly random direction
    (what an unrelated, spread-out block scores; about 1.96 / sqrt(n))."""
    if n < 2:
        return float("nan")
    rng = np.random.default_rng(12345)
    c2 = rng.beta(0.5, (n - 1) / 2, size=draws)
    return float(np.quantile(np.sqrt(c2), 0.95))


def gram_draws(GQ, GK, shape, draws: int = 200) -> np.ndarray:
    """[draws, rows, cols]: G_Q R G_K for iid Gaussian R (seed 7): unrelated predictions
    pushed through the Gram matrices as the score frame pushes G1."""
    rng = np.random.default_rng(7)
    R = np.stack([rng.standard_normal(shape) for _ in range(draws)])
    return GQ @ R @ GK


def gram_null95(GQ, GK, target, rows, cols, draws: int = 200, X=None) -> dict[str, float]:
    """95% quantile of |cos(G_Q R G_K, target)| for iid Gaussian R: how high an unrelated
    prediction scores once pushed through the Gram matrices (the score frame's null; all
    draws at once, the same draws as one at a time). X: `gram_draws` already made."""
    X = gram_draws(GQ, GK, target.shape, draws) if X is None else X
    draws = X.shape[0]
    out = {}
    for k, (rp, cp) in SUBBLOCKS.items():
        ri = [i for i, r in enumerate(rows) if rp(r)]
        ci = [j for j, c in enumerate(cols) if cp(c)]
        Xs = X[:, ri][:, :, ci].reshape(draws, -1)
        t = target[np.ix_(ri, ci)].ravel()
        nx, nt = np.linalg.norm(Xs, axis=1), np.linalg.norm(t)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.abs(Xs @ t) / (nx * nt)
        out[k] = float(np.nanquantile(cos, 0.95)) if np.isfinite(cos).any() else float("nan")
    return out
