"""The dynamics ladder (empirical.bridge.ladder_dynamics, `python -m empirical ladder-dynamics`):
the baseline's first SGD update is lr x the simulator's exact population gradient, one step
composes from the simulator's step size, every variant trains exactly its released pieces,
bad inputs are one `error:` line, and a tiny run writes its outputs. Default-suite cases use
p = 3, K = 2 (108-216 sequences a population); the default size is marked slow."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from empirical.__main__ import main as empirical_main
from empirical.bridge.ladder_dynamics.config import RELEASES, DynamicsConfig, TheoremSection
from empirical.bridge.ladder_dynamics.onestep import composing_step, first_update_check
from empirical.bridge.ladder_dynamics.trainer import Context, make_optimizer, train_run
from empirical.bridge.ladder_dynamics.variants import PARAMETERS, ladder_variants
from empirical.bridge.theorem_model.construct import build_theorem_model
from empirical.config.io import ConfigError, load_config

SMALL = TheoremSection(p=3, K=2, beta=2.0, xi=1.0)


def _cfg(**kw) -> DynamicsConfig:
    return DynamicsConfig(**{"theorem": SMALL, **kw})


@pytest.mark.parametrize("xi", [1.0, 3.0])
def test_first_update_is_lr_times_the_exact_population_gradient(xi):
    cfg = _cfg(theorem=dataclasses.replace(SMALL, xi=xi))
    out = first_update_check(cfg)
    assert out["max_abs_update"] > 1e-4
    assert out["max_abs_error_vs_exact_gradient"] < 1e-8
    assert out["max_abs_error_vs_xi_G1_plus_R"] < 1e-8


def test_one_step_composes_from_the_simulators_step_size():
    out = composing_step(_cfg())  # xi = 1: G1's eta* is 62.6 here (docs/theorem_model.md)
    lr = out["lr_simulator"]
    assert lr is not None and out["relative_gap"] <= 1e-3  # transformer = simulator
    assert out["accuracy_at"]["1"] >= 0.99 and out["accuracy_at"]["1.05"] >= 0.99
    assert out["accuracy_at"]["0.95"] < 0.99  # the threshold is sharp
    # the theorem's own prediction, eta*/xi along G1, within 5% of the composing step
    assert out["g1_prediction_gap"] <= 0.05 and out["accuracy_at_g1_prediction"] >= 0.99
    assert out["max_abs_gradient_gap"] < 1e-10


def test_variants_are_the_baseline_each_release_alone_and_cumulative():
    names = [n for n, _ in ladder_variants(list(RELEASES))]
    assert names[0] == "baseline" and names[1 : 1 + len(RELEASES)] == list(RELEASES)
    assert names[-1] == "+".join(RELEASES) and len(names) == 2 * len(RELEASES)
    assert [n for n, _ in ladder_variants([])] == ["baseline"]


@pytest.mark.parametrize("release", ["ov", "mlp", "layer1", "embeddings"])
def test_a_release_trains_exactly_its_pieces(release):
    cfg = _cfg(steps=1, batch_size=0)
    model = build_theorem_model(cfg.theorem.model_config())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = make_optimizer(model, cfg, (release,))
    assert isinstance(opt, torch.optim.SGD)
    logits = model(torch.tensor([[5, 0, 3, 1, 4, 0, 3, 6]]), fast=True)
    (logits[:, 0] - logits[:, 1]).sum().backward()
    opt.step()
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {*PARAMETERS["qk"], *PARAMETERS[release]}
    assert moved <= trainable and "blocks.1.attn.W_K" not in moved


def test_qk_factors_train_w_k_too_and_move_the_score_matrix_as_two_factors():
    """`qk_factors`: W_K trains at W_Q's rate, and one step moves M = W_Q W_K^T to the
    product of the two stepped factors."""
    cfg = _cfg(steps=1, batch_size=0, qk_factors=True)
    model = build_theorem_model(cfg.theorem.model_config())
    opt = make_optimizer(model, cfg, ())
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {
        "blocks.1.attn.W_Q", "blocks.1.attn.W_K"}  # fmt: skip
    assert opt.param_groups[0]["lr"] == cfg.sgd.lr_qk * model.cfg.attn_scale**2
    attn = model.blocks[1].attn
    Q0, K0 = attn.W_Q[0].detach().clone(), attn.W_K[0].detach().clone()
    logits = model(torch.tensor([[5, 0, 3, 1, 4, 0, 3, 6]]), fast=True)
    (logits[:, 0] - logits[:, 1]).sum().backward()
    gQ, gK = attn.W_Q.grad[0].clone(), attn.W_K.grad[0].clone()
    opt.step()
    r = opt.param_groups[0]["lr"]
    M1 = attn.W_Q[0].detach() @ attn.W_K[0].detach().T
    assert torch.allclose(M1, (Q0 - r * gQ) @ (K0 - r * gK).T, atol=1e-12)
    assert not torch.equal(attn.W_K[0].detach(), K0)
    assert DynamicsConfig().qk_factors is False


def test_adamw_release_and_seeds_change_the_run():
    cfg = _cfg(steps=6, batch_size=16, eval_every=3, releases=["adamw"])
    ctx = Context.build(cfg)
    a, b = train_run(ctx, (), 0), train_run(ctx, (), 1)
    assert a.loss != b.loss  # the seed is the minibatch stream
    assert train_run(ctx, (), 0).loss == a.loss  # and it is deterministic
    adam = train_run(ctx, ("adamw",), 0)
    assert adam.eval_steps == [0, 3, 6] and adam.cos_first != a.cos_first


def test_config_file_matches_the_defaults():
    assert load_config(DynamicsConfig, "configs/ladder_dynamics.toml") == DynamicsConfig()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["steps=0"], "steps: must be an integer >= 1"),
        (['releases=["ov","wings"]'], "releases: 'wings' is not one of"),
        (["theorem.K=7"], "theorem.K"),
        (["mix.operand_order=sideways"], "mix.operand_order"),
        (["sgd.lr=-1"], "sgd.lr"),
        (["threshold=1.5"], "threshold"),
        (["stepz=3"], "stepz"),
        (["--config", "no/such.toml"], "no/such.toml"),
    ],
)
def test_bad_inputs_are_one_error_line(args, needle, capsys, tmp_path):
    status = empirical_main(["ladder-dynamics", *args, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert needle in err[0]
    assert not (tmp_path / "o").exists()  # refused before anything is written


def test_out_that_is_a_file_is_refused(capsys, tmp_path):
    blocker = tmp_path / "afile.txt"
    blocker.write_text("x")
    status = empirical_main(["ladder-dynamics", "--out", str(blocker)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "afile.txt" in err[0]


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="adamw.betas"):
        _cfg(adamw=dataclasses.replace(DynamicsConfig().adamw, betas=[0.9]))
    with pytest.raises(ConfigError, match="seeds"):
        _cfg(seeds=[1, 1])


def test_tiny_run_writes_its_outputs(tmp_path, capsys):
    out = tmp_path / "ld"
    args = ["ladder-dynamics", "theorem.p=3", "theorem.K=2", "theorem.beta=2.0",
            "theorem.xi=1.0", "steps=4", "eval_every=2", "batch_size=32", "seeds=[0,1]",
            'releases=["ov","mix"]', "--out", str(out), "--quiet"]  # fmt: skip
    assert empirical_main(args) == 0
    result = json.loads((out / "ladder_dynamics.json").read_text())
    assert [v["variant"] for v in result["variants"]] == ["baseline", "ov", "mix", "ov+mix"]
    assert len(result["runs"]) == 8 and all(r["steps_run"] == 4 for r in result["runs"])
    assert result["one_step"]["first_update"]["max_abs_error_vs_exact_gradient"] < 1e-8
    summary = (out / "summary.md").read_text()
    assert "| ov+mix | ov + mix |" in summary
    assert (out / "ladder_dynamics.png").stat().st_size > 10_000
    assert load_config(DynamicsConfig, out / "config.toml").steps == 4


@pytest.mark.slow
def test_default_size_one_step():
    cfg = DynamicsConfig()  # p = 5, K = 3, beta = 4, xi = 10: the simulator's defaults
    assert first_update_check(cfg)["max_abs_error_vs_exact_gradient"] < 1e-8
    out = composing_step(cfg)
    assert out["relative_gap"] <= 0.05 and out["accuracy_at"]["1"] >= 0.99


def test_task_release_applies_the_authors_rules_to_the_training_data():
    """r1 never first, r2 never second, held-out value pairs: exactly the sequences the rules
    exclude get weight 0, read from the tokens; evaluation stays on the whole population."""
    from empirical.bridge.ladder_dynamics.restrict import held_out_pairs, operand_values

    th = dataclasses.replace(SMALL, operand_order="mixed")
    cfg = _cfg(theorem=th, releases=["mix", "task"], task=dataclasses.replace(
        DynamicsConfig().task, r1=["a"], r2=["b"], held_out_fraction=0.2))  # fmt: skip
    ctx = Context.build(cfg)
    pop, kept = ctx.train_mix, ctx.training_population(("mix", "task"))
    variables, values = operand_values(pop.tokens, 3, 2, 16)
    held = {tuple(x) for x in held_out_pairs(3, 0.2, 0).tolist()}
    assert len(held) == 2  # round(0.2 * 9)
    labels = (values[:, 0] + values[:, 1]) % 3
    assert torch.equal(labels, pop.labels)  # the values read from the tokens are the operands'
    excluded = (variables[:, 0] == 0) | (variables[:, 1] == 1)
    excluded |= torch.tensor([tuple(v) in held for v in values.tolist()])
    assert torch.equal(kept.weights == 0, excluded) and 0 < int(excluded.sum()) < len(pop)
    assert float(kept.weights.sum()) == pytest.approx(1.0)
    assert ctx.training_population(("mix",)) is ctx.train_mix  # without `task`: untouched
    short = Context.build(dataclasses.replace(cfg, steps=2, eval_every=1))
    assert 0 <= train_run(short, ("mix", "task"), seed=0).final["2var_allowed"] <= 1
    assert "2var_allowed" not in train_run(short, ("mix",), seed=0).final


@pytest.mark.parametrize(
    "override, message",
    [
        ('task.r1=["z"]', "task.r1: 'z' is not a variable of K = 3"),
        ("task.held_out_fraction=1.5", "task.held_out_fraction: must be in [0, 1)"),
    ],
)
def test_task_section_bad_values_name_the_field(tmp_path, override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(DynamicsConfig, None, [override])
