"""The theory's prediction in the comparison's coordinates: the closed-form G1 of theory/ at
measured softmax weights a, b (`g1_block`), the theorem's model on a sampled population
(`PopulationG1`), and the predictor a comparison's options choose (`make_predictor`).
Layout `averaged` (default) replaces the columns pos0..pos{L-5} by their mean (random
assignment places), `packed` keeps the theorem's. docs/compare_qk.md, "The prediction".
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import sympy as sp
import torch

from disentangled.errors import UsageError
from empirical.bridge.compare_qk.coords import col_labels, row_labels
from empirical.bridge.compare_qk.observe import one_var_batch
from empirical.bridge.compare_qk.options import Options
from theory import symbols
from theory.g1_closed_form import entry, entry_key, query_row_labels, validate

LAYOUTS = ("averaged", "packed")
ORDERS = ("fixed", "mixed")


def ab_from_beta(beta: float, L: int = 16) -> tuple[float, float]:
    return symbols.ab_numeric(beta, L)


def beta_from_ab(a: float, b: float) -> float:
    """The beta of W^0 with these softmax weights: a / b = e^beta."""
    return math.log(a / b)


@cache
def _entry_fn(order: str, L: int, row: tuple, col: tuple, same: bool):
    args = (symbols.a, symbols.b, symbols.p, symbols.K)
    return sp.lambdify(args, entry("1var", order, L, row, col, same), "math")


def g1_block(
    a: float,
    b: float,
    p: int,
    K: int,
    L: int = 16,
    order: str = "fixed",
    layout: str = "averaged",
    rows: list[str] | None = None,
    cols: list[str] | None = None,
) -> np.ndarray:
    """G1[rows, cols] of the theory at softmax weights (a, b) per operand / other position
    (2a + (L-2) b = 1), float64; rows / cols default to `coords.row_labels` / `col_labels`.
    order: 'fixed' (number at L-3, variable at L-2: the theorem's) or 'mixed' (half each)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    _check_ab(a, b, layout)
    if abs(2 * a + (L - 2) * b - 1) > 1e-6:
        raise ValueError(f"the closed form needs 2a + (L-2)b = 1; got {2 * a + (L - 2) * b}")
    validate(p, K, L)
    rows = row_labels(K, L) if rows is None else rows
    cols = col_labels(p, K, L) if cols is None else cols
    queryable = set(query_row_labels(rows, L))
    G = np.zeros((len(rows), len(cols)))
    for i, rl in enumerate(rows):
        if rl not in queryable:
            continue
        for j, cl in enumerate(cols):
            G[i, j] = _entry_fn(order, L, *entry_key(rl, cl, K, L))(a, b, p, K)
    return _laid_out(G, cols, L, layout)


def _check_ab(a: float, b: float, layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not (0 < a < 0.5 and 0 < b < 1):
        raise ValueError(f"need 0 < a < 1/2 and 0 < b < 1, got a={a}, b={b}")


def _laid_out(G: np.ndarray, cols: list[str], L: int, layout: str) -> np.ndarray:
    """G with, for layout 'averaged', the columns pos0..pos{L-5} replaced by their mean."""
    if layout == "averaged":
        region = [j for j, c in enumerate(cols) if c.startswith("pos") and int(c[3:]) < L - 4]
        if region:
            G[:, region] = G[:, region].mean(axis=1, keepdims=True)
    return G


# -- the theorem's G1 on a sampled population ---------------------------------------------------

PREDICTIONS = ("auto", "closed", "population")


def closed_form_applies(K: int, L: int) -> bool:
    """Whether the closed form exists: the theorem assigns all K variables in 2K slots of the
    L - 4 assignment positions (K <= 6 for L = 16; the paper authors' run has K = 12)."""
    return 1 <= K and 2 * K <= L - 4


class PopulationG1:
    """G1 of the theorem's model (orthonormal embeddings, augmented inputs, Gromov's MLP, W^0
    with weights a per operand position, b elsewhere) on a *sampled* population of 1-var
    sequences (tokens, labels, variable operand), where the closed form needs all K variables
    in 2K slots: G1 = E[x_T r^T] exact per sequence, averaged over the sample
    (docs/compare_qk.md, "Many variables"). Rows `=`, pos{L-1}, bar_v{u}; columns
    `coords.col_labels`."""

    def __init__(self, tokens, labels, var_operand, p: int, K: int, L: int):
        self.p, self.K, self.L = p, K, L
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        self.N = int(tokens.shape[0])
        if tokens.shape[1] != L:
            raise ValueError(f"sequences of length {tokens.shape[1]}, expected L = {L}")
        self.tokens, self.labels = tokens, torch.as_tensor(labels, dtype=torch.long)
        self.var = torch.as_tensor(var_operand, dtype=torch.long)
        if (self.var < 0).any() or (self.var >= K).any():
            raise ValueError("every sequence needs one variable operand (1-var data)")
        self.cols = cols = col_labels(p, K, L)
        self.D = D = len(cols)
        # the column of each position's token, of its position, and of its ebar (D: none)
        tok_col = tokens.clone()  # numbers 0..p-1 and variables p..p+K-1 are the first columns
        for t, lab in ((p + K, "+"), (p + K + 1, "="), (p + K + 2, "pad")):
            tok_col[tokens == t] = cols.index(lab)
        pos_col = torch.tensor([cols.index(f"pos{t}") for t in range(L)]).expand(self.N, L)
        bar0 = cols.index("bar_v0")
        ebar_col = torch.full_like(tokens, D)
        prev = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)
        assigned = (tokens < p) & (prev >= p) & (prev < p + K)
        assigned[:, L - 4 :] = False
        ebar_col[assigned] = bar0 + (prev[assigned] - p)
        ebar_col[:, L - 1] = bar0 + self.var  # the query carries ebar_v and is its own key
        self._terms = self._monomial_terms(tokens, tok_col, pos_col, ebar_col)

    def _monomial_terms(self, tokens, tok_col, pos_col, ebar_col) -> dict:
        """G1 is a polynomial in (a, b) (sigma = a A + b B, A: the two operand positions; g
        linear, gbar quadratic; weights of degree 2 and 3): the [K + 1, D] sums of each of
        the seven monomials' weights, computed once; `block` only combines them."""
        p, K, L, N, D = self.p, self.K, self.L, self.N, self.D
        is_num = tokens < p
        A = torch.zeros(N, L, dtype=torch.float64)
        A[:, L - 3 : L - 1] = 1.0
        B = 1.0 - A
        num = torch.where(is_num, tokens, 0)
        idx = (self.labels[:, None] - num) % p

        def g_of(part):
            w = torch.where(is_num, part, torch.zeros_like(part))
            h = torch.zeros(N, p, dtype=torch.float64).scatter_add_(1, num, w)
            g = 2 * h.gather(1, idx) - 2 * h.sum(1, keepdim=True) / p
            return torch.where(is_num, g, torch.zeros_like(g))

        gA, gB = g_of(A), g_of(B)
        X = (A * gA).sum(1, keepdim=True)
        Y = (A * gB + B * gA).sum(1, keepdim=True)
        Z = (B * gB).sum(1, keepdim=True)
        weights = {
            (2, 0): A * gA,
            (1, 1): A * gB + B * gA,
            (0, 2): B * gB,
            (3, 0): -A * X,
            (2, 1): -(A * Y + B * X),
            (1, 2): -(A * Z + B * Y),
            (0, 3): -B * Z,
        }
        rows_v = self.var[:, None].expand(N, L)
        rows_all = torch.full((N, L), K)
        flat = [
            (row * (D + 1) + col).reshape(-1)
            for col in (tok_col, pos_col, ebar_col)
            for row in (rows_v, rows_all)
        ]
        C = torch.stack([c.reshape(-1) for c in weights.values()], dim=1)  # [N L, 7]
        acc = torch.zeros((K + 1) * (D + 1), len(weights), dtype=torch.float64)
        for f in flat:
            acc.index_add_(0, f, C)
        acc = acc.view(K + 1, D + 1, len(weights))[:, :D] / N
        return {key: acc[:, :, k].numpy().copy() for k, key in enumerate(weights)}

    @classmethod
    def from_batch(cls, batch, p: int, K: int, L: int) -> PopulationG1:
        ov = batch.operand_vars
        if ((ov >= 0).sum(1) != 1).any():
            raise ValueError("PopulationG1 needs 1-var sequences (one variable operand each)")
        var = ov.max(dim=1).values
        return cls(batch.tokens, batch.labels, var, p, K, L)

    def block(self, a: float, b: float, rows: list[str] | None = None, layout: str = "averaged"):
        """G1[rows, cols] at softmax weights (a, b) (2a + (L-2) b = 1), float64 numpy."""
        K, L = self.K, self.L
        _check_ab(a, b, layout)
        rows = row_labels(K, L) if rows is None else rows
        acc = sum(a**i * b**j * M for (i, j), M in self._terms.items())
        G = np.zeros((len(rows), self.D))
        for i, rl in enumerate(rows):
            if rl in ("=", f"pos{L - 1}"):
                G[i] = acc[K]
            elif rl.startswith("bar_v"):
                G[i] = acc[int(rl[5:])]
        return _laid_out(G, self.cols, L, layout)


# -- G1 for a comparison's options ------------------------------------------------------------


def closed_predictor(task, opts: Options, order: str | None = None):
    """(a, b) -> the closed-form G1 block (theory/), for the task's p, K, L."""
    order = opts.order if order is None else order

    def predict(a, b):
        return g1_block(a, b, task.p, task.K, task.L, order, opts.layout)

    predict.kind = "closed"
    return predict


def population_predictor(task, opts: Options, order: str | None = None, held_out=None):
    """(a, b) -> G1 of the theorem's model on opts.prediction_size sampled 1-var sequences of
    opts.distribution (with 'train': the run's held-out pairs `held_out`) in `order`
    (default opts.order), a sample of its own (not the comparison batch)."""
    order = opts.order if order is None else order
    batch = one_var_batch(
        task, opts.prediction_size, opts.seed, order, opts.distribution, held_out,
        opts.all_assigned, stream="compare-qk/prediction",
    )  # fmt: skip
    pop = PopulationG1.from_batch(batch, task.p, task.K, task.L)

    def predict(a, b):
        return pop.block(a, b, layout=opts.layout)

    predict.kind = "population"
    predict.order, predict.distribution = order, opts.distribution
    return predict


def prediction_kind(task, opts: Options) -> str:
    """'closed' or 'population' for opts.prediction. 'auto': the closed form where it exists
    and describes the comparison's distribution (K <= 6 and --distribution unrestricted: the
    closed form knows no r1, r2 or held-out pairs), else the sampled population."""
    if opts.prediction not in PREDICTIONS:
        raise UsageError(f"--prediction must be one of {PREDICTIONS}, got {opts.prediction!r}")
    exists = closed_form_applies(task.K, task.L)
    if opts.prediction == "auto":
        return "closed" if exists and opts.distribution == "unrestricted" else "population"
    if opts.prediction == "closed" and not exists:
        raise UsageError(
            f"--prediction closed: the closed form assigns all K = {task.K} variables in "
            f"2K slots of the L - 4 = {task.L - 4} assignment positions, impossible here; use "
            "--prediction population (or auto)"
        )
    if opts.prediction == "closed" and opts.distribution != "unrestricted":
        raise UsageError(
            "--prediction closed: the closed form is G1 of the theorem's unrestricted "
            "population, not of the run's training distribution (the default --distribution "
            "train); add --distribution unrestricted, or use --prediction population (or auto)"
        )
    return opts.prediction


def make_predictor(task, opts: Options, order: str | None = None, held_out=None):
    """(a, b) -> G1 of the comparison's distribution (`prediction_kind`) in `order`."""
    if prediction_kind(task, opts) == "closed":
        predict = closed_predictor(task, opts, order)
        predict.order = opts.order if order is None else order
        predict.distribution = "unrestricted"
        return predict
    return population_predictor(task, opts, order, held_out)
