"""Section "Theorem C.1 per hop" of theory_report.md: the two-hop chain model's statements,
their proofs (derived by the code) and their checks, measured when the report is made.

Claims H1-H6 link to :mod:`theory.hops.claims` (``claim1`` .. ``claim6``) and to the tests of
theory/test_chain.py that run them.
"""

from __future__ import annotations

from theory.claims import Check, Point, checks_table
from theory.claims import format_value as _fmt
from theory.g1_closed_form import attention_chain_rule_lemma
from theory.hops import claims
from theory.hops.last_hop import reduced_memory
from theory.hops.middle_hop import w2_independence_lemma
from theory.statement import latex
from theory.symbols import DEFAULT_L

FULL_POINTS = (Point.two_hop(3, 3, 1, 3.0, 0.5), Point.two_hop(5, 3, 1, 4.0, 0.5))
REDUCTION_POINTS = (Point.two_hop(5, 3, 0, 4.0, 1.0), Point.two_hop(3, 2, 0, 1.0, 1.0))
QUICK_POINTS = (Point.two_hop(3, 2, 1, 2.0, 0.5),)
STEP_GRID = ((0.1, 0.3, 1.0, 1.7, 3.0, 10.0, 30.0), (0.1, 0.3, 1.0, 10.0, 100.0, 1000.0))

TITLES = {
    1: "$G_1^{(3)}$: exact polynomial form in $(a, b)$ = exact gradient (rel. $10^{-10}$)",
    2: "Every hop count 1 (no pointers): $G_1^{(3)}$ is a map of C.1's symbolic $G_1$",
    3: "Memory block $c_d I + c_o(11^\\top - I)$; its contrast on 1-hop and 2-hop data",
    4: "Middle hop at the start: $\\nabla_{W_2} L = 0$ exactly, at every $\\xi$",
    5: "Drive of the middle hop: $G_1^{(2)} = \\eta_3 D + O(\\eta_3^2)$, $D$ derived",
    6: "One step of $W_3$, then one of $W_2$: are all 2-hop sequences solved?",
}
TESTS = {
    1: "test_g3_exact_form_matches_exact_gradient, test_perturbed_g3_form_is_caught",
    2: "test_reduction_to_theorem_c1, test_wrong_reduction_is_caught",
    3: "test_memory_block_and_its_dilution",
    4: "test_w2_gradient_is_exactly_zero_at_w0 (+ slow: lemma control)",
    5: "test_drive_of_the_middle_hop, test_perturbed_drive_formula_is_caught",
    6: "test_one_step_each_search_runs (slow)",
}


def run_checks(quick: bool = False) -> list[Check]:
    pts = QUICK_POINTS if quick else FULL_POINTS
    out = []
    for pt in pts:
        out += [claims.claim1(pt), claims.claim3(pt), claims.claim4(pt), claims.claim5(pt)]
    # the query-term comparison builds exact polynomials: all kinds only at the small point
    for pt in REDUCTION_POINTS[-1:] if quick else REDUCTION_POINTS:
        kinds = ("0var", "1var", "2var") if pt.p == 3 and not quick else ("1var",)
        out.append(claims.claim2(pt, kinds))
    step_pt = pts[0] if quick else pts[-1]
    s3, s2 = ((1.0, 10.0), (1.0, 100.0)) if quick else STEP_GRID
    out.append(claims.claim6(step_pt, s3, s2))
    return sorted(out, key=lambda c: c.claim)


