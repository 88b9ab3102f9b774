"""G1^(3), the first-order gradient of the last hop's key-query matrix W3 at
(W2, W3) = (W^0, W^0) in the two-hop chain model, in exact polynomial form.

Derivation (chain rule; C.1's :func:`theory.g1_closed_form.attention_chain_rule_lemma`, with
``self_key=True`` for the query's own key).  Layer 3 scores the keys x_t
(t < T) and the query's own updated key x'_T with the updated query x'_T = x_T + Delta, so

    G1^(3) = E[ x'_T r'^T ],   r' = sum_{t<T} sigma_t (g_t - gbar) x_t - b gbar x'_T,

with g_t, gbar C.1's (g_T = 0: the query carries no number).  At W^0 both attentions put
a on the operand positions L-3, L-2 and b elsewhere (W_OV2 writes no `=` coordinate, so
layer 3's scores are C.1's), and layer 2's update is

    Delta = a Q + b (1_K + sum_{pointers u} ebar_{target(u)}),   Q = the ebar part of x_T,

(a on the variable operands, b on every left-hand side and on every pointer's right-hand
side).  Splitting x'_T = x_T + Delta and r' = r - b gbar Delta, with r C.1's r (key x_T at
t = T), gives five terms:

    G1^(3) = E[x_T r^T]                       "query"        (C.1's form on this population)
           + a E[Q r^T]                       "operands"     (layer 2 re-reads the operands)
           + b E[1_K r^T]                     "lhs"          (every left-hand side)
           + b E[(sum_ptr ebar_tgt) r^T]      "pointer_rhs"  (the uniform pointer mixture)
           - b E[gbar x'_T Delta^T]           "self_key"     (the query's updated key)

Every term is a polynomial in (a, b) of degree <= 5 (sigma linear, F quadratic, x'_T
linear).  Its coefficients are computed exactly: the expectation is an integer sum at each
integer point (a, b) in {0..5}^2 (sigma set to those integers, g scaled by p; no softmax, no
autograd), and the unique polynomial of degree <= 5 in each variable through those 36 values
is obtained with exact rational arithmetic; a 37th point checks the degree bound.  p, K and
the number of pointers are numbers here, not symbols (the C.1 part for pointers = 0 is
symbolic: :func:`reduction_to_c1`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy as sp
import torch

from disentangled.basis import Basis
from disentangled.config import ChainConfig
from disentangled.gradient import first_order_gradients, training_mixture
from disentangled.population import CompactChunk, whole_population
from theory.g1_closed_form import entry, entry_key
from theory.symbols import DEFAULT_L, a, ab_numeric, b

TERMS = ("query", "operands", "lhs", "pointer_rhs", "self_key")
DEGREE = 5  # in each of a and b
GRID = tuple(range(DEGREE + 1))


# --------------------------------------------------------------------------------------------
# The first-order quantities at W^0 for given attention weights (any dtype)


@dataclass
class FirstOrder:
    """Per-sequence quantities at (W^0, W^0), attention a on operands and b elsewhere.

    ``pg`` (N, L): p * g_t; ``pgbar`` (N,): p * gbar; ``x_T`` (N, dim); ``delta`` the layer-2
    update by source {"operands", "lhs", "pointer_rhs"} (N, dim); ``r_sites`` (N, dim): p *
    sum_{t<T} sigma_t (g_t - gbar) x_t; ``sigma`` (L,)."""

    pg: torch.Tensor
    pgbar: torch.Tensor
    x_T: torch.Tensor
    delta: dict
    r_sites: torch.Tensor
    sigma: torch.Tensor


def _one_hot_sum(chunk: CompactChunk, coef: torch.Tensor, basis: Basis, L: int) -> torch.Tensor:
    """sum_t coef[:, t] x_t (N, dim) for t < L (x_t = token + position + ebar)."""
    N = coef.shape[0]
    out = torch.zeros((N, basis.dim + 1), dtype=coef.dtype)
    out.scatter_add_(1, chunk.tok[:, :L], coef)
    out[:, basis.pos(0) : basis.pos(0) + L] += coef
    out.scatter_add_(1, chunk.bars[:, :L, 0], coef)
    out.scatter_add_(1, chunk.bars[:, :L, 1], coef)
    return out[:, : basis.dim]


def first_order(cfg: ChainConfig, chunk: CompactChunk, a_val, b_val, dtype) -> FirstOrder:
    """The quantities of :class:`FirstOrder` with sigma = a_val / b_val (ints or floats)."""
    basis = Basis(cfg.p, cfg.K, cfg.L)
    p, L, T, K = cfg.p, cfg.L, cfg.T, cfg.K
    N = len(chunk)
    sigma = torch.full((L,), b_val, dtype=dtype)
    for t in cfg.operand_pos:
        sigma[t] = a_val
    sig = sigma.expand(N, L)
    is_num = chunk.tok < p
    num = torch.where(is_num, chunk.tok, p)
    h = torch.zeros((N, p + 1), dtype=dtype).scatter_add(1, num, sig)[:, :p]
    H = h.sum(1, keepdim=True)
    need = (chunk.labels[:, None] - num) % p  # y* - m_t
    pg = torch.where(is_num, 2 * p * h.gather(1, need) - 2 * H, torch.zeros_like(sig))
    pgbar = (sig * pg).sum(1)
    coef = sig * (pg - pgbar[:, None])
    r_sites = _one_hot_sum(chunk, coef[:, :T], basis, T)
    x_T = torch.zeros((N, basis.dim + 1), dtype=dtype)
    x_T[:, basis.eq] = 1
    x_T[:, basis.pos(T)] = 1
    x_T.scatter_add_(1, chunk.bars[:, T], torch.ones((N, 2), dtype=dtype))
    x_T = x_T[:, : basis.dim]
    var = chunk.tok - basis.v(0)
    is_var = (var >= 0) & (var < K)
    t_idx = torch.arange(L)
    sources = {
        "operands": torch.zeros(L, dtype=torch.bool).index_fill(
            0, torch.tensor(cfg.operand_pos), True
        ),
        "lhs": (t_idx < 2 * K) & (t_idx % 2 == 0),
        "pointer_rhs": (t_idx < 2 * K) & (t_idx % 2 == 1),
    }
    delta = {}
    for name, where in sources.items():
        mass = torch.where(is_var & where[None], sig, torch.zeros_like(sig))
        m = torch.zeros((N, K + 1), dtype=dtype).scatter_add(1, torch.where(is_var, var, K), mass)
        d = torch.zeros((N, basis.dim), dtype=dtype)
        d[:, basis.bar_v(0) : basis.bar_v(0) + K] = m[:, :K]
        delta[name] = d
    return FirstOrder(pg, pgbar, x_T, delta, r_sites, sigma)


def term_sums(
    cfg: ChainConfig, chunk: CompactChunk, a_val, b_val, dtype
) -> dict[str, torch.Tensor]:
    """p * sum over the chunk (unweighted) of each of the five terms (dim, dim)."""
    fo = first_order(cfg, chunk, a_val, b_val, dtype)
    delta = sum(fo.delta.values())
    # r = r_sites + sigma_T (g_T - gbar) x_T with g_T = 0; r' = r - b gbar Delta
    r = fo.r_sites - b_val * fo.pgbar[:, None] * fo.x_T
    x_new = fo.x_T + delta
    out = {"query": fo.x_T.T @ r}
    for name in ("operands", "lhs", "pointer_rhs"):
        out[name] = fo.delta[name].T @ r
    out["self_key"] = -b_val * (x_new * fo.pgbar[:, None]).T @ delta
    return out


# --------------------------------------------------------------------------------------------
# Exact polynomial coefficients


@lru_cache(maxsize=1)
def _vandermonde_adjugate() -> tuple[np.ndarray, int]:
    """(M, d): integer M = d V^{-1} for V[x, k] = x^k on GRID, d = det V."""
    V = sp.Matrix([[sp.Integer(x) ** k for k in GRID] for x in GRID])
    d = int(V.det())
    M = V.inv() * d
    return np.array([[int(M[i, j]) for j in GRID] for i in GRID], dtype=object), d


def _exact_sums(cfg: ChainConfig, chunk: CompactChunk, x: int, y: int) -> dict[str, np.ndarray]:
    """p * the unweighted sum of each term at the integer point (a, b) = (x, y), as Python
    ints (computed in int64; a float64 recomputation guards against overflow)."""
    exact = term_sums(cfg, chunk, x, y, torch.int64)
    approx = term_sums(cfg, chunk, float(x), float(y), torch.float64)
    out = {}
    for n in TERMS:
        e = exact[n].to(torch.float64)
        if not torch.allclose(e, approx[n], rtol=1e-9, atol=1e-6):
            raise OverflowError(f"int64 overflow in term {n} at (a, b) = ({x}, {y})")
        out[n] = np.array(exact[n].tolist(), dtype=object)
    return out


@dataclass(frozen=True)
class KindPolynomial:
    """One kind's terms: coefficient of a^i b^j = scale * numer[term][i, j] (object ints)."""

    scale: Fraction
    numer: dict


