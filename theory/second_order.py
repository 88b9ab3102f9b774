"""The second-order term G2 of -grad L(W^0) = xi G1 + xi^2 G2 + O(xi^3), derived exactly.

With s = softmax(xi F), s_y = 1/p + xi (F_y - Fbar)/p + O(xi^2) (Fbar = mean_y F_y), so

    R(xi) = xi E[ sum_y (1/p - s_y) dF_y/dW ] = xi^2 G2 + O(xi^3),
    G2 = -(1/p) E[ sum_y (F_y - Fbar) dF_y/dW ] = -E_{data, y}[ (F_y - E_y' F_y') dF_y/dW ]

with y, y' independent uniform labels.  dF_y/dW = x_T (sum_t sigma_t (c_t - cbar) x_t)^T with
c_t = dF_y/dh . (number part of x_t) = sum_s sigma_s 2 Delta(m_t + m_s - y), and
F_y = sum_{s, s'} sigma_s sigma_s' Delta(m_s + m_s' - y) (kernels from :mod:`theory.fourier`).
The expectation is computed by the same Kronecker-delta engine as G1: one rational function of
a, b, p, K per entry class.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from theory import fourier
from theory.expectations import Context, RSum, expect, form, fresh, rsum
from theory.g1_closed_form import (
    COL_LABEL,
    ROW_LABEL,
    _kernel_term,
    basis_labels,
    entry_key,
    query_row_labels,
    validate,
)
from theory.population import Population, coordinate, over_copies, populations
from theory.symbols import DEFAULT_L, K, a, ab_numeric, b, p


def _F_term(f1, f2, y) -> RSum:
    """kernel(m, m', y) of F_y = sum_{m, m'} kernel h_m h_m' with m, m', y affine forms."""
    coeff, delta = fourier.kernel().as_independent(fourier.Delta)
    (arg,) = delta.args
    c1, c2, cy = (int(arg.coeff(s)) for s in (fourier.m_sym, fourier.mp_sym, fourier.y_sym))
    f = form(tuple((n, c * c1) for n, c in f1), tuple((n, c * c2) for n, c in f2),
             tuple((n, c * cy) for n, c in y))  # fmt: skip
    return RSum.delta(f, coeff)


def _numbers(pop: Population):
    return [s for s in pop.sites if s.number is not None]


def F_value(pop: Population, y) -> RSum:
    """F_y(h) at W^0 as a random quantity."""
    out = RSum()
    for s1 in _numbers(pop):
        for s2 in _numbers(pop):

            def pair(i1, s2=s2):
                return over_copies(
                    s2, lambda i2: _F_term(i1.number, i2.number, y) * i1.sigma * i2.sigma
                )  # noqa: E501

            out = out + over_copies(s1, pair)
    return out


def dF_coordinate(pop: Population, col: tuple, y) -> RSum:
    """<sum_t sigma_t (c_t - cbar) x_t, col> for the label y (dF_y/dW = x_T (.)^T)."""

    def c_of(number_form):
        return rsum(
            over_copies(s, lambda inst: _kernel_term(number_form, inst.number, y) * inst.sigma)
            for s in _numbers(pop)
        )

    cbar = rsum(over_copies(s, lambda inst: c_of(inst.number) * inst.sigma) for s in _numbers(pop))

    def one(inst):
        cc = coordinate(inst, col, pop.L)
        if not cc.terms:
            return RSum()
        c = c_of(inst.number) if inst.number is not None else RSum()
        return (c - cbar) * cc * inst.sigma

    return rsum(over_copies(s, one) for s in pop.sites)


@cache
def entry2(kind: str, order: str, L: int, row: tuple, col: tuple, same_label: bool) -> sp.Expr:
    """G2[row, col] as a sympy expression in a, b, p, K."""
    fixed = []
    if ROW_LABEL in row:
        fixed.append((ROW_LABEL, 0))
    if COL_LABEL in col:
        fixed.append((COL_LABEL, 0 if same_label else 1))
    total = sp.S.Zero
    for weight, pop in populations(kind, order, L):
        rc = coordinate(pop.query, row, L)
        if not rc.terms:
            continue
        y, y2 = ((fresh("y"), 1),), ((fresh("y"), 1),)
        x = rc * (F_value(pop, y) - F_value(pop, y2)) * dF_coordinate(pop, col, y)
        total -= weight * expect(x, Context(random=pop.random, fixed=tuple(fixed)))
    return sp.factor(total)


@cache
def _lambdified2(kind, order, L, row, col, same):
    return sp.lambdify((a, b, p, K), entry2(kind, order, L, row, col, same), "math")


def g2_matrix(
    p_value: int,
    K_value: int,
    beta_value: float,
    L: int = DEFAULT_L,
    kind: str = "1var",
    order: str = "fixed",
    rows: tuple[str, ...] | None = None,
) -> tuple[list[str], np.ndarray]:
    """(labels, G2) evaluated in float64; `rows` restricts the derivation to those row labels
    (the others are left 0)."""
    validate(p_value, K_value, L)
    labels = basis_labels(p_value, K_value, L)
    a_v, b_v = ab_numeric(beta_value, L)
    G = np.zeros((len(labels), len(labels)))
    for i, rl in enumerate(labels):
        if rl not in query_row_labels(labels, L) or (rows is not None and rl not in rows):
            continue
        for j, cl in enumerate(labels):
            key = entry_key(rl, cl, K_value, L)
            G[i, j] = _lambdified2(kind, order, L, *key)(a_v, b_v, p_value, K_value)
    return labels, G