def section(quick: bool = False, L: int = DEFAULT_L) -> list[str]:
    """The markdown lines of the section (statements, proofs, checks)."""
    checks = run_checks(quick)
    diag, off, contrast = reduced_memory(L)
    by = {c.claim: [x for x in checks if x.claim == c.claim] for c in checks}
    n_pass = sum(c.passed for c in checks)
    lines = [
        "",
        "## 6. Theorem C.1 per hop (the two-hop chain model)",
        "",
        "Model of `shared/spec/chain.md` (simulator `disentangled` with `ChainConfig`, "
        "derivations `theory/hops/`): layer 2 moves the query $x_T = e_= + \\pi_T + \\bar e_v$ by "
        "$\\sum_s \\sigma^{(2)}_s W_{OV2} x_s$ ($W_{OV2} e_w = \\bar e_w$ for variable tokens), "
        "layer 3 is C.1's layer on the updated query $x'_T$ (which is also its own key), both "
        "key-query matrices start at $W^0$.  The right-hand side of a pointer `u=w` carries "
        "$e_w + \\pi + \\bar e_u$.  Populations: every pointer set, target, slot order and value "
        "(exact, float64), kinds 0var, 1var-1hop, 1var-2hop, 2var-1hop, 2var-2hop; the training "
        f"mix is a parameter.  Checks: {n_pass}/{len(checks)} pass.",
        "",
    ]
    lines += _h1_h2(L, contrast) + _h3_h4(by) + _h5_h6(L, by)
    lines += ["### Checks (measured when this report was made)"] + _checks_tables(by)
    lines += [
        "",
        f"Reduced memory entries (no pointers, symbolic): $c^{{(3)}}_{{\\mathrm{{diag}}}} = "
        f"{latex(diag)}$, $c^{{(3)}}_{{\\mathrm{{off}}}} = {latex(off)}$.",
    ]
    return lines


def _h1_h2(L: int, contrast) -> list[str]:
    """H1 (the last hop's first-order gradient) and H2 (reduction to Theorem C.1)."""
    T = L - 1
    return [
        "**H1 (the last hop's first-order gradient).**  By the chain rule "
        "(C.1's lemma, and `attention_chain_rule_lemma(self_key=True)`: "
        f"{attention_chain_rule_lemma(2, 2, self_key=True)}) "
        "$G_1^{(3)} = \\mathbb{E}[x'_T r'^\\top]$ with $r' = \\sum_{t<T}\\sigma_t(g_t-\\bar g)x_t "
        "- b\\bar g\\, x'_T$.  At $W^0$ layer 3's scores are C.1's (W_OV2 writes no $e_=$), "
        "so $\\sigma$, $g$, $\\bar g$ are C.1's, and layer 2 writes "
        "$\\Delta = aQ + b(\\mathbf 1_K + \\sum_{\\text{pointers } u}\\bar e_{\\mathrm{tgt}(u)})$ "
        "($Q$ the $\\bar e$ part of $x_T$).  Hence five terms: "
        "$G_1^{(3)} = \\mathbb{E}[x_T r^\\top] + a\\mathbb{E}[Q r^\\top] "
        "+ b\\mathbb{E}[\\mathbf 1_K r^\\top] "
        "+ b\\mathbb{E}[(\\sum_u \\bar e_{\\mathrm{tgt}(u)}) r^\\top] "
        "- b\\,\\mathbb{E}[\\bar g\\, x'_T \\Delta^\\top]$ "
        "(query, operands, left-hand sides, pointer right-hand sides, the query's own key).  "
        "Each is a polynomial of degree $\\le 5$ in $a$ and in $b$, computed exactly "
        "(`hops.last_hop.g3_polynomial`: integer sums at $(a,b) \\in \\{0..5\\}^2$, exact "
        "interpolation, a 37th point checked) for given $(p, K, \\text{pointers})$; "
        "$p$ and $K$ are numbers there, not symbols.",
        "",
        "**H2 (reduction to Theorem C.1).**  With no pointers and one variable operand, "
        "$Q_rQ_c = [r=c]Q_r$ and every $-b\\mathbb{E}[\\bar g \\cdot]$ is read off C.1's column "
        f"$G_1[\\cdot, \\pi_{{{T}}}] = -b\\mathbb{{E}}[\\bar g\\, x_{{T,\\cdot}}]$, so "
        "$G_1^{(3)}$ is an explicit map of C.1's closed form (`hops.last_hop.reduction_to_c1`): "
        f"rows $=, \\pi_{{{T}}}$ are C.1's (plus the own-key term in the $\\bar e$ columns), "
        "row $\\bar e_r$ is $(1+a)G_1[\\bar e_r] + bG_1[=]$ plus the own-key term.  It is not "
        "C.1's $G_1$ (the layer-2 update re-reads the operand and every left-hand side).  "
        "Symbolically (in $a, b, p, K$), the memory block becomes "
        f"$c^{{(3)}}_{{\\mathrm{{diag}}}} - c^{{(3)}}_{{\\mathrm{{off}}}} = {latex(contrast)}$ "
        f"$= (1+a)(c_{{\\mathrm{{diag}}}} - c_{{\\mathrm{{off}}}}) "
        f"+ a(1+a)G_1[\\bar e_v, \\pi_{{{T}}}]$.",
        "",
    ]


