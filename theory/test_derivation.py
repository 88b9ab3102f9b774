"""The derivation itself, without the simulator: Fourier lemmas, the expectation engine
(against brute-force enumeration of the data distribution), the lemmas of the gradient and the
structure of the reconstructed statement."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from theory import fourier
from theory.expectations import (
    ONE,
    Context,
    RSum,
    Term,
    delta_probability,
    expect,
    form,
    mvar,
)
from theory.g1_closed_form import (
    attention_chain_rule_lemma,
    entry,
    entry_key,
    normaliser_from_sites,
    populations,
    r_coordinate,
    softmax_expansion_lemma,
)
from theory.population import coordinate
from theory.remainder import number_mass, remainder_constant
from theory.statement import statement
from theory.symbols import DEFAULT_L, K, a, attention_weights, b, beta, normaliser, p

# ----------------------------------------------------------------------------- Fourier


def test_geometric_sum_is_p_times_delta():
    (val, cond), (other, _) = fourier.geometric_sum().args
    assert val == p and other == 0
    j = fourier.j_sym
    for pv in (3, 5, 8):
        for jv in range(-2 * pv, 2 * pv):
            holds = bool(cond.subs({p: pv, j: jv}).simplify())
            assert holds == (jv % pv == 0)


def test_kernel_and_gradient_kernel():
    D = fourier.Delta
    m, mp, y = fourier.m_sym, fourier.mp_sym, fourier.y_sym
    assert fourier.kernel() == D(m + mp - y)
    assert fourier.gradient_kernel() == 2 * D(m + mp - y)
    assert fourier.label_mean_of_kernel() == 1 / p


def test_identities_symbolic():
    D = fourier.Delta
    a0, b0, y = fourier.a_sym, fourier.b_sym, fourier.y_sym
    ids = fourier.identities()
    assert (
        sp.expand(ids["F(u_a + u_b)_y"] - (2 * D(a0 + b0 - y) + D(2 * a0 - y) + D(2 * b0 - y))) == 0
    )
    assert ids["F(u_a)_y"] == D(2 * a0 - y)


@pytest.mark.parametrize("p_value", range(3, 14))
def test_identities_exact_small_p(p_value):
    assert fourier.check_identities_exact(p_value)


# ----------------------------------------------------------------------------- engine


def _brute_delta_probability(deltas, p_value):
    names = sorted({n for f in deltas for n, _ in f if n != ONE})
    hits = 0
    for xs in itertools.product(range(p_value), repeat=len(names)):
        env = dict(zip(names, xs, strict=True)) | {ONE: 1}
        hits += all(sum(c * env[n] for n, c in f) % p_value == 0 for f in deltas)
    return Fraction(hits, p_value ** len(names))


@pytest.mark.parametrize("p_value", [2, 3, 4, 6])
def test_delta_probability_numeric_p_matches_brute_force(p_value):
    rng = np.random.default_rng(p_value)
    for _ in range(25):
        n_rows = int(rng.integers(1, 4))
        deltas = tuple(
            form(
                {f"x{i}": int(rng.integers(-2, 3)) for i in range(3)},
                {ONE: int(rng.integers(-2, 3))},
            )
            for _ in range(n_rows)
        )
        got = delta_probability(deltas, p_value)
        assert Fraction(int(sp.numer(got)), int(sp.denom(got))) == _brute_delta_probability(
            deltas, p_value
        )


def _eval_term(t: Term, env: dict, slot: dict, fixed: dict, p_value: int, K_value: int) -> Fraction:
    """Brute-force value of one term for one data point (sums looped, uniform y's averaged)."""
    total = Fraction(0)
    ys = sorted({n for f in t.deltas for n, _ in f if n.startswith("y#")})
    for us in itertools.product(range(K_value), repeat=len(t.sums)):
        idx = dict(fixed) | dict(zip(t.sums, us, strict=True)) | env["index"]
        if any(idx[i] != idx[j] for i, j in t.eqs):
            continue
        if any(slot[idx[i]] != int(q[1:]) for i, q in t.slots):
            continue
        for yv in itertools.product(range(p_value), repeat=len(ys)):
            vals = dict(env["value"]) | dict(zip(ys, yv, strict=True)) | {ONE: 1}
            ok = True
            for f in t.deltas:
                s = 0
                for n, c in f:
                    s += c * (vals[mvar(str(idx[n[2:]]))] if n.startswith("m:") else vals[n])
                ok &= s % p_value == 0
            total += Fraction(int(ok), p_value ** len(ys))
    return total


def _brute_expect(x: RSum, pop, fixed, p_value, K_value, subs) -> float:
    """E[x] by enumerating the 1-var data: n, v, m_0..m_{K-1}, slot order; c = 1."""
    total, count = Fraction(0), 0
    for n in range(p_value):
        for v in range(K_value):
            for ms in itertools.product(range(p_value), repeat=K_value):
                for perm in itertools.permutations(range(K_value)):
                    slot = {u: q for q, u in enumerate(perm)}  # assignment u in slot pair q
                    env = {
                        "index": {"v": v},
                        "value": {"n": n, "$c": 1} | {mvar(str(u)): ms[u] for u in range(K_value)},
                    }
                    for t in x.terms:
                        coeff = float(t.coeff.subs(subs))
                        total += Fraction(coeff) * _eval_term(t, env, slot, fixed, p_value, K_value)
                    count += 1
    return float(total / count)


@pytest.mark.parametrize("p_value,K_value", [(2, 2), (3, 2)])
def test_engine_matches_enumeration_on_g1_entries(p_value, K_value):
    """Whole G1 entries: the symbolic expectation vs a loop over every sequence."""
    ((_, pop),) = populations("1var", "fixed", DEFAULT_L)
    subs = {a: sp.Rational(2, 5), b: sp.Rational(1, 70)}
    cases = [("=", "n0"), ("=", f"pos{DEFAULT_L - 2}"), ("=", "pos1"), ("bar_v0", "bar_v0"),
             ("bar_v0", "bar_v1"), ("bar_v0", "v0"), ("=", "pad")]  # fmt: skip
    for row_label, col_label in cases:
        row, col, same = entry_key(row_label, col_label, K_value, DEFAULT_L)
        fixed = {}
        if "vr" in row:
            fixed["vr"] = 0
        if "vc" in col:
            fixed["vc"] = 0 if same else 1
        x = coordinate(pop.query, row, DEFAULT_L) * r_coordinate(pop, col)
        symbolic = expect(x, Context(pop.random, tuple(fixed.items())))
        want = float(symbolic.subs(subs | {p: p_value, K: K_value}))
        # q labels: slot "q" is slot pair 0 in the enumeration
        x_num = RSum([Term(t.coeff, t.sums, t.deltas, t.eqs, tuple((i, "q0") for i, _ in t.slots))
                      for t in x.terms])  # fmt: skip
        got = _brute_expect(x_num, pop, fixed, p_value, K_value, subs | {K: K_value})
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (row_label, col_label)


# ----------------------------------------------------------------------------- lemmas


def test_lemmas():
    assert softmax_expansion_lemma()
    assert attention_chain_rule_lemma()


@pytest.mark.parametrize("kind", ["0var", "1var", "2var"])
@pytest.mark.parametrize("order", ["fixed", "swapped", "mixed"])
def test_normaliser_is_sequence_independent(kind, order):
    Z, weights = normaliser_from_sites(kind, order)
    assert sp.simplify(Z - normaliser(DEFAULT_L)) == 0
    assert sp.simplify(Z - (2 * sp.exp(beta) + DEFAULT_L - 2)) == 0
    a_b, b_b = attention_weights(DEFAULT_L)
    for site, w in weights:  # every site's softmax weight is the a or b the derivation uses
        assert sp.simplify(w - site.sigma.subs({a: a_b, b: b_b})) == 0


def test_number_mass_and_remainder_constant():
    assert number_mass("1var") == a + K * b
    assert sp.expand(remainder_constant("1var") - 2 * (a + K * b) ** 3) == 0


# ----------------------------------------------------------------------------- structure


def test_statement_structure_checks_pass():
    st = statement()
    assert st.checks and all(st.checks.values()), st.checks


def test_key_vector_sums_to_zero_over_positions_and_tokens():
    """sum_t sigma_t (g_t - gbar) = 0 per sequence: the `=` row sums to 0 over the pi_t columns
    and over the token columns (every position has one token and one position)."""
    L, Kv = DEFAULT_L, 3

    def e(col):
        return entry("1var", "fixed", L, *entry_key("=", col, Kv, L))

    pos = sum(e(f"pos{j}") for j in range(L))
    toks = p * e("n0") + Kv * e("v0") + e("=") + e("+") + e("pad")
    a_b, b_b = attention_weights(L)
    for expr in (pos, toks):
        assert sp.simplify(expr.subs(K, Kv).subs({a: a_b, b: b_b})) == 0


def test_ebar_ratio_limit():
    from theory.claims import ratio_limit

    ratio, lim = ratio_limit()
    assert lim == 0
    assert sp.simplify(ratio - 2 * b / (1 - 4 * b)) == 0  # hand derivation of the same ratio


def test_signs_for_all_beta_p_K():
    """Claims 3-5's signs hold for every beta, every p >= 2 and every admissible K (fixed
    order); in mixed order the operand entries' sign depends on beta."""
    from theory.statement import sign_summary

    L = DEFAULT_L

    def s(row, col, order="fixed"):
        return sign_summary(entry("1var", order, L, *entry_key(row, col, 3, L)), L)

    assert s("=", f"pos{L - 2}") == "-" and s("bar_v0", f"pos{L - 2}") == "-"
    assert s("bar_v0", "v0") == "-" and s("bar_v0", "v1") == "-"
    assert s("bar_v0", "bar_v0") == "+" and s("bar_v0", "bar_v1") == "-"
    assert s("=", f"pos{L - 3}") == "+"  # the number operand: (1 - 2a) > 0
    for col in ("pos1", "n0", "bar_v0"):
        assert s("=", col) == "+"
    for col in ("pad", "+", "v0"):
        assert s("=", col) == "-"
    assert s("=", f"pos{L - 2}", "swapped") == "+" and s("=", f"pos{L - 3}", "swapped") == "-"
    assert s("=", f"pos{L - 2}", "mixed") == "depends"