def _kind_polynomial(cfg: ChainConfig, kind: str) -> tuple[KindPolynomial, bool]:
    M, d = _vandermonde_adjugate()
    chunk = whole_population(cfg, kind)
    grid = {pt: _exact_sums(cfg, chunk, *pt) for pt in itertools.product(GRID, GRID)}
    numer, ok = {}, True
    check_pt = (DEGREE + 2, DEGREE + 1)
    check = _exact_sums(cfg, chunk, *check_pt)
    for n in TERMS:
        S = np.stack([np.stack([grid[(x, y)][n] for y in GRID]) for x in GRID])  # (x, y, ...)
        C = np.tensordot(M, S, axes=(1, 0))  # (i, y, ...)
        C = np.tensordot(M, C, axes=(1, 1)).transpose(1, 0, 2, 3)  # (i, j, ...)
        numer[n] = C  # d^2 * coefficient * (p N)
        value = sum(C[i, j] * check_pt[0] ** i * check_pt[1] ** j for i in GRID for j in GRID)
        ok &= bool((value == check[n] * d * d).all())
    return KindPolynomial(Fraction(1, d * d * cfg.p * len(chunk)), numer), ok


@dataclass(frozen=True)
class G3Polynomial:
    """Exact G1^(3) = sum_kinds weight * scale * sum_terms sum_{i,j} numer[term][i, j]
    a^i b^j, basis order of ``labels``."""

    labels: tuple[str, ...]
    parts: tuple  # ((weight Fraction, KindPolynomial), ...)
    degree_check: bool  # the interpolant reproduces a 37th point exactly

    def term(self, name: str, a_val: float, b_val: float) -> np.ndarray:
        out = 0.0
        for w, kp in self.parts:
            C = kp.numer[name]
            val = sum(C[i, j] * (a_val**i * b_val**j) for i in GRID for j in GRID)
            out = out + float(w * kp.scale) * np.array(val, dtype=float)
        return out

    def total(self, a_val: float, b_val: float) -> np.ndarray:
        return sum(self.term(n, a_val, b_val) for n in TERMS)

    def at_beta(self, beta_value: float, L: int) -> np.ndarray:
        return self.total(*ab_numeric(beta_value, L))

    def entry(self, row: str, col: str, term: str | None = None) -> sp.Expr:
        """The exact polynomial in a, b of one entry (one term, or their sum)."""
        r, c = self.labels.index(row), self.labels.index(col)
        names = TERMS if term is None else (term,)
        expr = sp.S.Zero
        for w, kp in self.parts:
            f = w * kp.scale
            for n in names:
                C = kp.numer[n]
                for i in GRID:
                    for j in GRID:
                        if C[i, j][r, c] != 0:
                            q = f * C[i, j][r, c]
                            expr += sp.Rational(q.numerator, q.denominator) * a**i * b**j
        return sp.expand(expr)


