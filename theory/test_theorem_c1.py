"""Claims 1-6 of Theorem C.1: the closed form against the simulator's exact numbers.

Four configurations for every claim (one with p >= 11, one with K >= 4, one with small beta),
plus the swapped / mixed operand orders and the 0-var / 2-var populations for the entry-wise
agreement.  A wrong closed form must fail the same comparison: see the perturbation tests."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

from theory import claims
from theory.__main__ import main
from theory.claims import Point, closed_g1, compare, sim_g1
from theory.g1_closed_form import entry, entry_key, g1_matrix, query_row_labels
from theory.symbols import DEFAULT_L, K, a, ab_numeric, b, p

POINTS = [
    Point(5, 3, 4.0),  # the spec's default
    Point(11, 2, 2.0),  # p >= 11
    Point(3, 4, 3.0),  # K >= 4
    Point(7, 2, 1.0),  # small beta
]
IDS = [pt.label() for pt in POINTS]


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_claim1_remainder_is_second_order(pt):
    c = claims.claim1(pt)
    assert c.passed, c.values
    assert 1.99 < c.values["log-log slope"] < 2.01
    assert c.values["max|R(0.001)|"] <= c.values["bound(0.001)"]


def test_perturbed_second_order_term_is_caught():
    pt = POINTS[0]
    labels, G1 = closed_g1(pt)
    G2 = claims.closed_g2(pt)
    x1, x2 = 2e-3, 1e-3
    R1 = claims.sim_neg_grad(pt, x1) - x1 * G1
    R2 = claims.sim_neg_grad(pt, x2) - x2 * G1
    rich = 2 * R2 / x2**2 - R1 / x1**2
    assert compare(G2, rich, labels, rtol=1e-5, floor=1e-2).ok
    bad = G2.copy()
    i = labels.index("bar_v0")
    bad[i, i] *= 1 + 1e-3
    assert not compare(bad, rich, labels, rtol=1e-5, floor=1e-2).ok


@pytest.mark.parametrize(
    "pt,kind",
    [(pt, "1var") for pt in POINTS]
    + [
        (Point(5, 2, 3.0, "swapped"), "1var"),
        (Point(3, 3, 1.5, "mixed"), "1var"),
        (Point(5, 3, 4.0), "0var"),
        (Point(5, 3, 4.0), "2var"),
        (Point(3, 2, 2.0), "2var"),
        (Point(5, 2, 2.0, L=12), "1var"),  # another sequence length
    ],
    ids=lambda x: x.label() if isinstance(x, Point) else x,
)
def test_claim2_closed_form_equals_exact_gradient(pt, kind):
    c = claims.claim2(pt, kind)
    assert c.passed, c.values
    labels, C = closed_g1(pt, kind)
    from disentangled.basis import Basis

    assert labels == Basis.from_config(pt.sim_config()).labels


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_claim3_associative_memory_block(pt):
    c = claims.claim3(pt)
    assert c.passed, c.values
    assert c.values["|c_off|/c_diag at beta+2"] < c.values["|c_off|/c_diag"]


@pytest.mark.parametrize("pt", POINTS + [Point(5, 2, 3.0, "swapped")], ids=lambda x: x.label())
def test_claim4_attenuation_negative(pt):
    c = claims.claim4(pt)
    assert c.passed, c.values


def test_claim4_mixed_order_sign_flips_at_a_quarter():
    """Mixed order: both operand entries equal -ab(4a-1)(1-1/p) (derived); negative only for
    a > 1/4.  The simulator agrees on both sides of beta = ln 7."""
    L = DEFAULT_L
    expr = entry("1var", "mixed", L, *entry_key("=", f"pos{L - 2}", 3, L))
    assert sp.simplify(expr + a * b * (4 * a - 1) * (p - 1) / p) == 0
    low, high = Point(3, 3, 1.5, "mixed"), Point(3, 3, 3.0, "mixed")
    assert ab_numeric(1.5)[0] < 0.25 < ab_numeric(3.0)[0]
    assert not claims.claim4(low).passed
    assert claims.claim4(high).passed


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_claim5_assignment_wide_entries(pt):
    c = claims.claim5(pt)
    assert c.passed, c.values
    assert c.values["bound / other"] > 1


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_claim6_one_step_solves_two_var(pt):
    kinds = ("0var", "1var", "2var") if pt == POINTS[3] else ("2var",)
    c = claims.claim6(pt, scales=(0.1, 10.0, 1e3), rel_tol=0.3, kinds=kinds)
    assert c.passed, c.values
    assert c.values["W0 2var acc"] < 1
    if pt == POINTS[3]:
        assert "0var acc in range (min, max)" in c.values


# ----------------------------------------------------------------------------- wrong forms


def _classes(pt: Point):
    """{entry key: [(i, j), ...]} over the query rows."""
    labels, _ = closed_g1(pt)
    out: dict = {}
    for i, rl in enumerate(labels):
        if rl not in query_row_labels(labels, pt.L):
            continue
        for j, cl in enumerate(labels):
            out.setdefault(entry_key(rl, cl, pt.K, pt.L), []).append((i, j))
    return out


def test_perturbed_diagonal_coefficient_is_caught():
    pt = POINTS[0]
    labels, C = closed_g1(pt)
    E = sim_g1(pt)
    assert compare(C, E, labels).ok
    bad = C.copy()
    for u in range(pt.K):
        i = labels.index(f"bar_v{u}")
        bad[i, i] *= 1 + 1e-6
    assert not compare(bad, E, labels).ok


@pytest.mark.parametrize("pt", [POINTS[0], POINTS[2]], ids=lambda x: x.label())
def test_every_dropped_term_is_caught(pt):
    """For every entry class, dropping any one monomial of its expanded closed form makes the
    comparison with the exact gradient fail."""
    labels, C = closed_g1(pt)
    E = sim_g1(pt)
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    subs = {a: a_v, b: b_v, p: pt.p, K: pt.K}
    n_checked = 0
    for key, cells in _classes(pt).items():
        expr = sp.expand(entry("1var", pt.order, pt.L, *key))
        for term in sp.Add.make_args(expr):
            if expr == 0:
                continue
            bad = C.copy()
            value = float((expr - term).subs(subs))
            for i, j in cells:
                bad[i, j] = value
            assert not compare(bad, E, labels).ok, (key, term)
            n_checked += 1
    assert n_checked > 50


@pytest.mark.parametrize("site", ["query", "pad", "assignment variable"])
def test_derivation_missing_a_site_is_caught(site):
    """A derivation that forgets one kind of key (e.g. that the query attends to itself)."""
    pt = POINTS[0]
    labels, bad = g1_matrix(pt.p, pt.K, pt.beta, drop_site=site)
    assert not compare(bad, sim_g1(pt), labels).ok


# ----------------------------------------------------------------------------- CLI and report


def test_cli_json_matches_simulator(capsys):
    # in this process (`python -m theory` as a process: the theory cases of
    # tests/test_bad_inputs.py)
    assert main(["g1", "--p", "5", "--K", "3", "--beta", "4", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"basis", "G1"}
    pt = POINTS[0]
    from disentangled.basis import Basis

    assert data["basis"] == Basis.from_config(pt.sim_config()).labels
    assert compare(np.array(data["G1"]), sim_g1(pt), data["basis"]).ok


@pytest.mark.parametrize(
    "argv",
    [
        ["g1", "--K", "9"],
        ["g1", "--p", "x"],
        ["g1", "--p", "1"],
        ["g1", "--beta", "nan"],
        ["g1", "--kind", "3var"],
        ["g1", "--format", "xml"],
        ["g1", "--top", "0"],
        ["frobnicate"],
        [],
    ],
)
def test_cli_bad_args_one_line_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]


def test_cli_table(capsys):
    assert main(["g1", "--p", "5", "--K", "3", "--beta", "4", "--top", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 7 and lines[2].split()[:2] == ["=", "pos14"]  # attenuation is largest
    values = [abs(float(line.split()[-1])) for line in lines[2:]]
    assert values == sorted(values, reverse=True)


@pytest.mark.slow  # 8-12 s on 2 cores; the full report: tests/test_theory_report.py (slow)
def test_report_quick(tmp_path):
    out = tmp_path / "theory_report.md"
    assert main(["report", "--quick", "--out", str(out)]) == 0
    text = out.read_text()
    for needle in ("Theorem C.1", "c_{\\mathrm{diag}}", "| PASS |", "Claim 6", "\\gamma"):
        assert needle in text