def _h3_h4(by: dict) -> list[str]:
    """H3 (the memory on 2-hop data) and H4 (the middle hop at the start)."""
    v3 = by[3][-1].values
    return [
        "**H3 (the memory on 2-hop data).**  The $\\bar e\\bar e$ block of $G_1^{(3)}$ keeps the "
        "form $c_dI + c_o(11^\\top-I)$ (exchangeability), but on 2-hop data its contrast is "
        f"*negative* (measured {_fmt(v3.get('1var-2hop: contrast c_diag - c_off'))} vs "
        f"{_fmt(v3.get('1var-1hop: contrast c_diag - c_off'))} on 1-hop data at "
        f"{by[3][-1].point}): the query carries the pointer's $\\bar e_v$ with weight $1+a$ "
        "but its target's $\\bar e_w$ only with weight $b$ (layer 2's uniform mixture over every "
        "pointer target), so the step ties $\\bar e_v$ to the target's slot $w \\neq v$ "
        "(off-diagonal, averaged over targets) and the true memory $\\bar e_w\\bar e_w^\\top$ "
        "only through the $b$-weighted pointer-RHS term "
        f"(its contrast {_fmt(v3.get('1var-2hop: contrast of pointer_rhs'))}).  Mixed with "
        "1-hop data, 2-hop data dilute and can cancel C.1's memory.",
        "",
        "**H4 (the middle hop at the start).**  Theorem: if $W_3$ has zero rows and columns "
        "on the $\\bar e$ coordinates, the loss does not depend on $W_2$, at every $\\xi$.  "
        "Proof: $x'_T - x_T = \\sum_s \\sigma^{(2)}_s W_{OV2}x_s$ lies in the $\\bar e$ span; "
        "layer 3's scores $x'^\\top_T W_3 x'_t$ read $x'_T$ only through $W_3$'s rows and the "
        "own key only through its columns, both zero there; $F$ reads only number "
        "coordinates, and $\\langle e_m, x'_T - x_T\\rangle = 0$.  So $h$, $F$ and the loss are "
        "constant in $W_2$ (sympy: `w2_independence_lemma` = "
        f"{w2_independence_lemma()}).  $W^0$ is such a $W_3$: the middle hop gets no signal "
        "at any order until layer 3 reads $\\bar e$ (after one step it does: "
        f"{_fmt(by[4][-1].values.get('max|G1^(2)| after a W3 step (eta3 max|G3| = 1)'))}).  "
        "The exact float64 gradient is 0.0, not a small number.",
        "",
    ]


