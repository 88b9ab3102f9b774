"""Numeric checks of the six claims of Theorem C.1 (spec: shared/spec/theorem_c1.md), and what
the checks of every family share (:class:`Point`, :class:`Check`, :func:`compare`; the two-hop
chain's checks are :mod:`theory.hops.claims`).

Each ``claimN`` compares the closed form of :mod:`theory.g1_closed_form` with the exact
numbers of the simulator (``disentangled``: autograd over the enumerated population) at one
configuration and returns a :class:`Check` with the measured values and pass/fail.  Nothing is
tuned: a claim that fails for a configuration is reported as failing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp

from theory.g1_closed_form import entry, entry_key, g1_matrix
from theory.remainder import remainder_bound, remainder_constant
from theory.statement import latex, sign_summary
from theory.symbols import DEFAULT_L, K, a, ab_numeric, attention_weights, b, beta, p, xi

RTOL = 1e-10  # entry-wise relative tolerance
FLOOR = 1e-3  # relative tolerance applies down to FLOOR * max|G1| (absolute floor below)


@dataclass(frozen=True)
class Point:
    """One configuration (p, K, beta, operand order, L) of the 1-var population; with hops = 2,
    of the two-hop chain model (``pointers`` pointer variables, 1-hop share ``share``)."""

    p: int
    K: int
    beta: float
    order: str = "fixed"
    L: int = DEFAULT_L
    hops: int = 1
    pointers: int = 0
    share: float = 1.0

    @classmethod
    def two_hop(cls, p: int, K: int, pointers: int, beta: float, share: float) -> Point:
        """A point of the two-hop chain model (fixed operand order)."""
        return cls(p, K, beta, hops=2, pointers=pointers, share=share)

    def label(self) -> str:
        if self.hops == 2:
            return (
                f"p={self.p}, K={self.K}, pointers={self.pointers}, beta={self.beta:g}, "
                f"s={self.share:g}"
            )
        o = "" if self.order == "fixed" else f", {self.order}"
        return f"p={self.p}, K={self.K}, beta={self.beta:g}{o}"

    def sim_config(self, **over):
        """The simulator's config (``SimConfig``, or ``ChainConfig`` for two hops)."""
        from disentangled.config import ChainConfig, SimConfig

        kw = dict(p=self.p, K=self.K, beta=self.beta, L=self.L, operand_order=self.order)
        if self.hops == 1:
            return SimConfig(**kw, **over)
        kw.update(pointers=self.pointers, hop1_share=self.share)
        return ChainConfig(**{**kw, **over})


