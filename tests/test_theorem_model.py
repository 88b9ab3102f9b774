"""Theorem C.1's model as a real AssignAddTransformer (empirical.bridge.theorem_model), float64.

The model's own forward and backward, over the theorem's whole population as token
sequences, against `disentangled` (exact population gradient, dynamics) and `theory`
(closed-form G1). Default-suite cases use p = 3, K = 2 (108-216 sequences a population);
larger ones are marked slow."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from disentangled.experiments import accuracies, dynamics
from disentangled.fast import chunk_forward
from disentangled.gradient import g1, population_gradient, population_loss
from disentangled.model import fourier_mlp, fourier_mlp_weights, initial_W
from disentangled.population import compact_slice, population_size
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.construct import (
    build_theorem_model,
    routing_leak,
    routing_targets,
    theorem_coordinates,
)
from empirical.bridge.theorem_model.gradient import (
    gradient_descent,
    merged_gradient,
    model_g1,
    population_accuracy,
    theorem_gradient,
)
from empirical.bridge.theorem_model.layout import Layout
from empirical.bridge.theorem_model.token_population import augmented_inputs, theorem_population
from empirical.config.io import ConfigError
from empirical.model.batched import BatchedModel
from empirical.model.checkpoint import load_model, save_model
from empirical.model.config import ModelConfig, activation
from empirical.model.transformer import AssignAddTransformer

SMALL = TheoremModelConfig(p=3, K=2, beta=2.0, xi=3.0)


def _cfg(**kw) -> TheoremModelConfig:
    return dataclasses.replace(SMALL, **kw)


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return float((a - b).detach().abs().max())


# -- construction ------------------------------------------------------------------------


def test_fourier_mlp_is_a_quadratic_mlp():
    gen = torch.Generator().manual_seed(0)
    for p in (3, 4, 5, 7):
        h = torch.randn(6, p, generator=gen, dtype=torch.float64)
        A, B = fourier_mlp_weights(p)
        assert A.shape == (p, 4 * p) and B.shape == (4 * p, p)
        assert _maxdiff((h @ A).square() @ B, fourier_mlp(h, p)) < 1e-12


@pytest.mark.parametrize("kind", ["0var", "1var", "2var"])
def test_layer1_writes_exactly_the_augmented_inputs(kind):
    cfg = _cfg(operand_order="mixed")
    model = build_theorem_model(cfg)
    sim = cfg.sim_config()
    n = population_size(sim, kind)
    pop = theorem_population(cfg, kind)
    _, cache = model.run_with_cache(pop.tokens)
    X = augmented_inputs(cfg, kind, 0, n)
    assert (cache["resid_post", 0] - X).abs().max() < 1e-13
    assert routing_leak(cfg) < 1e-13
    # the layer-1 pattern is the routing: weight 1 (or 1/2 + 1/2) on the routed keys
    pattern = cache["pattern", 0][:, 0]
    for t, keys in enumerate(routing_targets(cfg)):
        assert (pattern[:, t, keys].sum(-1) - 1).abs().max() < 1e-15
    # a small routing scale leaks visibly (the check can fail)
    weak = build_theorem_model(dataclasses.replace(cfg, routing_scale=5.0))
    _, cache = weak.run_with_cache(pop.tokens[:20])
    assert (cache["resid_post", 0] - X[:20]).abs().max() > 1e-4


def test_logits_are_xi_F_and_fast_agrees_with_hooked():
    cfg = _cfg(operand_order="mixed", beta=1.5)
    model = build_theorem_model(cfg)
    sim = cfg.sim_config()
    for kind in ("0var", "1var", "2var"):
        pop = theorem_population(cfg, kind)
        chunk = compact_slice(sim, kind, 0, population_size(sim, kind))
        _, F = chunk_forward(initial_W(sim), chunk, sim)
        hooked, cache = model.run_with_cache(pop.tokens)
        fast = model(pop.tokens, fast=True)
        assert _maxdiff(hooked[:, -1], cfg.xi * F) < 1e-12
        assert _maxdiff(fast, hooked[:, -1]) < 1e-12
        # the unembedding reads only F's subspace: the residual's other parts are not read
        lay = Layout(cfg)
        resid = cache["resid_post", 1][:, -1]
        assert resid[:, : lay.f_offset].abs().max() > 0.1
        assert _maxdiff(resid[:, lay.f_offset :] * cfg.xi, hooked[:, -1]) < 1e-13


def test_theorem_model_config_and_act_fn_validation():
    with pytest.raises(ConfigError, match="theorem_model.K"):
        TheoremModelConfig(K=7)
    with pytest.raises(ConfigError, match="theorem_model.xi"):
        TheoremModelConfig(xi=0.0)
    with pytest.raises(ConfigError, match="theorem_model.operand_order"):
        TheoremModelConfig(operand_order="random")
    with pytest.raises(ConfigError, match="theorem_model.routing_scale"):
        TheoremModelConfig(routing_scale=float("inf"))
    with pytest.raises(ConfigError, match="model.act_fn: 'gelu'"):
        ModelConfig(act_fn="gelu")
    assert ModelConfig().act_fn == "relu"
    assert activation("relu") is torch.nn.functional.relu
    # a quadratic MLP squares: same weights, the two activations give different logits
    base = ModelConfig.for_task(5, 2, 16, d_model=16, d_mlp=8, dtype="float64")
    relu = AssignAddTransformer(base, seed=1)
    quad = AssignAddTransformer(dataclasses.replace(base, act_fn="quadratic"), seed=1)
    tokens = torch.randint(0, 10, (4, 16), generator=torch.Generator().manual_seed(0))
    _, cache = quad.run_with_cache(tokens)
    pre, post = cache["pre", 1], cache["post", 1]
    assert _maxdiff(post, pre.square()) == 0
    assert _maxdiff(quad(tokens, fast=True), quad(tokens)[:, -1]) < 1e-12
    assert not torch.allclose(relu(tokens)[:, -1], quad(tokens)[:, -1])
    batched = BatchedModel(quad.cfg, seeds=[1, 2])
    assert (
        _maxdiff(batched.forward_fast(tokens[None].expand(2, -1, -1))[0], quad(tokens)[:, -1])
        < 1e-12
    )


def test_theorem_model_saves_and_loads(tmp_path):
    model = build_theorem_model(SMALL)
    save_model(model, tmp_path / "theorem.pt")
    loaded = load_model(tmp_path / "theorem.pt")
    assert loaded.cfg.act_fn == "quadratic"
    tokens = theorem_population(SMALL, "2var").tokens
    assert _maxdiff(loaded(tokens, fast=True), model(tokens, fast=True)) == 0


# -- gradients ---------------------------------------------------------------------------

CASES = [
    dict(beta=2.0, operand_order="fixed", kind="1var"),
    dict(beta=0.5, operand_order="swapped", kind="1var"),
    dict(beta=3.0, operand_order="mixed", kind="1var"),
    dict(beta=2.0, operand_order="fixed", kind="2var"),
    dict(beta=1.0, operand_order="mixed", kind={"0var": 1.0, "1var": 2.0, "2var": 1.0}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['beta']}-{c['operand_order']}")
def test_merged_qk_gradient_equals_exact_population_gradient(case):
    kind = case["kind"]
    cfg = _cfg(beta=case["beta"], operand_order=case["operand_order"])
    model = build_theorem_model(cfg)
    pop = theorem_population(cfg, kind)
    lay = Layout(cfg)
    sim = cfg.sim_config()
    loss, G = theorem_gradient(model, pop, lay.dim)
    expected = population_gradient(initial_W(sim), sim, cfg.xi, kind)
    assert expected.abs().max() > 1e-3
    assert (G - expected).abs().max() < 1e-10
    assert abs(loss - float(population_loss(initial_W(sim), sim, cfg.xi, kind))) < 1e-12
    assert (model_g1(model, pop, lay.dim) - g1(sim, kind)).abs().max() < 1e-10


def test_merged_gradient_lives_in_the_basis_block_and_paths_agree():
    cfg = _cfg(operand_order="mixed")
    model = build_theorem_model(cfg)
    pop = theorem_population(cfg, "1var")
    dim = Layout(cfg).dim
    _, fast = merged_gradient(model, pop, path="fast")
    _, hooked = merged_gradient(model, pop, path="hooked", chunk_size=50)
    assert (fast - hooked).abs().max() < 1e-13
    assert fast[dim:].abs().max() == 0 and fast[:, dim:].abs().max() == 0


def test_compare_qk_dual_frame_reads_the_theorem_gradient():
    cfg = _cfg(operand_order="mixed")
    model = build_theorem_model(cfg)
    pop = theorem_population(cfg, "1var")
    basis = Layout(cfg).basis
    coords = theorem_coordinates(cfg)
    assert coords.exact
    _, grad_M = merged_gradient(model, pop)
    _, G = theorem_gradient(model, pop, basis.dim)
    rows = [basis.index(r) for r in coords.rows]
    cols = [basis.index(c) for c in coords.cols]
    dual = torch.from_numpy(coords.read(grad_M, "dual"))
    assert _maxdiff(dual, G[rows][:, cols]) < 1e-13
    # raw (= orth here, the labels being orthonormal): the score change of a step, G / s^2
    raw = torch.from_numpy(coords.read(grad_M, "raw")) * coords.scale**2
    assert _maxdiff(raw, G[rows][:, cols]) < 1e-13
    W = torch.from_numpy(coords.project(model.blocks[1].attn.QK.AB[0]))
    assert _maxdiff(W, initial_W(cfg.sim_config())[rows][:, cols]) < 1e-13


def _closed_form(cfg: TheoremModelConfig, kind: str) -> torch.Tensor:
    from theory.g1_closed_form import g1_matrix

    labels, G = g1_matrix(cfg.p, cfg.K, cfg.beta, cfg.L, kind, cfg.operand_order)
    assert labels == Layout(cfg).basis.labels
    return torch.from_numpy(G)


@pytest.mark.parametrize("beta, order", [(2.0, "fixed"), (0.7, "swapped")])
def test_first_order_gradient_equals_closed_form_g1(beta, order):
    cfg = _cfg(beta=beta, operand_order=order)
    model = build_theorem_model(cfg)
    G1 = model_g1(model, theorem_population(cfg, "1var"), Layout(cfg).dim)
    expected = _closed_form(cfg, "1var")
    assert expected.abs().max() > 1e-4
    assert (G1 - expected).abs().max() < 1e-10


def test_gradient_descent_on_layer2_qk_reproduces_disentangled_dynamics():
    cfg = _cfg(xi=10.0)
    lr, steps = 2.0, 3
    model = build_theorem_model(cfg)
    dim = Layout(cfg).dim
    ours = gradient_descent(model, theorem_population(cfg, "1var"), dim, steps, lr)
    sim = dynamics(cfg.sim_config(), steps=steps, lr=lr, xi=cfg.xi, mix="1var")
    theirs = [h["loss"] for h in sim["history"]]
    assert abs(theirs[-1] - theirs[0]) > 1e-3  # the steps do move the loss
    assert max(abs(a - b) for a, b in zip(ours["loss"], theirs, strict=True)) < 1e-8
    # and the model now holds the stepped W: its loss there is the last one
    value, _ = merged_gradient(model, theorem_population(cfg, "1var"), need_grad=False)
    assert abs(value - ours["loss"][-1]) < 1e-12
    assert (ours["W"][-1] - ours["W"][0]).abs().max() > 1e-3


def test_one_step_along_the_models_g1_composes_as_in_the_simulator():
    cfg = _cfg(xi=1.0)  # p = 3, K = 2, beta = 2: the simulator's 2-var threshold is eta 62.6
    dim = Layout(cfg).dim
    G1 = model_g1(build_theorem_model(cfg), theorem_population(cfg, "1var"), dim)
    W0 = initial_W(cfg.sim_config())
    everything = theorem_population(cfg, {"0var": 1, "1var": 1, "2var": 1})
    for eta in (0.0, 50.0, 200.0):
        ours = population_accuracy(build_theorem_model(cfg, W0 + eta * G1), everything)
        theirs = accuracies(W0 + eta * G1, cfg.sim_config())
        assert ours.keys() == theirs.keys()
        assert all(abs(ours[k] - theirs[k]) < 1e-12 for k in ours)
        assert (ours["2var"] > 1 - 1e-12) == (eta == 200.0)


# -- slow: the spec's default size ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("order", ["fixed", "mixed"])
def test_default_size_gradients_match(order):
    cfg = TheoremModelConfig(p=5, K=3, beta=4.0, xi=10.0, operand_order=order)
    model = build_theorem_model(cfg)
    pop = theorem_population(cfg, "1var")
    dim = Layout(cfg).dim
    sim = cfg.sim_config()
    _, G = theorem_gradient(model, pop, dim)
    assert (G - population_gradient(initial_W(sim), sim, cfg.xi, "1var")).abs().max() < 1e-10
    G1 = model_g1(model, pop, dim)
    assert (G1 - _closed_form(cfg, "1var")).abs().max() < 1e-10
    pop2 = theorem_population(cfg, "2var")
    assert (model_g1(model, pop2, dim) - _closed_form(cfg, "2var")).abs().max() < 1e-10


@pytest.mark.slow
def test_default_size_dynamics_match():
    cfg = TheoremModelConfig(p=5, K=3, beta=4.0, xi=10.0)
    steps, lr = 5, 0.2  # python -m disentangled dynamics' defaults, first 5 steps
    model = build_theorem_model(cfg)
    ours = gradient_descent(model, theorem_population(cfg, "1var"), Layout(cfg).dim, steps, lr)
    sim = dynamics(cfg.sim_config(), steps=steps, lr=lr, xi=cfg.xi, mix="1var")
    theirs = [h["loss"] for h in sim["history"]]
    assert max(abs(a - b) for a, b in zip(ours["loss"], theirs, strict=True)) < 1e-8