def _h5_h6(L: int, by: dict) -> list[str]:
    """H5 (the drive of the middle hop) and H6 (one step each)."""
    v5 = by[5][-1].values
    v6 = by[6][0].values
    return [
        "**H5 (the drive of the middle hop).**  After $W_3 = W^0 + \\eta_3 G$: "
        "$c = -\\partial \\ell/\\partial x'_T = W_3 r' - b\\bar g W_3^\\top x'_T$, "
        "whose $W^0$ part lies in "
        f"$\\mathrm{{span}}(e_=, \\pi_{{{L - 3}}}, \\pi_{{{L - 2}}}) \\perp \\bar e$; so "
        "$G_1^{(2)} = \\eta_3 D + O(\\eta_3^2)$, $D = \\mathbb{E}[x_T q^\\top]$, "
        "$q = \\sum_s\\sigma^{(2)}_s(k_s - \\bar k)x_s$, $k_s = \\langle \\bar e_{w(s)}, Gr' - "
        "b\\bar g G^\\top x'_T\\rangle$ at variable tokens (`hops.middle_hop.drive_formula`).  "
        "First order in $\\eta_3$ (the remainder halves with $\\eta_3$: ratio "
        f"{_fmt(v5.get('ratio (2 = first-order remainder)'))}).  $D$ is bilinear in (data, $G$), "
        "so with 1-hop share $s$: $D(s) = s^2D_{11} + s(1-s)(D_{12}+D_{21}) + (1-s)^2D_{22}$ "
        "exactly.  Its form is **not** the pointer memory: its largest entries are "
        f"{_fmt(v5.get('largest |D| entry'))} and the own-token entries "
        f"$D[\\bar e_v, e_v]$ (mean {_fmt(v5.get('mean D[bar_v r, v r] (own token)'))}: the "
        "query's $\\bar e_v$ attends to the token $v$, i.e. the left-hand side of `v=.` and the "
        "operand, copying $\\bar e_v$ again), while $D[\\bar e_v, \\bar e_v]$ (the key of `v=w`'s "
        f"right-hand side, and the query's own key) is negative: "
        f"{_fmt(v5.get('mean D[bar_v r, bar_v r] (pointer memory)'))} at $s$ = 0.5, "
        f"{_fmt(v5.get('D(s=0): mean D[bar_v r, bar_v r]'))} at $s=0$, "
        f"{_fmt(v5.get('D(s=1): mean D[bar_v r, bar_v r]'))} at $s=1$.",
        "",
        "**H6 (one step each).**  Grid search over $(\\eta_3, \\eta_2)$ (sizes as "
        "$\\eta\\max|G|$): solving pairs "
        f"{_fmt(v6.get('pairs solving every 2-hop sequence'))}, smallest "
        f"{_fmt(v6.get('smallest solving (eta3, eta2)'))}; best pair "
        f"{_fmt(v6.get('best pair (eta3 max|G3|, eta2 max|G2|)'))} with accuracies "
        f"{_fmt(v6.get('accuracy at the best pair'))}; the $W_3$ step alone there: "
        f"{_fmt(v6.get('accuracy after the W3 step alone (same eta3)'))} (at {by[6][0].point}).  "
        "Over the grid the W2 step adds at most "
        f"{_fmt(v6.get('largest gain of mean 2-hop accuracy from the W2 step'))} to the mean "
        "2-hop accuracy of the W3 step alone, and costs at most (per kind) "
        f"{_fmt(v6.get('largest accuracy loss caused by the W2 step, per kind'))}: "
        "what the middle hop's one step breaks.  The W3 step alone solves every 2-hop "
        "sequence at some eta3 of the grid: "
        f"{_fmt(v6.get('W3 step alone solves every 2-hop sequence at some eta3'))} (with K = 2 "
        "and one pointer there is a single number-bound variable, and attending to every "
        "number slot already resolves the pointer).",
        "",
    ]


def _checks_tables(by: dict) -> list[str]:
    """Per claim: its title, its test and a table of the checks."""
    lines = []
    for c in sorted(by):
        lines += [
            "",
            f"#### H{c}: {TITLES[c]}",
            "",
            f"Tests: `theory/test_chain.py::{TESTS[c]}`",
            "",
        ]
        lines += checks_table(by[c])
    return lines
