"""The two-hop chain simulator (the `disentangled` modules with ChainConfig, hops = 2): config,
populations, forward, gradients, experiments and CLI.  Theory-side checks are in
theory/test_chain.py."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch

from disentangled.__main__ import main
from disentangled.basis import Basis
from disentangled.config import CHAIN_KINDS, ChainConfig, ConfigError, SimConfig
from disentangled.experiments import dynamics, one_step_each
from disentangled.fast import chunk_forward, two_hop_forward
from disentangled.gradient import (
    cross_entropy_terms,
    first_order_gradients,
    loss_and_gradients,
    w2_drive,
)
from disentangled.model import dense_forward, initial_W, initial_weights
from disentangled.population import (
    brute_force_population,
    compact_slice,
    population_size,
    to_dense,
    whole_population,
)

SMALL = ChainConfig(p=3, K=2, pointers=1, beta=2.0)
K3 = ChainConfig(p=3, K=3, pointers=1, beta=3.0, operand_order="mixed")


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"pointers": 3}, "pointers"),
        ({"pointers": -1}, "pointers"),
        ({"pointers": 1.0}, "pointers"),
        ({"hop1_share": 1.5}, "hop1_share"),
        ({"hop1_share": "x"}, "hop1_share"),
        ({"mix_1var": -1.0}, "mix_1var"),
        ({"mix_1var": 0.0}, "mix_1var"),
        ({"pointers": 0, "hop1_share": 0.5}, "hop1_share"),
        ({"K": 7}, "K"),
        ({"beta": math.inf}, "beta"),
        ({"operand_order": "up"}, "operand_order"),
    ],
)
def test_bad_config_is_a_config_error_naming_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        ChainConfig(**kw)
    assert e.value.field == field


def test_training_mix():
    cfg = ChainConfig(mix_0var=1.0, mix_1var=1.0, mix_2var=2.0, hop1_share=0.25)
    mix = cfg.training_mix()
    assert mix == pytest.approx(
        {
            "0var": 0.25,
            "1var-1hop": 1 / 16,
            "1var-2hop": 3 / 16,
            "2var-1hop": 0.125,
            "2var-2hop": 0.375,
        }
    )
    assert ChainConfig(hop1_share=1.0).training_mix() == {"1var-1hop": 1.0}


def _rows(X, y):
    return Counter(
        (tuple(x.flatten().nonzero().flatten().tolist()), int(v)) for x, v in zip(X, y, strict=True)
    )


@pytest.mark.parametrize(
    "cfg,kind",
    [(SMALL, k) for k in CHAIN_KINDS]
    + [(ChainConfig(p=3, K=3, pointers=2, L=12), k) for k in CHAIN_KINDS]
    + [(K3, "1var-2hop"), (K3, "2var-2hop")],
)
def test_population_matches_brute_force(cfg, kind):
    chunk = whole_population(cfg, kind)
    ref = brute_force_population(cfg, kind)
    X, y = ref.inputs, ref.labels
    assert len(chunk) == population_size(cfg, kind) == X.shape[0]
    assert math.isclose(float(chunk.weights.sum()), 1.0, rel_tol=1e-12)
    assert math.isclose(float(ref.weights.sum()), 1.0, rel_tol=1e-12)
    assert _rows(to_dense(chunk, cfg), chunk.labels) == _rows(X, y)


def test_pointers_zero_is_c1_population():
    cfg = ChainConfig(p=3, K=3, pointers=0, hop1_share=1.0, operand_order="swapped")
    sim = SimConfig(p=3, K=3, operand_order="swapped")
    for chain_kind, kind in (("0var", "0var"), ("1var-1hop", "1var"), ("2var-1hop", "2var")):
        chunk = whole_population(cfg, chain_kind)
        ref = compact_slice(sim, kind, 0, 10**9)
        assert torch.equal(chunk.tok, ref.tok) and torch.equal(chunk.bars, ref.bars)
        assert torch.equal(chunk.labels, ref.labels) and torch.equal(chunk.bound, ref.bound)
    with pytest.raises(ValueError, match="no 2-hop"):
        whole_population(cfg, "1var-2hop")


def test_pointer_masks():
    chunk = whole_population(K3, "1var-2hop")
    assert torch.all(chunk.pointer_rhs.sum(1) == 1) and torch.all(chunk.bound.sum(1) == 1)
    rhs = chunk.pointer_rhs.nonzero()[:, 1]
    b = Basis(K3.p, K3.K, K3.L)
    tok = chunk.tok[torch.arange(len(chunk)), rhs]
    assert torch.all((tok >= b.v(0)) & (tok < b.v(0) + K3.K))  # a variable token on the RHS


@pytest.mark.parametrize("kind", ["1var-2hop", "2var-2hop", "0var"])
def test_fast_forward_equals_dense(kind):
    b = Basis(K3.p, K3.K, K3.L)
    gen = torch.Generator().manual_seed(1)
    W2 = torch.randn((b.dim, b.dim), generator=gen, dtype=torch.float64)
    W3 = torch.randn((b.dim, b.dim), generator=gen, dtype=torch.float64)
    chunk = whole_population(K3, kind)
    (sigma2, sigma3), x_T, F = dense_forward((W2, W3), to_dense(chunk, K3), b)
    for x, y in zip(two_hop_forward(W2, W3, chunk, K3, b), (sigma2, x_T, sigma3, F), strict=True):
        assert torch.allclose(x, y, rtol=0, atol=1e-12)


def test_gradients_equal_dense_autograd_on_brute_force():
    cfg = SMALL
    b = Basis(cfg.p, cfg.K, cfg.L)
    gen = torch.Generator().manual_seed(2)
    W2 = 0.3 * torch.randn((b.dim, b.dim), generator=gen, dtype=torch.float64)
    W3 = 0.3 * torch.randn((b.dim, b.dim), generator=gen, dtype=torch.float64)
    mix = {"1var-1hop": 0.3, "2var-2hop": 0.7}
    loss, (g2, g3) = loss_and_gradients((W2, W3), cfg, 2.0, mix)
    A2, A3 = W2.clone().requires_grad_(), W3.clone().requires_grad_()
    ref = 0
    for kind, w in mix.items():
        ref_pop = brute_force_population(cfg, kind)
        X, y = ref_pop.inputs, ref_pop.labels
        F = dense_forward((A2, A3), X, b)[2]
        ref = ref + w * cross_entropy_terms(F, y, 2.0).mean()
    r2, r3 = torch.autograd.grad(ref, (A2, A3))
    assert loss == pytest.approx(float(ref.detach()), rel=1e-12)
    assert torch.allclose(g2, r2, atol=1e-13) and torch.allclose(g3, r3, atol=1e-13)


def test_w3_at_w0_makes_the_output_independent_of_w2():
    """At W3 = W^0 the chain's F is C.1's F at W^0 whatever W2 is (pointers = 0)."""
    cfg = ChainConfig(p=3, K=2, pointers=0, hop1_share=1.0)
    b = Basis(3, 2, 16)
    W2 = torch.randn(
        (b.dim, b.dim), generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    _, W3 = initial_weights(cfg)
    chunk = whole_population(cfg, "1var-1hop")
    F = two_hop_forward(W2, W3, chunk, cfg, b)[3]
    ref = chunk_forward(
        initial_W(cfg.sim_config()),
        compact_slice(cfg.sim_config(), "1var", 0, 10**9),
        cfg.sim_config(),
    )[1]
    assert torch.equal(F, ref) or torch.allclose(F, ref, rtol=0, atol=1e-15)


def test_first_order_gradients_and_drive():
    G2, G3 = first_order_gradients(SMALL)
    assert float(G2.abs().max()) == 0.0 and float(G3.abs().max()) > 0
    D = w2_drive(SMALL, G3)
    assert float(D.abs().max()) > 0
    # D is the eta3-derivative: G1^(2)(eta3)/eta3 -> D
    W2, W3 = initial_weights(SMALL)
    eta = 1e-4 / float(G3.abs().max())  # remainder ~ 10 * 1e-4 relative
    G2e, _ = first_order_gradients(SMALL, None, (W2, W3 + eta * G3))
    assert torch.allclose(G2e / eta, D, rtol=0, atol=1e-2 * float(D.abs().max()))


def test_one_step_each_and_dynamics_are_deterministic():
    res = one_step_each(SMALL, [1.0, 3.0], [1.0, 10.0])
    assert len(res["rows"]) == 2 and len(res["rows"][0]["after_both"]) == 2
    assert set(res["before"]) == set(CHAIN_KINDS)
    assert res["smallest"] is None or res["smallest"] in res["solving"]
    r1 = dynamics(SMALL, steps=3, lr=0.5, xi=5.0, train="both")
    r2 = dynamics(SMALL, steps=3, lr=0.5, xi=5.0, train="both")
    assert r1 == r2
    assert r1["history"][-1]["loss"] < r1["history"][0]["loss"]
    only3 = dynamics(SMALL, steps=2, lr=0.5, xi=5.0, train="w3")
    assert all(h["w2_ebar_diag"] == 0.0 for h in only3["history"])
    with pytest.raises(ValueError, match="train"):
        dynamics(SMALL, steps=1, train="w4")


def test_cli_chain_g1_json(capsys):
    args = ["--p", "3", "--K", "2", "--pointers", "1", "--beta", "2"]
    assert main(["chain-g1", *args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    G2, G3 = first_order_gradients(SMALL)
    assert out["G1_W3"] == G3.tolist() and out["G1_W2"] == G2.tolist()
    assert out["basis"] == Basis(3, 2, 16).labels


@pytest.mark.parametrize(
    "argv,start",
    [
        (["chain-g1", "--pointers", "3"], "error: --pointers=3: must be in 0..K-1"),
        (["chain-g1", "--hop1-share", "-0.1"], "error: --hop1-share=-0.1: must be in [0, 1]"),
        (["chain-g1", "--mix", "1var=x"], "error: --mix=1var=x: weight"),
        (["chain-step", "--scales3", "0"], "error: --scales3/--scales2=0.0: must be > 0"),
        (["chain-dynamics", "--out", "x", "--train", "all"], "error: argument --train"),
        (["chain-g1", "--p", "11", "--K", "4"], "error: --p=11 --K=4 --pointers=1: a population"),
    ],
)
def test_cli_chain_bad_values_one_line_exit_2(argv, start, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(start) and err.count("\n") == 1


def test_cli_chain_writes_outputs(tmp_path, capsys):
    args = ["--p", "3", "--K", "2", "--beta", "2"]
    assert (
        main(["chain-step", *args, "--scales3", "1", "--scales2", "1", "--out", str(tmp_path)]) == 0
    )
    assert (tmp_path / "chain_step.md").exists() and (tmp_path / "chain_step.json").exists()
    assert main(["chain-dynamics", *args, "--steps", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "chain_dynamics.png").stat().st_size > 0