def _mixture(cfg: ChainConfig, mix) -> list[tuple[str, Fraction]]:
    return [(k, Fraction(w).limit_denominator(10**12)) for k, w in training_mixture(cfg, mix)]


@lru_cache(maxsize=64)
def _kind_cached(key: tuple, kind: str) -> tuple[KindPolynomial, bool]:
    p, K, P, L, order = key
    cfg = ChainConfig(p=p, K=K, pointers=P, L=L, operand_order=order, hop1_share=1.0)
    return _kind_polynomial(cfg, kind)


@lru_cache(maxsize=64)
def exact_g3(cfg: ChainConfig, mix=None) -> np.ndarray:
    """The simulator's G1^(3) at (W^0, W^0) on ``mix`` (autograd, float64; cached): what the
    exact polynomials are checked against."""
    return first_order_gradients(cfg, mix)[1].numpy()


def g3_polynomial(cfg: ChainConfig, mix=None) -> G3Polynomial:
    """Exact G1^(3) on ``mix`` (default: the config's training mix) as polynomials in a, b."""
    key = (cfg.p, cfg.K, cfg.pointers, cfg.L, cfg.operand_order)
    parts, ok = [], True
    for kind, w in _mixture(cfg, mix):
        kp, good = _kind_cached(key, kind)
        parts.append((w, kp))
        ok &= good
    return G3Polynomial(tuple(Basis(cfg.p, cfg.K, cfg.L).labels), tuple(parts), ok)


