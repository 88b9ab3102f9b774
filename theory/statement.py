"""The reconstructed statement of Theorem C.1, assembled from the derived entry classes.

From the entries of G1 (:mod:`theory.g1_closed_form`, 1-var data) this module derives, with
sympy, the structure

    G1 = (e_= + pi_T + ebar_mean) rho^T
         + c_mem * sum_v ebar_v (K ebar_v - sum_u ebar_u)^T
         + c_tok * sum_v ebar_v (K e_v  - sum_u e_u)^T,          ebar_mean = (1/K) sum_u ebar_u,

where rho is the (common) `=` / pos_T row, and checks every step: the pos_T row equals the
`=` row; a bar_v{r} row equals rho/K in every column that carries no variable label; in the
v and bar_v columns its deviation from rho/K is a centred identity c (K [u = r] - 1).  Every
coefficient is also written as a multiple of gamma = E[gbar] (the attention-weighted mean of
g at W^0), itself computed by the expectation engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from theory.expectations import Context, expect
from theory.g1_closed_form import entry, entry_key, gbar_of
from theory.population import populations
from theory.symbols import DEFAULT_L, K, a, b, p

# Representative labels per column class (K_REP = 3 gives every class: slots 0..5, pad 6..11)
K_REP = 3

COLUMN_CLASSES = [
    # (representative label, class name, what a positive entry does to attention)
    ("n0", "n{m} (any number token)", "raises every key that carries a number"),
    ("v0", "v{u} (variable tokens)", "lowers assignment variables and the variable operand"),
    ("=", "`=` token", "lowers the query's attention to itself"),
    ("+", "`+` token", "lowers the `+` position"),
    ("pad", "`pad` token", "lowers every pad position"),
    ("pos1", "pos of a number slot (1, 3, .., 2K-1)", "raises every assignment's number"),
    ("pos0", "pos of a variable slot (0, 2, .., 2K-2)", "lowers assignment variables"),
    ("pos{pad}", "pos of a pad slot (2K .. L-5)", "lowers pad positions"),
    ("pos{L-4}", "pos of `+` (L-4)", "lowers the `+` position"),
    ("pos{L-3}", "pos of the number operand (L-3, fixed order)", "raises the number operand"),
    ("pos{L-2}", "pos of the variable operand (L-2, fixed order)", "lowers the variable operand"),
    ("pos{L-1}", "pos of the query (L-1)", "lowers the query's attention to itself"),
    ("bar_n0", "bar_n{m}", "nothing (no input carries bar_n)"),
    ("bar_v0", "bar_v{u}", "raises every assignment's number (they carry ebar_u) and the query"),
]


def _label(rep: str, L: int) -> str:
    return {
        "pos{pad}": f"pos{2 * K_REP}",
        "pos{L-4}": f"pos{L - 4}",
        "pos{L-3}": f"pos{L - 3}",
        "pos{L-2}": f"pos{L - 2}",
        "pos{L-1}": f"pos{L - 1}",
    }.get(rep, rep)


def _entry(row: str, col: str, L: int, order: str) -> sp.Expr:
    return entry("1var", order, L, *entry_key(row, col, K_REP, L))


@dataclass
class Statement:
    gamma: sp.Expr  # E[gbar]
    rho: list[tuple[str, str, str, sp.Expr]]  # (label, class, effect, expression)
    c_mem: sp.Expr
    c_tok: sp.Expr
    c_diag: sp.Expr
    c_off: sp.Expr
    checks: dict[str, bool]


@cache
def gamma_expr(L: int = DEFAULT_L, order: str = "fixed") -> sp.Expr:
    """gamma = E[gbar] = E[sum_t sigma_t g_t] at W^0, by the expectation engine."""
    total = sp.S.Zero
    for w, pop in populations("1var", order, L):
        total += w * expect(gbar_of(pop), Context(random=pop.random))
    return sp.factor(total)


@cache
def statement(L: int = DEFAULT_L, order: str = "fixed") -> Statement:
    checks = {}
    rho = []
    T = f"pos{L - 1}"
    for rep, name, effect in COLUMN_CLASSES:
        lab = _label(rep, L)
        r_eq, r_T = _entry("=", lab, L, order), _entry(T, lab, L, order)
        checks[f"row pos_T = row `=` at {lab}"] = sp.simplify(r_eq - r_T) == 0
        if not lab.startswith(("v", "bar_v")):
            r_bar = _entry("bar_v0", lab, L, order)
            checks[f"row bar_v = rho/K at {lab}"] = sp.simplify(r_bar - r_eq / K) == 0
        rho.append((lab, name, effect, r_eq))
    cs = {}
    for fam in ("v", "bar_v"):
        base = _entry("=", f"{fam}0", L, order) / K
        same = sp.factor(_entry("bar_v0", f"{fam}0", L, order) - base)
        other = sp.factor(_entry("bar_v0", f"{fam}1", L, order) - base)
        c = sp.factor(-other)
        checks[f"{fam} deviation is centred: same = (K-1) c"] = sp.simplify(same - (K - 1) * c) == 0
        cs[fam] = c
    c_diag = _entry("bar_v0", "bar_v0", L, order)
    c_off = _entry("bar_v0", "bar_v1", L, order)
    return Statement(gamma_expr(L, order), rho, cs["bar_v"], cs["v"], c_diag, c_off, checks)


def in_gamma(expr: sp.Expr, L: int = DEFAULT_L, order: str = "fixed") -> sp.Expr:
    """expr / gamma, simplified (how many gammas an entry is)."""
    return sp.factor(sp.simplify(expr / gamma_expr(L, order)))


# a typical admissible point (beta about 4): sums are written so that they are positive here
_REFERENCE = {a: sp.Rational(45, 100), b: sp.Rational(1, 200), p: 7, K: 3}


def _factors(e: sp.Expr) -> tuple[int, sp.Expr, list[tuple[sp.Expr, int]]]:
    """(sign, |numeric coefficient|, [(base, exponent)]) with every sum oriented to be positive
    at _REFERENCE (1 - 2b rather than -(2b - 1), p - 1 rather than -(1 - p))."""
    coeff, factors = e.as_coeff_mul()
    sign = -1 if coeff < 0 else 1
    out = []
    for f in factors:
        base, expo = f.as_base_exp()
        if base.is_Add and base.subs(_REFERENCE) < 0:
            base = sp.expand(-base)
            sign *= (-1) ** int(expo)
        out.append((base, int(expo)))
    return sign, abs(coeff), out


def _factor_latex(base: sp.Expr, expo: int, alone: bool) -> str:
    if base.is_Add:
        const = base.as_coeff_Add()[0]
        body = sp.latex(base, order="rev-lex" if const > 0 else "lex")
        text = body if (alone and expo == 1) else f"\\left({body}\\right)"
    else:
        text = sp.latex(base)
    return text if expo == 1 else f"{text}^{{{expo}}}"


def latex(expr: sp.Expr) -> str:
    """LaTeX of a factored rational expression, sums written with a positive constant term."""
    expr = sp.factor(expr)
    if expr == 0:
        return "0"
    num, den = sp.fraction(expr)
    s1, c1, f1 = _factors(num)
    s2, c2, f2 = _factors(den)
    c = sp.Rational(c1, c2) if (c1.is_Integer and c2.is_Integer) else c1 / c2

    def join(coeff, fs):
        parts = [] if coeff == 1 else [sp.latex(coeff)]
        alone = coeff == 1 and len(fs) == 1
        parts += [_factor_latex(bs, ex, alone) for bs, ex in fs]
        return " ".join(parts) if parts else "1"

    cn, cd = sp.fraction(c)
    top, bottom = join(cn, f1), join(cd, f2)
    body = top if bottom == "1" else f"\\frac{{{top}}}{{{bottom}}}"
    return ("-" if s1 * s2 < 0 else "") + body


def symbolic_sign(expr: sp.Expr, L: int = DEFAULT_L, K_value: int | None = None) -> int | None:
    """Sign of a G1 entry for every beta, every p >= 2 and every K >= 1, decided by sympy.

    Substitutes a = t/(2t + L - 2), b = 1/(2t + L - 2) with t = e^beta > 0 and p = 1 + q with
    q > 0, factors, and asks sympy whether the result is positive / negative.  Returns +1, -1,
    0, or None when sympy cannot decide (e.g. the sign depends on beta)."""
    t = sp.Symbol("t", positive=True)
    q = sp.Symbol("q", positive=True)
    Zt = 2 * t + L - 2
    if K_value is not None:
        expr = expr.subs(K, K_value)
    e = sp.factor(sp.together(expr.subs({a: t / Zt, b: 1 / Zt, p: 1 + q})))
    if e == 0:
        return 0
    if e.is_positive:
        return 1
    if e.is_negative:
        return -1
    return None


def signs_over_K(expr: sp.Expr, L: int = DEFAULT_L) -> dict[int, int | None]:
    """{K: sign for all beta and p} for every admissible K = 1 .. (L - 4) // 2 (a finite set,
    so a sign that depends on K's range is still decided exactly)."""
    return {k: symbolic_sign(expr, L, k) for k in range(1, (L - 4) // 2 + 1)}


def sign_summary(expr: sp.Expr, L: int = DEFAULT_L) -> str:
    """'+', '-', '0' when one sign holds for every beta, p >= 2 and admissible K (entries that
    vanish only where their column does not exist, e.g. pad at K = (L-4)/2, count as that
    sign), else 'depends'."""
    signs = set(signs_over_K(expr, L).values())
    nonzero = signs - {0}
    if signs == {0}:
        return "0"
    if len(nonzero) == 1 and None not in nonzero:
        return "+" if nonzero == {1} else "-"
    return "depends"
