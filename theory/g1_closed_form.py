"""Closed form of G1, the leading-order population gradient at W^0, derived by sympy.

Small-output expansion (:func:`softmax_expansion_lemma`).  With s = softmax(xi F), the
cross-entropy gradient is grad_W L = xi E[ sum_y (s_y - [y = y*]) dF_y/dW ], and
s_y = 1/p + O(xi), so

    -grad_W L(W^0) = xi G1 + O(xi^2),   G1 = E[ d/dW ( F_{y*}(h) - mean_y F_y(h) ) ].

Chain rule (:func:`attention_chain_rule_lemma`).  score_t = x_T^T W x_t and sigma = softmax(score)
give d sigma_t / dW = sigma_t x_T (x_t - sum_s sigma_s x_s)^T; h = sum_t sigma_t W_OV x_t has
number coordinates h_m = sum_t sigma_t [x_t carries e_m].  Hence

    G1 = E[ x_T r^T ],   r = sum_t sigma_t (g_t - gbar) x_t,   gbar = sum_t sigma_t g_t,

    g_t = sum_m [x_t carries e_m] (dF_{y*}/dh_m - mean_y dF_y/dh_m),

with dF_y/dh_m = 2 sum_m' [m + m' = y] h_m' from :mod:`theory.fourier`.  Each entry
G1[row, col] = E[ <x_T, row> <r, col> ] is then expanded into Kronecker deltas over the sites
of :mod:`theory.population` and its expectation computed exactly by
:mod:`theory.expectations`: a rational function of a, b, p and K, one per entry class.

Entry classes (labels as in the simulator's Basis): rows are the query's components `=`,
`pos{L-1}` and `bar_v{r}` (all other rows of G1 vanish); columns are grouped by what the
entry can depend on (`n{m}` all alike; `v{u}` and `bar_v{u}` by u = r or not; positions by
role: number slot, variable slot, pad, `+`, the two operands, the query).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import sympy as sp

from disentangled.basis import Basis
from theory import fourier
from theory.expectations import Context, RSum, expect, form, fresh, rsum
from theory.population import (
    Population,
    coordinate,
    over_copies,
    populations,
    position_class,
)
from theory.symbols import DEFAULT_L, K, a, ab_numeric, b, p, xi

# --------------------------------------------------------------------------------------------
# Two lemmas, checked by sympy on small symbolic instances


def softmax_expansion_lemma(n_labels: int = 3) -> bool:
    """d/dxi softmax(xi F)_y at xi = 0 equals (F_y - mean F)/p, and softmax(0) = 1/p.

    Hence grad L = xi E[sum_y (1/p - [y = y*]) dF_y/dW] + O(xi^2), i.e.
    -grad L = xi E[d(F_{y*} - mean_y F_y)/dW] + O(xi^2).
    """
    F = sp.symbols(f"F0:{n_labels}", real=True)
    s = [sp.exp(xi * f) / sp.Add(*[sp.exp(xi * g) for g in F]) for f in F]
    mean = sp.Add(*F) / n_labels
    ok = all(sp.simplify(si.subs(xi, 0) - sp.Rational(1, n_labels)) == 0 for si in s)
    ok &= all(
        sp.simplify(sp.diff(si, xi).subs(xi, 0) - (f - mean) / n_labels) == 0
        for si, f in zip(s, F, strict=True)
    )
    return bool(ok)


def attention_chain_rule_lemma(n_pos: int = 3, dim: int = 2, self_key: bool = False) -> bool:
    """d sigma_t/dW = sigma_t x_T (x_t - sum_s sigma_s x_s)^T, sigma = softmax_t(x_T^T W x_t).

    ``self_key``: the query is also the last key (x_T itself: the two-hop model's last layer,
    whose query x'_T attends to itself), and the rule still holds with that key."""
    W = sp.Matrix(dim, dim, lambda i, j: sp.Symbol(f"W{i}{j}"))
    xT = sp.Matrix(sp.symbols(f"q0:{dim}"))
    xs = [sp.Matrix(sp.symbols(f"x{t}_0:{dim}")) for t in range(n_pos)] + [xT] * self_key
    scores = [(xT.T * W * x)[0] for x in xs]
    Z = sp.Add(*[sp.exp(s) for s in scores])
    sig = [sp.exp(s) / Z for s in scores]
    xbar = sum((sg * x for sg, x in zip(sig, xs, strict=True)), sp.zeros(dim, 1))
    E = {sp.exp(s): sp.Symbol(f"E{t}", positive=True) for t, s in enumerate(scores)}
    for t in range(len(xs)):
        want = sig[t] * xT * (xs[t] - xbar).T
        for i in range(dim):
            for j in range(dim):
                diff = (sp.diff(sig[t], W[i, j]) - want[i, j]).subs(E)  # exp(score_s) -> E_s
                if sp.cancel(diff) != 0:
                    return False
    return True


# --------------------------------------------------------------------------------------------
# Building r = sum_t sigma_t (g_t - gbar) x_t as random quantities


def _kernel_term(f_m, f_mp, f_y) -> RSum:
    """dF_y/dh_m kernel from :func:`fourier.gradient_kernel` (c * Delta(alpha m + beta m' + g y))
    with m, m', y replaced by affine forms."""
    expr = fourier.gradient_kernel()
    coeff, delta = expr.as_independent(fourier.Delta)
    (arg,) = delta.args
    cm, cmp_, cy = (int(arg.coeff(s)) for s in (fourier.m_sym, fourier.mp_sym, fourier.y_sym))
    assert sp.expand(arg - cm * fourier.m_sym - cmp_ * fourier.mp_sym - cy * fourier.y_sym) == 0
    f = form(tuple((n, c * cm) for n, c in f_m), tuple((n, c * cmp_) for n, c in f_mp),
             tuple((n, c * cy) for n, c in f_y))  # fmt: skip
    return RSum.delta(f, coeff)


def g_of(pop: Population, number_form) -> RSum:
    """g for a site carrying the number with affine form `number_form`:
    sum_{number sites s} sigma_s (K(f_t, f_s, y*) - E_y K(f_t, f_s, y)), y uniform fresh."""
    out = RSum()
    for s in pop.sites:
        if s.number is None:
            continue
        y = ((fresh("y"), 1),)

        def term(inst, y=y):
            label_part = _kernel_term(number_form, inst.number, pop.label)
            mean_part = _kernel_term(number_form, inst.number, y)
            return (label_part - mean_part) * inst.sigma

        out = out + over_copies(s, term)
    return out


def gbar_of(pop: Population) -> RSum:
    """gbar = sum_t sigma_t g_t (only number-carrying sites have g_t != 0)."""
    return rsum(
        over_copies(s, lambda inst: g_of(pop, inst.number) * inst.sigma)
        for s in pop.sites
        if s.number is not None
    )


def r_coordinate(pop: Population, col: tuple) -> RSum:
    """<r, col> = sum_t sigma_t (g_t - gbar) <x_t, col>."""
    gbar = gbar_of(pop)

    def one(inst):
        c = coordinate(inst, col, pop.L)
        if not c.terms:
            return RSum()
        g = g_of(pop, inst.number) if inst.number is not None else RSum()
        return (g - gbar) * c * inst.sigma

    return rsum(over_copies(s, one) for s in pop.sites)


ROW_LABEL, COL_LABEL = "vr", "vc"


@cache
def entry(
    kind: str, order: str, L: int, row: tuple, col: tuple, same_label: bool, drop_site: str = ""
) -> sp.Expr:
    """G1[row, col] as a sympy expression in a, b, p, K.

    row/col are descriptors (see :func:`theory.population.coordinate`) whose variable label, if
    any, is ROW_LABEL / COL_LABEL; same_label says whether the two labels are equal.
    drop_site (default none) removes the key site of that name from the derivation: a
    deliberately wrong variant, used to show that the tests catch a wrong closed form.
    """
    total = sp.S.Zero
    fixed = []
    if ROW_LABEL in row:
        fixed.append((ROW_LABEL, 0))
    if COL_LABEL in col:
        fixed.append((COL_LABEL, 0 if same_label else 1))
    for weight, pop in populations(kind, order, L):
        if drop_site:
            pop = replace(pop, sites=tuple(s for s in pop.sites if s.name != drop_site))
        rc = coordinate(pop.query, row, L)
        if not rc.terms:
            continue
        ctx = Context(random=pop.random, fixed=tuple(fixed))
        total += weight * expect(rc * r_coordinate(pop, col), ctx)
    return sp.factor(total)


# --------------------------------------------------------------------------------------------
# Basis labels, entry classes, evaluation


def basis_labels(p_value: int, K_value: int, L: int = DEFAULT_L) -> list[str]:
    """n0..n{p-1}, v0..v{K-1}, '=', '+', 'pad', pos0..pos{L-1}, bar_n0.., bar_v0.. (spec order):
    the simulator's basis, so the two JSON outputs share one label order."""
    return list(Basis(p_value, K_value, L).labels)


def descriptor(label: str, K_value: int, L: int, role: str) -> tuple[tuple, int | None]:
    """(descriptor, variable label or None) of a basis label; role 'row' or 'col'."""
    name = ROW_LABEL if role == "row" else COL_LABEL
    if label in ("=", "+", "pad"):
        return ("tok", label), None
    if label.startswith("bar_v"):
        return ("bar_v", name), int(label[5:])
    if label.startswith("bar_n"):
        return ("bar_n",), None
    if label.startswith("pos"):
        return position_class(int(label[3:]), K_value, L), None
    if label.startswith("n"):
        return ("n", "$c"), None
    if label.startswith("v"):
        return ("v", name), int(label[1:])
    raise ValueError(f"unknown basis label {label!r}")


def entry_key(row_label: str, col_label: str, K_value: int, L: int) -> tuple[tuple, tuple, bool]:
    row, ru = descriptor(row_label, K_value, L, "row")
    col, cu = descriptor(col_label, K_value, L, "col")
    return row, col, (ru is not None and cu is not None and ru == cu)


def query_row_labels(labels: list[str], L: int) -> list[str]:
    """Rows that can be nonzero: the components of x_T."""
    return [lab for lab in labels if lab in ("=", f"pos{L - 1}") or lab.startswith("bar_v")]


@cache
def _lambdified(kind, order, L, row, col, same, drop_site=""):
    return sp.lambdify((a, b, p, K), entry(kind, order, L, row, col, same, drop_site), "math")


def validate(p_value: int, K_value: int, L: int = DEFAULT_L) -> None:
    if p_value < 2:
        raise ValueError(f"p must be >= 2, got {p_value}")
    if K_value < 1 or 2 * K_value > L - 4:
        raise ValueError(f"K must satisfy 1 <= K <= {(L - 4) // 2} for L = {L}, got {K_value}")


def g1_matrix(
    p_value: int,
    K_value: int,
    beta_value: float,
    L: int = DEFAULT_L,
    kind: str = "1var",
    order: str = "fixed",
    drop_site: str = "",
) -> tuple[list[str], np.ndarray]:
    """(basis labels, G1) with G1 the closed form evaluated in float64 (row = query component).

    Entries are grouped into classes (:func:`entry_key`); each class is derived once
    (cached) and lambdified."""
    validate(p_value, K_value, L)
    from theory.expectations import EXCEPTIONAL_MODULI

    labels = basis_labels(p_value, K_value, L)
    a_v, b_v = ab_numeric(beta_value, L)
    G = np.zeros((len(labels), len(labels)))
    for i, rl in enumerate(labels):
        if rl not in query_row_labels(labels, L):
            continue
        for j, cl in enumerate(labels):
            key = entry_key(rl, cl, K_value, L)
            G[i, j] = _lambdified(kind, order, L, *key, drop_site)(a_v, b_v, p_value, K_value)
    bad = [m for m in EXCEPTIONAL_MODULI if np.gcd(m, p_value) > 1]
    if bad:
        raise ValueError(f"closed form derived for p coprime to {sorted(bad)}; p = {p_value}")
    return labels, G


def entry_classes(K_value: int = 3, L: int = DEFAULT_L, kind: str = "1var", order: str = "fixed"):
    """[(description, row label, column label, expression)] one per entry class of G1."""
    cols = ["n0", "v0", "v1", "=", "+", "pad", "pos0", "pos1", f"pos{2 * K_value}"]
    cols += [f"pos{j}" for j in range(L - 4, L)] + ["bar_n0", "bar_v0", "bar_v1"]
    out = []
    for rl in ("=", f"pos{L - 1}", "bar_v0"):
        for cl in cols:
            if rl != "bar_v0" and cl in ("v1", "bar_v1"):
                continue
            row, col, same = entry_key(rl, cl, K_value, L)
            out.append((rl, cl, entry(kind, order, L, row, col, same)))
    return out


# --------------------------------------------------------------------------------------------
# The normaliser


def normaliser_from_sites(kind: str = "1var", order: str = "fixed", L: int = DEFAULT_L):
    """Z = sum_t exp(x_T^T W^0 x_t) computed from the sites, with the attention weights.

    x_T^T W^0 x_t = beta <x_T, e_=> (<x_t, pi_{L-3}> + <x_t, pi_{L-2}>): both factors are
    read from the coordinates of the sites and are constants (no data-dependent term), so Z
    is one expression for the whole population.  Returns (Z, [(site, exp(score)/Z)]).
    """
    from theory.symbols import beta

    def const(x: RSum) -> sp.Expr:
        assert all(not (t.deltas or t.eqs or t.slots or t.sums) for t in x.terms), x
        return sp.Add(*[t.coeff for t in x.terms])

    out = []
    for _, pop in populations(kind, order, L):
        q = const(coordinate(pop.query, ("tok", "="), L))
        scores = []
        for s in pop.sites:
            key = sum((coordinate(s, ("pos_at", j), L) for j in (L - 3, L - 2)), RSum())
            copies = K if s.family else s.mult
            scores.append((s, copies, beta * q * const(key)))
        Z = sp.expand(sp.Add(*[c * sp.exp(sc) for _, c, sc in scores]))
        out.append((Z, [(s, sp.exp(sc) / Z) for s, _, sc in scores]))
    Zs = {Z for Z, _ in out}
    assert len(Zs) == 1, Zs
    return out[0]