# --------------------------------------------------------------------------------------------
# Reduction to Theorem C.1 (pointers = 0)


def reduction_to_c1(C: np.ndarray, labels: list[str], K: int, L: int, a_val, b_val):
    """G1^(3) on C.1's 1-var population (pointers = 0) from C.1's G1 ``C`` alone.

    With Delta = a e_v + b 1_K and Q = e_v (one variable operand, so Q_r Q_c = [r = c] Q_r):
    rows `=`, pos{T} are C.1's, plus in column bar_v{c} the self-key term
    a C[bar_c, pos_T] + b C[=, pos_T]; row bar_v{r} is (1 + a) C[bar_r] + b C[=], plus in
    column bar_v{c}: a(1 + a)[r = c] C[bar_r, pos_T] + (1 + a) b C[bar_r, pos_T]
    + a b C[bar_c, pos_T] + b^2 C[=, pos_T]   (each -b E[gbar ...] read off C's pos_T column:
    C[row, pos_T] = -b E[gbar x_T,row])."""
    ix = {lab: i for i, lab in enumerate(labels)}
    T = L - 1
    eq, pT = ix["="], ix[f"pos{T}"]
    bars = [ix[f"bar_v{u}"] for u in range(K)]
    G = C.copy()
    for r in bars:
        G[r] = (1 + a_val) * C[r] + b_val * C[eq]
    for row in (eq, pT):
        for c in bars:
            G[row, c] += a_val * C[c, pT] + b_val * C[eq, pT]
    for r in bars:
        for c in bars:
            G[r, c] += (
                a_val * (1 + a_val) * int(r == c) * C[r, pT]
                + (1 + a_val) * b_val * C[r, pT]
                + a_val * b_val * C[c, pT]
                + b_val**2 * C[eq, pT]
            )
    return G


def reduced_memory(L: int = DEFAULT_L) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(diag, off, contrast) of the bar_v block of G1^(3) with no pointers (1-var data):
    :func:`reduction_to_c1` applied to C.1's derived (symbolic) entries."""
    labels = ["=", f"pos{L - 1}", "bar_v0", "bar_v1"]
    C = np.array(
        [[entry("1var", "fixed", L, *entry_key(r, c, 3, L)) for c in labels] for r in labels],
        dtype=object,
    )
    G = reduction_to_c1(C, labels, 2, L, a, b)
    diag, off = sp.factor(G[2, 2]), sp.factor(G[2, 3])
    contrast = sp.factor(diag - off)
    c1 = sp.factor(C[2, 2] - C[2, 3])
    assert sp.simplify(contrast - ((1 + a) * c1 + a * (1 + a) * C[2, 1])) == 0
    return diag, off, contrast
