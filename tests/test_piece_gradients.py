"""Every piece's gradient (issue 36, item 1): the simulator with every piece free
(`disentangled.pieces`) against the theorem's model as our transformer
(`empirical.bridge.theorem_model.pieces`, autograd of its own forward), at W^0 and along the
dynamics ladder's baseline, on the same whole population."""

from __future__ import annotations

import pytest
import torch

from disentangled.basis import Basis
from disentangled.config import SimConfig
from disentangled.fast import chunk_forward
from disentangled.gradient import g1, population_gradient
from disentangled.model import initial_W
from disentangled.pieces import (
    forward,
    layer1_output,
    piece_g1,
    piece_gradients,
    theorem_pieces,
)
from disentangled.population import iter_compact, to_dense
from empirical.bridge.ladder_dynamics.config import DynamicsConfig
from empirical.bridge.ladder_dynamics.trainer import _batch, make_optimizer
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.construct import build_theorem_model
from empirical.bridge.theorem_model.pieces import (
    compare_pieces,
    layer1_mask,
    model_piece_gradients,
    model_pieces,
)
from empirical.bridge.theorem_model.token_population import theorem_population

SIM = SimConfig(p=3, K=2, beta=2.0)
CFG = TheoremModelConfig(p=3, K=2, beta=2.0, xi=3.0)
TOL = 1e-10  # relative to the piece's largest entry


def test_the_pieces_at_the_start_are_the_simulators_model():
    pieces = theorem_pieces(SIM, 3.0)
    chunk = next(iter(iter_compact(SIM, "1var", 4096)))
    x1 = layer1_output(pieces, chunk.tok)
    dim = Basis.from_config(SIM).dim
    assert float((x1[..., :dim] - to_dense(chunk, SIM)).abs().max()) < 1e-13  # eq. (1)
    assert float(x1[..., dim:].abs().max()) == 0.0
    _, F = chunk_forward(initial_W(SIM), chunk, SIM)
    assert float((forward(pieces, chunk.tok) - 3.0 * F).abs().max()) < 1e-12


@pytest.mark.parametrize("kind", ["1var", "2var"])
def test_qk2s_gradient_is_the_simulators(kind):
    dim = Basis.from_config(SIM).dim
    G = piece_g1(SIM, kind, xi=3.0)
    assert float((G["qk2"][:dim, :dim] - g1(SIM, kind)).abs().max()) < 1e-13
    assert float(G["qk2"][dim:].abs().max()) == 0.0 and float(G["qk2"][:, dim:].abs().max()) == 0
    _, ce = piece_gradients(SIM, kind, loss="ce", xi=3.0)
    exact = population_gradient(initial_W(SIM), SIM, 3.0, kind)
    assert float((ce["qk2"][:dim, :dim] - exact).abs().max()) < 1e-12


def test_layer1s_score_matrix_gets_no_gradient_at_the_start():
    """Layer 1 acts on the loss only through the ebar it writes, which W^0 does not read:
    its score matrix's gradient is exactly 0 at W^0 (both losses), not only small."""
    for loss in ("first_order", "ce"):
        _, G = piece_gradients(SIM, "1var", loss=loss, xi=3.0)
        assert float(G["qk1"].abs().max()) == 0.0
        assert float(G["ov1"].abs().max()) > 0


def _agreement(model, loss):
    pop = theorem_population(CFG, "1var")
    value, G = model_piece_gradients(model, CFG, pop, loss)
    sim_value, S = piece_gradients(SIM, "1var", model_pieces(model, CFG), loss, CFG.xi,
                                   allowed=layer1_mask(CFG))  # fmt: skip
    assert abs(value - sim_value) < 1e-12
    return compare_pieces(G, S)


@pytest.mark.parametrize("loss", ["first_order", "ce"])
def test_transformer_equals_simulator_at_the_start(loss):
    model = build_theorem_model(CFG)
    assert all(
        float((a - b).abs().max()) == 0.0
        for a, b in zip(model_pieces(model, CFG).as_dict().values(),
                        theorem_pieces(SIM, CFG.xi).as_dict().values(), strict=True)
    )  # fmt: skip
    for name, c in _agreement(model, loss).items():
        assert c["relative"] < TOL, (name, c)


def test_transformer_equals_simulator_along_the_baseline():
    """Three steps of the dynamics ladder's baseline (its optimiser, its minibatches): at
    every state every piece's gradient agrees, and after the first step layer 1's score
    matrix has one (W now reads ebar)."""
    cfg = DynamicsConfig(theorem={"p": 3, "K": 2, "beta": 2.0, "xi": 3.0}, seeds=[0],
                         releases=[])  # fmt: skip
    model = build_theorem_model(CFG)
    opt = make_optimizer(model, cfg, ())
    pop, gen = theorem_population(CFG, "1var"), torch.Generator().manual_seed(0)
    for step in range(4):
        for loss in ("first_order", "ce"):
            for name, c in _agreement(model, loss).items():
                assert c["relative"] < TOL, (step, loss, name, c)
        if step:
            assert _agreement(model, "ce")["qk1"]["max_abs"] > 0
        tokens, labels, w = _batch(pop, 64, gen)
        logits = model(tokens, fast=True)
        per_seq = torch.logsumexp(logits, -1) - logits.gather(1, labels[:, None])[:, 0]
        opt.zero_grad(set_to_none=True)
        (per_seq * w).sum().backward()
        opt.step()


def test_a_wrong_piece_is_caught():
    model = build_theorem_model(CFG)
    pop = theorem_population(CFG, "1var")
    _, G = model_piece_gradients(model, CFG, pop, "ce")
    pieces = model_pieces(model, CFG)
    pieces.ov1[0, 0] += 1e-6  # a number writing itself a little into layer 1's output
    _, S = piece_gradients(SIM, "1var", pieces, "ce", CFG.xi, allowed=layer1_mask(CFG))
    assert max(c["relative"] for c in compare_pieces(G, S).values()) > TOL
