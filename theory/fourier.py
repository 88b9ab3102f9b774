"""Gromov's Fourier MLP F, derived symbolically.

F(h)_y = (1/p) Re sum_{k=0}^{p-1} w^{-k y} z_k^2,   z_k = sum_m w^{k m} h_m,   w = e^{2 pi i/p}.

Everything here follows from one lemma, the geometric series over the p-th roots of unity:

    sum_{k=0}^{p-1} w^{k j} = (1 - w^{p j}) / (1 - w^j) = p [j = 0 mod p]     (j integer),

which sympy evaluates itself (:func:`geometric_sum`).  With it:

* F is the real quadratic form F_y(h) = sum_{m, m'} [m + m' = y] h_m h_m' (:func:`kernel`);
* dF_y/dh_m = 2 sum_{m'} [m + m' = y] h_m' = 2 h_{y - m} (:func:`gradient_kernel`);
* mean_y of the kernel is 1/p, so mean_y F_y = (sum_m h_m)^2 / p;
* F(u_a + u_b)_y = 2[y = a+b] + [y = 2a] + [y = 2b] and F(u_a)_y = [y = 2a]
  (:func:`identities`), checked exactly in Q(w) for every small p by
  :func:`check_identities_exact`.

`Delta(j)` below is an undefined sympy function standing for [j = 0 (mod p)].
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from theory.symbols import p

Delta = sp.Function("Delta")  # Delta(j) = [j = 0 (mod p)]

k = sp.Symbol("k", integer=True, nonnegative=True)
j_sym = sp.Symbol("j", integer=True)
y_sym, m_sym, mp_sym, a_sym, b_sym = sp.symbols("y m m' a_0 b_0", integer=True)


def w_pow(e: sp.Expr) -> sp.Expr:
    """w^e = exp(2 pi i e / p)."""
    return sp.exp(2 * sp.pi * sp.I * e / p)


@cache
def geometric_sum() -> sp.Expr:
    """sum_{k=0}^{p-1} w^{k j} for integer j, evaluated by sympy's summation.

    sympy returns Piecewise((p, w^j = 1), (0, True)): for integer j, w^{p j} = 1 kills the
    numerator of the geometric series unless w^j = 1, i.e. j = 0 (mod p).
    """
    return sp.summation(w_pow(k * j_sym), (k, 0, p - 1))


def _sum_over_k(expr: sp.Expr) -> sp.Expr:
    """Apply the geometric-series lemma to a sum of terms c * w^{k j}: returns sum c p Delta(j)."""
    lemma = geometric_sum()
    (value, cond), (other, _) = lemma.args
    assert other == 0 and value == p and cond == sp.Eq(w_pow(j_sym), 1), lemma
    out = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(expr)):
        coeff, rest = term.as_independent(k)
        if rest == 1:  # no k: sum over k gives p copies
            out += coeff * p
            continue
        # rest = prod_i exp(2 pi i k j_i / p) = w^{k j} with j = sum_i j_i: read off j
        factors = sp.Mul.make_args(rest)
        assert all(isinstance(f, sp.exp) for f in factors), rest
        arg = sp.expand(sp.Add(*[f.args[0] for f in factors]) * p / (2 * sp.pi * sp.I))
        jj = sp.expand(arg / k)
        assert not jj.has(k), rest
        out += coeff * value * Delta(jj)
    return out


@cache
def kernel() -> sp.Expr:
    """Coefficient of h_m h_m' (ordered pair) in F_y(h): (1/p) Re sum_k w^{-k y} w^{k m} w^{k m'}.

    Derived: z_k^2 = sum_{m, m'} w^{k (m + m')} h_m h_m', then the lemma over k.
    Returns Delta(m + m' - y) (the real part of a real number is itself).
    """
    summand = w_pow(-k * y_sym) * w_pow(k * m_sym) * w_pow(k * mp_sym)
    return sp.simplify(_sum_over_k(summand) / p)


@cache
def gradient_kernel() -> sp.Expr:
    """dF_y/dh_m = sum_m' G(m, m', y) h_m' with G = kernel(m, m') + kernel(m', m) = 2 Delta(...)."""
    kern = kernel()
    swapped = kern.subs({m_sym: mp_sym, mp_sym: m_sym}, simultaneous=True)
    return sp.simplify(kern + swapped)


@cache
def label_mean_of_kernel() -> sp.Expr:
    """(1/p) sum_y Delta(m + m' - y) = (1/p) sum_k w^{k (m + m')} [(1/p) sum_y w^{-k y}] = 1/p.

    Derived by writing Delta with the lemma and summing the geometric series over y first.
    """
    yy = sp.Symbol("yy", integer=True, nonnegative=True)
    inner = sp.summation(w_pow(-k * yy), (yy, 0, p - 1))  # = p [k = 0] for 0 <= k < p
    # inner is p iff w^{-k} = 1, i.e. only the k = 0 term of the outer sum survives.
    (val, _), _ = inner.args
    outer_k0 = (w_pow(k * (m_sym + mp_sym)) / p).subs(k, 0)  # the surviving k = 0 term
    return sp.simplify(outer_k0 * val / p)


def F_of_one_hots(*operands: sp.Expr) -> sp.Expr:
    """F(u_{c_1} + ... + u_{c_r})_y as a sum of Delta's, derived from the Fourier form."""
    z_k = sp.Add(*[w_pow(k * c) for c in operands])
    return sp.expand(_sum_over_k(w_pow(-k * y_sym) * z_k**2) / p)


@cache
def identities() -> dict[str, sp.Expr]:
    """The two identities of the paper, derived for symbolic p, a, b, y."""
    return {
        "F(u_a + u_b)_y": F_of_one_hots(a_sym, b_sym),
        "F(u_a)_y": F_of_one_hots(a_sym),
    }


# --------------------------------------------------------------------------------------------
# Exact check in the cyclotomic field Q(w), independent of the lemma.


def _reduction_matrix(p_val: int) -> np.ndarray:
    """Row i = coefficients of w^i reduced modulo the p-th cyclotomic polynomial."""
    x = sp.Symbol("x")
    phi = sp.Poly(sp.cyclotomic_poly(p_val, x), x)
    deg = phi.degree()
    rows = []
    for i in range(p_val):
        r = sp.Poly(x**i, x).rem(phi).all_coeffs()[::-1]
        rows.append([int(c) for c in r] + [0] * (deg - len(r)))
    return np.array(rows, dtype=np.int64)


def _F_group_ring(h: np.ndarray, y: int, p_val: int) -> np.ndarray:
    """p * F(h)_y as an element of Z[w]/(w^p - 1) (integer vector of length p), h integer.

    Computes sum_k w^{-k y} z_k^2 literally, then takes the real part via w^i -> w^{-i}.
    """
    acc = np.zeros(p_val, dtype=np.int64)
    idx = np.arange(p_val)
    for kk in range(p_val):
        z = np.zeros(p_val, dtype=np.int64)
        np.add.at(z, (kk * idx) % p_val, h)  # z_k = sum_m h_m w^{k m}
        sq = z[(idx[:, None] - idx[None, :]) % p_val] @ z  # z * z (cyclic convolution)
        acc += np.roll(sq, -kk * y)  # times w^{-k y}
    return acc + acc[(-idx) % p_val]  # 2 Re


def check_identities_exact(p_val: int, n_random: int = 3, seed: int = 0) -> bool:
    """Exact check, for one integer p, of both identities for all a, b, y and of the quadratic
    form F_y(h) = sum_{m + m' = y} h_m h_m' for a few random integer h. Arithmetic in Z[w],
    reduced modulo the cyclotomic polynomial, so equality is equality in Q(w)."""
    R = _reduction_matrix(p_val)
    one = R[0]

    def equals(elem: np.ndarray, value_times_2p: int) -> bool:
        return bool(np.array_equal(elem @ R, value_times_2p * one))

    for a0 in range(p_val):
        for b0 in range(p_val):
            h = np.zeros(p_val, dtype=np.int64)
            h[a0] += 1
            h[b0] += 1
            for y in range(p_val):
                want = 2 * ((a0 + b0) % p_val == y) + ((2 * a0) % p_val == y)
                want += (2 * b0) % p_val == y
                if not equals(_F_group_ring(h, y, p_val), 2 * p_val * want):
                    return False
        h = np.zeros(p_val, dtype=np.int64)
        h[a0] = 1
        for y in range(p_val):
            if not equals(_F_group_ring(h, y, p_val), 2 * p_val * ((2 * a0) % p_val == y)):
                return False
    rng = np.random.default_rng(seed)
    for _ in range(n_random):
        h = rng.integers(-3, 4, size=p_val)
        for y in range(p_val):
            want = sum(int(h[m] * h[(y - m) % p_val]) for m in range(p_val))
            if not equals(_F_group_ring(h, y, p_val), 2 * p_val * want):
                return False
    return True
