"""Theorem C.1 per hop (two-hop chain model): every derived form against the simulator's
exact numbers (theory.hops.claims), at several (p, K, pointers, beta, hop1 share).

Default suite: the smallest configurations that show each property; the sweeps over larger
ones are marked slow.  Each check must be able to fail: see the perturbation tests."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangled.gradient import first_order_gradients, w2_drive
from theory.claims import Point, compare
from theory.g1_closed_form import attention_chain_rule_lemma, g1_matrix
from theory.hops import claims
from theory.hops.claims import point_labels, sim_g3
from theory.hops.last_hop import g3_polynomial, reduction_to_c1
from theory.hops.middle_hop import drive_formula, w2_independence_lemma
from theory.symbols import ab_numeric


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


FAST = [Point.two_hop(3, 2, 1, 2.0, 0.5), Point.two_hop(3, 3, 1, 3.0, 0.25)]
SLOW = [
    Point.two_hop(5, 3, 1, 4.0, 0.5),  # the spec's default
    Point.two_hop(7, 2, 1, 1.0, 0.75),  # p = 7, small beta
    Point.two_hop(3, 4, 2, 3.0, 0.5),  # two pointers
    Point.two_hop(3, 3, 2, 2.0, 0.0),  # 2-hop data only
]


def _ids(points):
    return [pt.label() for pt in points]


@pytest.mark.parametrize("pt", FAST, ids=_ids(FAST))
def test_g3_exact_form_matches_exact_gradient(pt):
    c = claims.claim1(pt)
    assert c.passed, c.values


def test_perturbed_g3_form_is_caught():
    pt = FAST[0]
    poly = g3_polynomial(pt.sim_config(), "1var-2hop")
    exact = sim_g3(pt, "1var-2hop")
    labels = poly.labels
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    good = poly.total(a_v, b_v)
    assert compare(good, exact, list(labels)).ok
    without_self_key = good - poly.term("self_key", a_v, b_v)
    assert not compare(without_self_key, exact, list(labels)).ok
    bad = good.copy()
    i = labels.index("bar_v0")
    bad[i, i] *= 1 + 1e-8
    assert not compare(bad, exact, list(labels)).ok


def test_reduction_to_theorem_c1():
    c = claims.claim2(Point.two_hop(3, 2, 0, 1.0, 1.0), c1_kinds=("1var",))
    assert c.passed, c.values
    # the chain's G1^(3) is not C.1's G1: the reduction map is needed
    assert c.values["1var: max|G1^(3) - G1_C1| / max|G1^(3)|"] > 0.05


def test_wrong_reduction_is_caught():
    pt = Point.two_hop(3, 2, 0, 1.0, 1.0)
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    labels, C = g1_matrix(pt.p, pt.K, pt.beta, pt.L, "1var")
    exact = first_order_gradients(pt.sim_config(pointers=0, hop1_share=1.0), "1var-1hop")[1].numpy()
    assert compare(reduction_to_c1(C, labels, pt.K, pt.L, a_v, b_v), exact, labels).ok
    assert not compare(reduction_to_c1(C, labels, pt.K, pt.L, 0.0, b_v), exact, labels).ok


@pytest.mark.parametrize("pt", FAST[1:], ids=_ids(FAST[1:]))
def test_memory_block_and_its_dilution(pt):
    c = claims.claim3(pt)
    assert c.passed, c.values
    # on 2-hop data (pointers only queried) the memory is inverted: the pointer's ebar_v
    # attracts the other assignments' slots (its target's among them), not its own
    assert c.values["1var-2hop: contrast c_diag - c_off"] < 0


def test_w2_gradient_is_exactly_zero_at_w0():
    c = claims.claim4(FAST[0])
    assert c.passed, c.values
    assert c.values["max|G1^(2)| at W^0"] == 0.0


@pytest.mark.parametrize("pt", FAST, ids=_ids(FAST))
def test_drive_of_the_middle_hop(pt):
    c = claims.claim5(pt)
    assert c.passed, c.values


def test_perturbed_drive_formula_is_caught():
    pt = FAST[0]
    cfg = pt.sim_config()
    G3 = sim_g3(pt)
    exact = w2_drive(cfg, torch.tensor(G3)).numpy()
    labels = point_labels(pt)
    mix = cfg.training_mix()
    formula = sum(w * drive_formula(cfg, G3, k) for k, w in mix.items())
    assert compare(formula, exact, labels).ok
    wrong_g = G3.copy()
    wrong_g[:, :] = G3.T  # G^T in place of G: the query/key roles swapped
    wrong = sum(w * drive_formula(cfg, wrong_g, k) for k, w in mix.items())
    assert not compare(wrong, exact, labels).ok


# --------------------------------------------------------------------------------------------
# Slow sweeps


@pytest.mark.slow
def test_w2_independence_lemma_control():
    assert attention_chain_rule_lemma(2, 2, self_key=True)
    assert w2_independence_lemma() and not w2_independence_lemma(n_pos=1, zero_bar=False)


@pytest.mark.slow
@pytest.mark.parametrize("claim", [claims.claim1, claims.claim3, claims.claim4, claims.claim5])
@pytest.mark.parametrize("pt", SLOW, ids=_ids(SLOW))
def test_claims_sweep(pt, claim):
    c = claim(pt)
    assert c.passed, c.values


@pytest.mark.slow
@pytest.mark.parametrize(
    "pt",
    [
        Point.two_hop(5, 3, 0, 4.0, 1.0),
        Point.two_hop(7, 2, 0, 1.0, 1.0),
        Point.two_hop(3, 4, 0, 3.0, 1.0),
    ],
)
def test_reduction_sweep(pt):
    c = claims.claim2(pt)
    assert c.passed, c.values


@pytest.mark.slow
def test_one_step_each_search_runs():
    c = claims.claim6(Point.two_hop(5, 3, 1, 4.0, 0.5))
    assert c.passed
    assert isinstance(c.values["pairs solving every 2-hop sequence"], int)
    np.testing.assert_array_less(-1, c.values["pairs solving every 2-hop sequence"])