def format_value(v) -> str:
    """A measured value as the report's tables show it."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(format_value(x) for x in v) + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {format_value(x)}" for k, x in v.items()) + "}"
    return str(v).replace("|", "\\|")


@dataclass
class Check:
    claim: int
    title: str
    point: str
    passed: bool
    values: dict = field(default_factory=dict)
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    def row(self) -> str:
        """`| config | PASS/FAIL | measured |` (values named grid... left out)."""
        vals = {k: v for k, v in self.values.items() if not k.startswith("grid")}
        meas = "; ".join(f"{format_value(k)} = {format_value(v)}" for k, v in vals.items())
        if self.note:
            meas += f" ({self.note})"
        return f"| {self.point} | {'PASS' if self.passed else 'FAIL'} | {meas} |"


def checks_table(checks: list[Check]) -> list[str]:
    return ["| config | result | measured |", "| --- | --- | --- |"] + [c.row() for c in checks]


def ebar_block(M: np.ndarray, labels: list[str], K_value: int):
    """(B, c_diag, c_off, deviation): the bar_v x bar_v block B of M, its mean diagonal and
    off-diagonal, and max |B - (c_diag I + c_off (11^T - I))|."""
    ix = [labels.index(f"bar_v{u}") for u in range(K_value)]
    B = M[np.ix_(ix, ix)]
    off = ~np.eye(K_value, dtype=bool)
    c_diag, c_off = float(np.mean(np.diag(B))), float(B[off].mean())
    return B, c_diag, c_off, float(np.abs(B - (c_diag * np.eye(K_value) + c_off * off)).max())


# --------------------------------------------------------------------------------------------
# Cached numbers


@lru_cache(maxsize=32)
def closed_g1(pt: Point, kind: str = "1var") -> tuple[list[str], np.ndarray]:
    return g1_matrix(pt.p, pt.K, pt.beta, pt.L, kind, pt.order)


@lru_cache(maxsize=32)
def sim_g1(pt: Point, kind: str = "1var") -> np.ndarray:
    from disentangled.gradient import g1

    return g1(pt.sim_config(), kind).numpy()


@lru_cache(maxsize=64)
def sim_neg_grad(pt: Point, xi_value: float) -> np.ndarray:
    from disentangled.gradient import population_gradient
    from disentangled.model import initial_W

    cfg = pt.sim_config()
    return -population_gradient(initial_W(cfg), cfg, xi_value, "1var").numpy()


def _ix(labels: list[str]) -> dict[str, int]:
    return {lab: i for i, lab in enumerate(labels)}


# --------------------------------------------------------------------------------------------
# The comparison


@dataclass
class Comparison:
    ok: bool
    max_abs_diff: float
    max_rel_diff: float  # over entries with |exact| >= FLOOR * max|exact|
    worst: tuple[str, str]
    n_entries: int


def compare(
    closed: np.ndarray, exact: np.ndarray, labels: list[str], rtol: float = RTOL, floor=FLOOR
) -> Comparison:
    """Entry by entry: |closed - exact| <= rtol * max(|exact|, floor * max|exact|).

    So entries at least floor * max|G1| in size must agree to rtol relative, and smaller ones
    (zeros included) to rtol * floor * max|G1| absolute."""
    scale = float(np.abs(exact).max())
    diff = np.abs(closed - exact)
    allowed = rtol * np.maximum(np.abs(exact), floor * scale)
    excess = diff / allowed
    i, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
    big = np.abs(exact) >= floor * scale
    rel = float((diff[big] / np.abs(exact[big])).max()) if big.any() else 0.0
    return Comparison(
        bool((diff <= allowed).all()), float(diff.max()), rel, (labels[i], labels[j]), diff.size
    )


# --------------------------------------------------------------------------------------------
# Claim 1: -grad L = xi G1 + O(xi^2)


@lru_cache(maxsize=32)
def closed_g2(pt: Point) -> np.ndarray:
    from theory.second_order import g2_matrix

    return g2_matrix(pt.p, pt.K, pt.beta, pt.L, "1var", pt.order)[1]


def claim1(pt: Point, xis: tuple[float, float] = (2e-3, 1e-3)) -> Check:
    """R(xi) = -grad L - xi G1 (closed-form G1) at two small xi: (i) max|R| has log-log slope 2
    and stays below the rigorous bound of :mod:`theory.remainder`; (ii) R/xi^2 tends to the
    derived G2: the Richardson extrapolation 2 R(xi/2)/(xi/2)^2 - R(xi)/xi^2 = G2 + O(xi^2)
    matches G2 entry by entry (rel. 1e-5 down to 1e-2 max|G2|)."""
    labels, G1 = closed_g1(pt)
    G2 = closed_g2(pt)
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    bound = sp.lambdify((a, b, xi), remainder_bound("1var", pt.L).subs(K, pt.K), "math")
    C = float(remainder_constant("1var", pt.L).subs({a: a_v, b: b_v, K: pt.K}))
    x1, x2 = xis
    R = [sim_neg_grad(pt, x) - x * G1 for x in xis]
    Rmax = [float(np.abs(r).max()) for r in R]
    slope = math.log(Rmax[0] / Rmax[1]) / math.log(x1 / x2)
    bounds = [bound(a_v, b_v, x) for x in xis]
    # R/xi^2 = G2 + xi G3 + O(xi^2): eliminate the xi G3 term (for x1 = 2 x2:
    # 2 R(x2)/x2^2 - R(x1)/x1^2)
    r = x1 / x2
    rich = (r * R[1] / x2**2 - R[0] / x1**2) / (r - 1)
    cmp = compare(G2, rich, labels, rtol=1e-5, floor=1e-2)
    raw = float(np.abs(R[1] / x2**2 - G2).max())
    ok = 1.9 <= slope <= 2.1 and all(r <= bd for r, bd in zip(Rmax, bounds, strict=True)) and cmp.ok
    vals = {f"max|R({x:g})|": r for x, r in zip(xis, Rmax, strict=True)}
    vals["log-log slope"] = slope
    vals.update({f"bound({x:g})": bd for x, bd in zip(xis, bounds, strict=True)})
    vals["bound constant 2S^3"] = C
    vals["max|G2| (derived)"] = float(np.abs(G2).max())
    vals[f"max|R({x2:g})/xi^2 - G2|"] = raw
    vals["max|Richardson - G2|"] = cmp.max_abs_diff
    return Check(1, "remainder is xi^2 G2 + O(xi^3)", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# Claim 2: closed form = exact numerics, entry by entry


def claim2(pt: Point, kind: str = "1var") -> Check:
    labels, C = closed_g1(pt, kind)
    E = sim_g1(pt, kind)
    cmp = compare(C, E, labels)
    vals = {
        "entries": cmp.n_entries,
        "max|G1|": float(np.abs(E).max()),
        "max abs diff": cmp.max_abs_diff,
        "max rel diff (entries >= 1e-3 max)": cmp.max_rel_diff,
        "tightest entry": f"({cmp.worst[0]}, {cmp.worst[1]})",
    }
    point = pt.label() + ("" if kind == "1var" else f", {kind} population")
    return Check(2, "closed form = exact gradient", point, cmp.ok, vals)


# --------------------------------------------------------------------------------------------
# Claim 3: the ebar-ebar block


def ebar_coefficients(L: int = DEFAULT_L, order: str = "fixed") -> tuple[sp.Expr, sp.Expr]:
    """(c_diag, c_off) of the bar_v x bar_v block, from the derivation (K = 3 labels suffice)."""
    diag = entry("1var", order, L, *entry_key("bar_v0", "bar_v0", 3, L))
    off = entry("1var", order, L, *entry_key("bar_v0", "bar_v1", 3, L))
    return diag, off


def ratio_limit(L: int = DEFAULT_L) -> tuple[sp.Expr, sp.Expr]:
    """(|c_off| / c_diag as a function of beta, its limit as beta -> oo)."""
    diag, off = ebar_coefficients(L)
    a_b, b_b = attention_weights(L)
    ratio = sp.simplify(-off / diag)
    r_beta = sp.simplify(ratio.subs({a: a_b, b: b_b}))
    return ratio, sp.limit(r_beta, beta, sp.oo)


def claim3(pt: Point) -> Check:
    labels, _ = closed_g1(pt)
    E = sim_g1(pt)
    B, c_diag, c_off, dev = ebar_block(E, labels, pt.K)
    off_mask = ~np.eye(pt.K, dtype=bool)
    diag_e, off_e = ebar_coefficients(pt.L, pt.order)
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    subs = {a: a_v, b: b_v, p: pt.p, K: pt.K}
    cd, co = float(diag_e.subs(subs)), float(off_e.subs(subs))
    ratio, lim = ratio_limit(pt.L)
    a2, b2 = ab_numeric(pt.beta + 2, pt.L)
    r_here = abs(c_off) / c_diag
    r_later = float(ratio.subs({a: a2, b: b2}))
    ok = (
        dev <= RTOL * abs(c_diag)
        and c_diag > 0
        and c_diag >= B.max() - RTOL * abs(c_diag)
        and np.diag(B).min() > B[off_mask].max()
        and abs(cd - c_diag) <= RTOL * abs(c_diag)
        and abs(co - c_off) <= RTOL * max(abs(c_off), FLOOR * abs(c_diag))
        and lim == 0
        and r_later < r_here
    )
    vals = {
        "c_diag": c_diag,
        "c_off": c_off,
        "max deviation from c_diag I + c_off (1 - I)": dev,
        "|c_off|/c_diag": r_here,
        "|c_off|/c_diag at beta+2": r_later,
        "|c_off|/c_diag (closed form)": f"${latex(ratio)}$",
        "limit beta->oo": f"${latex(lim)}$",
        "rank of c_diag among |G1| entries": int((np.abs(E) > c_diag * (1 + 1e-12)).sum()) + 1,
    }
    i, j = np.unravel_index(int(np.argmax(np.abs(E))), E.shape)
    vals["largest |G1| entry"] = f"({labels[i]}, {labels[j]}): {E[i, j]:.4g}"
    return Check(3, "associative memory block", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# Claim 4: attenuation


def variable_positions(pt: Point) -> list[int]:
    """Positions that hold the variable operand: L-2 (fixed), L-3 (swapped), both (mixed)."""
    return {"fixed": [pt.L - 2], "swapped": [pt.L - 3], "mixed": [pt.L - 3, pt.L - 2]}[pt.order]


def claim4(pt: Point) -> Check:
    labels, _ = closed_g1(pt)
    E = sim_g1(pt)
    ix = _ix(labels)
    rows = ["=", f"pos{pt.L - 1}"] + [f"bar_v{u}" for u in range(pt.K)]
    entries = {}
    for j in variable_positions(pt):
        for r in rows:
            entries[(r, f"pos{j}")] = E[ix[r], ix[f"pos{j}"]]
    for u in range(pt.K):
        entries[(f"bar_v{u}", f"v{u}")] = E[ix[f"bar_v{u}"], ix[f"v{u}"]]
    worst = max(entries, key=entries.get)
    num_pos = pt.L - 3 if pt.order == "fixed" else pt.L - 2
    e_num = E[ix["="], ix[f"pos{num_pos}"]]
    e_var = E[ix["="], ix[f"pos{variable_positions(pt)[-1]}"]]
    expr_num = entry("1var", pt.order, pt.L, *entry_key("=", f"pos{num_pos}", pt.K, pt.L))
    vanishes = None
    if pt.order != "mixed":
        vanishes = bool(sp.simplify(expr_num.subs(a, sp.Rational(1, 2))) == 0)
    ok = all(v < 0 for v in entries.values())
    L, kk = pt.L, pt.K
    sym = {
        f"(=, pos{j})": sign_summary(
            entry("1var", pt.order, L, *entry_key("=", f"pos{j}", kk, L)), L
        )
        for j in variable_positions(pt)
    }
    sym["(bar_v_r, v_r)"] = sign_summary(
        entry("1var", pt.order, L, *entry_key("bar_v0", "v0", kk, L)), L
    )
    vals = {
        "entries checked": len(entries),
        "largest (least negative)": f"{worst}: {entries[worst]:.6g}",
        f"(=, pos{variable_positions(pt)[-1]})": float(e_var),
        f"(=, pos{num_pos})": float(e_num),
        f"(=, pos{num_pos}) closed form": f"${latex(expr_num)}$",
    }
    if vanishes is not None:
        vals[f"(=, pos{num_pos}) = 0 at a = 1/2"] = vanishes
    vals["sign for all beta, p, K (symbolic)"] = sym
    note = ""
    if pt.order == "mixed":
        note = "mixed order: both operand positions hold a variable half the time"
    return Check(4, "attenuation entries negative", pt.label(), bool(ok), vals, note)


# --------------------------------------------------------------------------------------------
# Claim 5: assignment-wide entries


def claim5(pt: Point) -> Check:
    """Rows `=`, pos{L-1} and bar_v{r}: against number-slot positions, n{m} and (rows `=`,
    pos{L-1} only: bar_v{r} x bar_v is claim 3's block) bar_v{u}, positive and equal across
    assignments; against the tokens pad, +, v{u}, negative."""
    labels, _ = closed_g1(pt)
    E = sim_g1(pt)
    ix = _ix(labels)
    scale = float(np.abs(E).max())
    groups = {
        "number-slot positions": [f"pos{2 * q + 1}" for q in range(pt.K)],
        "n{m}": [f"n{m}" for m in range(pt.p)],
        "bar_v{u}": [f"bar_v{u}" for u in range(pt.K)],
    }
    negatives = ["pad", "+"] + [f"v{u}" for u in range(pt.K)]
    rows = ["=", f"pos{pt.L - 1}"] + [f"bar_v{u}" for u in range(pt.K)]
    pos_ok, neg_ok, spread = True, True, 0.0
    for r in rows:
        for gname, cols in groups.items():
            if r.startswith("bar_v") and gname == "bar_v{u}":
                continue
            v = np.array([E[ix[r], ix[c]] for c in cols])
            pos_ok &= bool((v > 0).all())
            spread = max(spread, float(v.max() - v.min()))
        neg_ok &= all(E[ix[r], ix[c]] < 0 for c in negatives)
    eq_ok = spread <= RTOL * scale

    # score change per unit eta of a 1-var query (e_= + pi_T + ebar_0) at an assignment number
    def inc(bar):
        cols = ["pos1", "n0", bar]
        return float(sum(E[ix[r], ix[c]] for r in ("=", f"pos{pt.L - 1}", "bar_v0") for c in cols))

    bound, other = inc("bar_v0"), inc("bar_v1")
    vals = {f"(=, {g})": float(E[ix["="], ix[cols[0]]]) for g, cols in groups.items()}
    vals.update({f"(=, {c})": float(E[ix["="], ix[c]]) for c in ("pad", "+", "v0")})
    vals["max spread within a group"] = spread
    vals["score change of the bound number (per eta)"] = bound
    vals["score change of another assignment's number"] = other
    vals["bound / other"] = bound / other
    note = "bar_v x bar_v entries belong to claim 3 (c_off < 0 off the diagonal)"
    return Check(5, "assignment-wide entries", pt.label(), pos_ok and eq_ok and neg_ok, vals, note)


# --------------------------------------------------------------------------------------------
# Claim 6: one step composes


def _accuracy(W, pt: Point, kind: str) -> float:
    from disentangled.metrics import population_accuracy

    return population_accuracy(W, pt.sim_config(), kind)


SOLVED = 1 - 1e-12
KINDS = ("0var", "1var", "2var")


def claim6(
    pt: Point, scales: tuple[float, ...] | None = None, rel_tol: float = 1e-3, kinds=KINDS
) -> Check:
    """W1 = W0 + eta G1 with the closed-form G1 and eta = s / max|G1| for s in `scales`
    (default: the grid of `python -m disentangled step`, s from 1e-2 to 1e3, so that the report
    and that command state the same numbers); predictions by argmax (xi-free).  Passes if W0
    does not solve 2-var and some eta does.  The lowest solving eta is bisected in log eta to a
    relative width `rel_tol` (the command's bisection); the 0-var and 1-var accuracies after
    the step are reported for the kinds listed in `kinds`."""
    import torch

    from disentangled.experiments import default_etas, log_bisect
    from disentangled.model import initial_W

    _, G = closed_g1(pt)
    G1 = torch.tensor(G)
    W0 = initial_W(pt.sim_config())
    gmax = float(np.abs(G).max())
    if scales is None:
        scales = tuple(eta * gmax for eta in default_etas(G1))
    kinds = tuple(sorted(set(kinds) | {"2var"}))

    def accs(s):
        W = W0 + (s / gmax) * G1 if s else W0
        return {k: _accuracy(W, pt, k) for k in kinds}

    before = accs(0.0)
    rows = [(s, accs(s)) for s in scales]
    solved = [r["2var"] >= SOLVED for _, r in rows]
    vals = {f"W0 {k} acc": v for k, v in before.items()}
    vals["max|G1|"] = gmax
    ok = before["2var"] < SOLVED and any(solved)
    if any(solved):
        i = solved.index(True)
        j = i
        while j + 1 < len(rows) and solved[j + 1]:
            j += 1
        lo = rows[i][0]
        if i > 0:
            lo = log_bisect(
                lambda s: accs_2var(W0, G1, s / gmax, pt) >= SOLVED,
                rows[i - 1][0],
                rows[i][0],
                rel_tol,
            )
        hi = f"{rows[j][0] / gmax:.4g}" + (
            f" (fails at {rows[j + 1][0] / gmax:.4g})" if j + 1 < len(rows) else " (grid end)"
        )
        vals["eta range solving 2-var"] = f"[{lo / gmax:.4g}, {hi}]"
        vals["eta*max|G1| range"] = f"[{lo:.4g}, {rows[j][0]:.4g}]"
        vals["2-var solved up to grid end"] = j + 1 == len(rows)
        for k in kinds:
            if k != "2var":
                xs = [rows[m][1][k] for m in range(i, j + 1)]
                vals[f"{k} acc in range (min, max)"] = (round(min(xs), 4), round(max(xs), 4))
                vals[f"{k} acc best over grid"] = round(max(r[k] for _, r in rows), 4)
    vals["grid (eta, accuracies)"] = [
        (float(f"{s / gmax:.6g}"), {k: round(v, 4) for k, v in r.items()}) for s, r in rows
    ]
    return Check(6, "one step composes (2-var solved)", pt.label(), bool(ok), vals)


def accs_2var(W0, G1, eta: float, pt: Point) -> float:
    return _accuracy(W0 + eta * G1, pt, "2var")


ALL_CLAIMS = (claim1, claim2, claim3, claim4, claim5, claim6)
