"""Exact population loss and gradient: fast path vs dense model, finite differences, and the
small-xi limit -grad L = xi G1 + O(xi^2)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as nnf

from disentangled import (
    Basis,
    SimConfig,
    brute_force_population,
    first_order_term,
    forward,
    g1,
    initial_W,
    population_gradient,
    population_loss,
)
from disentangled.embedding import RandomGeometry, ReadoutOnly
from disentangled.fast import Geometry
from disentangled.metrics import population_stats, unique_argmax_correct


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _random_W(cfg, seed, scale=0.5):
    b = Basis.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    return initial_W(cfg) + scale * torch.randn(b.dim, b.dim, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("order", ["fixed", "mixed"])
@pytest.mark.parametrize("kind", ["0var", "1var", "2var"])
def test_fast_loss_and_gradient_match_dense_brute_force(kind, order):
    cfg = SimConfig(p=3, K=2, operand_order=order, beta=3.0)
    b = Basis.from_config(cfg)
    W = _random_W(cfg, 1)
    xi = 1.7
    ref = brute_force_population(cfg, kind)
    Wd = W.clone().requires_grad_()
    ce = nnf.cross_entropy(forward(Wd, ref.inputs, xi, b), ref.labels, reduction="none")
    dense_loss = (ref.weights * ce).sum()
    (dense_grad,) = torch.autograd.grad(dense_loss, Wd)
    Wf = W.clone().requires_grad_()
    fast_loss = population_loss(Wf, cfg, xi, kind)
    fast_loss.backward()
    assert math.isclose(float(dense_loss.detach()), float(fast_loss.detach()), rel_tol=1e-12)
    torch.testing.assert_close(Wf.grad, dense_grad, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(population_gradient(W, cfg, xi, kind), dense_grad)


def test_gradient_matches_central_finite_differences():
    cfg = SimConfig(p=5, K=2, beta=2.0)
    b = Basis.from_config(cfg)
    W = _random_W(cfg, 7, scale=0.3)
    xi = 1.3
    mix = {"1var": 2.0, "2var": 1.0}
    G = population_gradient(W, cfg, xi, mix)
    entries = [("=", "pos14"), ("bar_v0", "bar_v0"), ("bar_v1", "pos1"), ("pos15", "n3")]
    entries += [("=", "pad"), ("v0", "v1")]  # the last row never occurs in a query: 0
    h = 1e-5
    for r, c in entries:
        E = torch.zeros_like(W)
        E[b.index(r), b.index(c)] = h
        fd = (population_loss(W + E, cfg, xi, mix) - population_loss(W - E, cfg, xi, mix)) / (2 * h)
        assert abs(float(fd) - b.entry(G, r, c)) <= 1e-8 + 1e-6 * abs(float(fd)), (r, c)
    assert b.entry(G, "v0", "v1") == 0.0


@pytest.mark.parametrize("cfg", [SimConfig(), SimConfig(p=7, K=2, beta=3.0)])
def test_g1_is_the_small_xi_limit(cfg):
    """|(-grad L(xi))/xi - G1| shrinks linearly in xi: log-log slope ~ 1."""
    G1 = g1(cfg)
    W0 = initial_W(cfg)
    xis = np.array([0.2, 0.1, 0.05, 0.025, 0.0125])
    res = np.array([float((-population_gradient(W0, cfg, x) / x - G1).abs().max()) for x in xis])
    assert np.all(res > 0) and np.all(np.diff(res) < 0)
    slope = np.polyfit(np.log(xis), np.log(res), 1)[0]
    assert 0.9 < slope < 1.1, slope
    assert res[-1] < 0.05 * float(G1.abs().max())  # xi = 1/80: a few percent
    # first-order term of the loss itself: L(xi) = log p + xi E[mean F - F_y*] + O(xi^2)
    lin = float(first_order_term(W0, cfg))
    for x in (1e-3, 1e-4):
        assert abs((float(population_loss(W0, cfg, x)) - math.log(cfg.p)) / x - lin) < 50 * x


def test_g1_support_and_associative_block():
    """Rows of G1 are query components only; the bar_v block is c_diag I + c_off (1 - I)
    with c_diag > 0 and |c_off|/c_diag decreasing in beta."""
    ratios = []
    for beta in (2.0, 4.0, 6.0):
        cfg = SimConfig(beta=beta)
        b = Basis.from_config(cfg)
        G = g1(cfg)
        rows = {b.labels[i] for i in torch.nonzero(G.abs().sum(1) > 0).flatten().tolist()}
        assert rows == {"=", "pos15", "bar_v0", "bar_v1", "bar_v2"}
        blk = b.block(G, b.labels_of("bar_v"), b.labels_of("bar_v"))
        diag, off = blk.diagonal(), blk[~torch.eye(cfg.K, dtype=torch.bool)]
        torch.testing.assert_close(diag, diag[0].expand(cfg.K))
        torch.testing.assert_close(off, off[0].expand(off.numel()))
        assert diag[0] > 0 and diag[0] > off.abs().max()
        ratios.append(float(off.abs().max() / diag[0]))
        assert b.entry(G, "=", "pos14") < 0
    assert ratios[0] > ratios[1] > ratios[2]


def test_unique_argmax_counts_ties_as_wrong():
    F = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0 - 1e-12, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    y = torch.tensor([0, 0, 0, 1])
    assert unique_argmax_correct(F.double(), y).tolist() == [False, False, True, False]


def test_initial_attention_statistics():
    cfg = SimConfig(p=5, K=3, beta=4.0)
    Z = 2 * math.exp(cfg.beta) + cfg.L - 2
    s1 = population_stats(initial_W(cfg), cfg, "1var")
    assert math.isclose(s1.bound_mass, 1 / Z, rel_tol=1e-12)
    assert math.isclose(s1.operand_number_mass, math.exp(cfg.beta) / Z, rel_tol=1e-12)
    # at W0 a 1-var sequence predicts 2n: right exactly when n = m_v
    assert math.isclose(s1.accuracy, 1 / cfg.p, rel_tol=1e-12)


def test_random_embedding_recomputed_gradient_is_chain_rule():
    """The d x d gradient of the first-order term equals E^T Ghat E (Ghat: gradient in
    W_eff = E W E^T), which experiments.random_embedding uses instead of d x d matrices."""
    cfg = SimConfig(p=3, K=2, beta=2.0)
    geo = RandomGeometry(cfg, d=12, seed=3)

    class Explicit(Geometry):
        readout = geo.readout

        def effective_W(self, W):
            return geo.E @ W @ geo.E.T

    W0 = initial_W(cfg)
    G_d = g1(cfg, W=geo.embed_matrix(W0), geometry=Explicit())
    ghat = g1(cfg, W=geo.effective_W(W0), geometry=ReadoutOnly(geo.readout))
    torch.testing.assert_close(G_d, geo.E.T @ ghat @ geo.E, rtol=1e-9, atol=1e-13)


def test_random_readout_is_unbiased_and_concentrates():
    """Given E, E[R] = (E E^T)[numbers] over W_OV draws; R -> [I 0] as d grows."""
    cfg = SimConfig(p=3, K=2)
    geos = [RandomGeometry(cfg, 64, seed=0, ov_seed=s) for s in range(400)]
    mean_R = torch.stack([g.readout for g in geos]).mean(0)
    assert float((mean_R - geos[0].gram[: cfg.p]).abs().max()) < 0.05
    b = Basis.from_config(cfg)
    target = torch.eye(b.dim, dtype=torch.float64)[: cfg.p]
    err = [float((RandomGeometry(cfg, d, 1).readout - target).abs().max()) for d in (64, 65536)]
    assert err[1] < err[0] / 8
