"""Analyses on models whose answers are known: the hand-built reference circuit (every
measure 1), the same circuit with a scrambled part (that measure low), planted Fourier
features, and random weights (values in range, circuit measures low)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from empirical.analysis import (
    MEASURE_NAMES,
    answer_probes,
    crossing_steps,
    fit_gromov,
    fourier_analysis,
    isolated_ov_mlp,
    light_forward,
    make_probe_data,
    ov2_mlp2_accuracy,
    ov_mlp_cosine,
    progress_measures,
    qk1_embedding_scores,
    qk1_positional_preference,
    qk2_ov1_identity,
    reference_model,
    same_addition_cosine,
    second_spike_scores,
)
from empirical.analysis.attention import attention_examples, attention_summary
from empirical.analysis.common import strict_argmax_is
from empirical.model import AssignAddTransformer, ModelConfig
from empirical.task import TaskConfig, build_eval_sets

TASK = TaskConfig(p=11, K=3, max_assignments=3, r1=("c",), r2=("b",), eval_size=300)


@pytest.fixture(scope="module")
def data():
    return make_probe_data(TASK, seed=0, n=768, n_second=512)


@pytest.fixture(scope="module")
def ideal():
    return reference_model(TASK)


def random_model(seed=0, d_model=32):
    cfg = ModelConfig.for_task(TASK.p, TASK.K, TASK.L, d_model=d_model, d_mlp=64)
    return AssignAddTransformer(cfg, seed=seed)


def test_light_forward_matches_the_hooked_forward(data):
    model = random_model(1)
    tokens = data.test.tokens[:64]
    fw = light_forward(model, tokens, chunk=40)  # two chunks
    logits, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(fw.logits, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fw.pattern1, cache["pattern", 0][:, 0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(fw.pattern2, cache["pattern", 1][:, 0, -1], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(fw.resid1, cache["blocks.0.hook_resid_post"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        fw.resid_mid, cache["blocks.1.hook_resid_mid"][:, -1], atol=1e-5, rtol=1e-5
    )


def test_probe_data_is_fixed_and_covers_every_variable_as_second_operand(data):
    again = make_probe_data(TASK, seed=0, n=768, n_second=512)
    assert data.test.equal(again.test) and data.second.equal(again.second)
    assert not torch.equal(data.test.tokens, data.train.tokens)
    counts = torch.bincount(data.test.n_vars, minlength=3)
    assert (counts > 768 / 3 * 0.8).all()
    second = torch.bincount(data.second.operand_vars[:, 1], minlength=TASK.K)
    assert (second > 50).all()  # b included, though training never puts it there


def test_reference_model_solves_every_evaluation_set(ideal):
    for name, batch in build_eval_sets(TASK, 0).items():
        batch = batch.slice(0, 100)
        acc = (ideal(batch.tokens).argmax(-1) == batch.labels).double().mean().item()
        assert acc == 1.0, name


def test_every_progress_measure_is_one_on_the_reference_circuit(ideal, data):
    values, spike = progress_measures(ideal, data, with_second_spike=True)
    assert set(values) == set(MEASURE_NAMES)
    for name, value in values.items():
        assert value == pytest.approx(1.0), name
    for letter in TASK.letters:
        assert spike[letter]["accuracy"] == 1.0
        assert spike[letter]["l1_eq_to_second"] == pytest.approx(0.5, abs=1e-6)
        assert spike[letter]["l2_eq_to_second_value"] >= 0.5 - 1e-6


def test_scrambled_layer2_qk_breaks_identity_and_routing_only(data):
    values = progress_measures(reference_model(TASK, shuffle_qk2=True), data)
    assert values["qk2_ov1_var_identity"] == 0.0
    # only 0-var sequences (a third) are still routed, by position
    assert values["attn_l2_equal_to_values"] < 0.5
    for name in ("ov2_mlp2_accuracy", "qk1_num_to_prev_var", "attn_l1_num_to_prev"):
        assert values[name] == pytest.approx(1.0), name


def test_scrambled_layer1_qk_breaks_the_previous_token_head(data):
    model = reference_model(TASK, shuffle_qk1=True)  # numbers attend to position 0
    values = progress_measures(model, data)
    assert values["qk1_num_to_prev_var"] == 0.0  # scored positions t >= 3: s = 0 != t-1
    assert values["attn_l1_num_to_prev"] < 0.25
    assert values["probe_l1_var_from_num"] < 0.6  # chance is 1/3
    assert values["attn_l2_equal_to_values"] < 0.6
    assert values["qk2_ov1_var_identity"] == 1.0  # the weights of layer 2 are untouched


def test_scrambled_mlp_fails_the_isolated_circuit(ideal):
    model = reference_model(TASK)
    with torch.no_grad():
        model.W_out.copy_(model.W_out[torch.randperm(model.W_out.shape[0])])
    assert ov2_mlp2_accuracy(ideal, TASK) == 1.0
    assert ov2_mlp2_accuracy(model, TASK) < 0.3


def test_section5_numbers_on_the_reference_circuit(ideal, data):
    cos = ov_mlp_cosine(ideal, TASK, data.test)
    for kind in ("0var", "1var", "2var"):
        d = cos["by_kind"][kind]
        assert d["matched"]["mean"] > 0.9
        assert d["shuffled"]["mean"] < 0.4
        assert d["attn_out_matched"]["mean"] == pytest.approx(1.0, abs=1e-6)
    same = same_addition_cosine(ideal, TASK, data.test)
    assert same["matched"]["mean"] > 0.97 > 0.5 > same["mismatched"]["mean"]
    iso = isolated_ov_mlp(ideal, TASK, held_out=torch.tensor([[1, 2], [3, 3]]))
    assert iso["accuracy"] == 1.0 and iso["accuracy_held_out_pairs"] == 1.0
    probes = answer_probes(ideal, TASK, data.train, data.test)
    assert probes["resid_post"]["test_acc"] > 0.97
    assert probes["resid_mid"]["test_acc"] < 0.5  # the sum is not linear in e_x + e_y
    qk1 = qk1_embedding_scores(ideal, TASK)
    assert qk1["eq_top2_positions"] == [13, 14] and qk1["eq_prefers_operand_positions"]
    pref = qk1_positional_preference(ideal, TASK)
    assert pref["fraction"] == 1.0 and pref["fraction_incl_self"] == 1.0
    assert pref["positions_scored"] == list(range(3, TASK.L - 4))
    assert pref["argmax_of_mean"] == [t - 1 for t in pref["positions"]]
    ident = qk2_ov1_identity(ideal, TASK)
    assert ident["identity_score"] == 1.0 and ident["margin_min"] == pytest.approx(40.0)
    summary = attention_summary(ideal, TASK, data.test)
    for kind in ("0var", "1var", "2var"):
        assert summary[kind]["l2_eq_to_value_positions"] == pytest.approx(1.0, abs=1e-6)
        assert summary[kind]["l1_eq_to_operand_positions"] == pytest.approx(1.0, abs=1e-6)
    examples = attention_examples(ideal, TASK, data.test)
    assert [e["kind"] for e in examples] == ["0var", "1var", "2var"]
    for e in examples:
        assert e["prediction"] == e["answer"]
        assert e["pattern"].shape == (2, TASK.L, TASK.L)
        row = e["pattern"][1, -1]
        assert float(row[e["value_positions"]].sum()) == pytest.approx(1.0, abs=1e-6)


def test_fit_gromov_recovers_planted_parameters():
    p, k = 13, 4
    x = np.arange(p)
    w = 2 * math.pi * k / p
    grid = 0.3 + 2.0 * np.cos(w * x + 0.7)[:, None] + 0.5 * np.cos(w * x - 1.1)[None, :]
    noise = np.random.default_rng(0).normal(size=(p, p))
    pre = np.stack([grid, noise], axis=-1)
    fit = fit_gromov(pre)
    assert fit.freq[0] == k and fit.r2[0] == pytest.approx(1.0)
    assert fit.amp_x[0] == pytest.approx(2.0) and fit.amp_y[0] == pytest.approx(0.5)
    assert fit.phase_x[0] == pytest.approx(0.7) and fit.phase_y[0] == pytest.approx(-1.1)
    assert fit.const[0] == pytest.approx(0.3)
    np.testing.assert_allclose(fit.grid(0), grid, atol=1e-9)
    assert fit.r2[1] < 0.5  # noise has no dominant frequency
    assert fit.best_neuron == 0


def test_fourier_analysis_finds_the_planted_frequency():
    model = random_model(2)
    p, k, d = TASK.p, 3, model.cfg.d_model
    w = 2 * math.pi * k / p
    with torch.no_grad():
        model.W_E[:p] = 0
        model.W_E[:p, 0] = torch.cos(w * torch.arange(p))
        model.W_E[:p, 1] = torch.sin(w * torch.arange(p))
        model.blocks[1].attn.W_V[0].copy_(torch.eye(d))
        model.blocks[1].attn.W_O[0].copy_(torch.eye(d))
        phases = torch.rand(model.cfg.d_mlp) * 2 * math.pi
        model.W_in.zero_()
        model.W_in[0] = torch.cos(phases)
        model.W_in[1] = -torch.sin(phases)
    prefix = torch.tensor([p, 1, p + 3 + 2] + [p + 3 + 2] * 9 + [p + 3, 0, 0, p + 4])
    out = fourier_analysis(model, TASK, prefix=prefix)
    fit = out["fit"]
    assert (fit.freq == k).all() and fit.r2.min() > 0.999
    assert out["summary"]["key_frequencies"] == [k]
    assert out["model_pre"].shape == (p, p)
    # the isolated pre-activation is cos(w x + phi) + cos(w y + phi), times 1/2
    n = fit.best_neuron
    assert fit.amp_x[n] == pytest.approx(0.5, rel=1e-4)
    assert fit.amp_y[n] == pytest.approx(0.5, rel=1e-4)


def test_random_model_gives_values_in_range_and_no_circuit(data):
    model = random_model(3)
    values, spike = progress_measures(model, data, with_second_spike=True)
    for name, value in values.items():
        assert 0.0 <= value <= 1.0, name
    assert values["attn_l2_equal_to_values"] < 0.1
    assert values["attn_l1_equal_to_operands"] < 0.1
    assert values["ov2_mlp2_accuracy"] < 0.3
    for d in spike.values():
        assert 0 <= d["l1_eq_to_second"] <= 1 and 0 <= d["l2_eq_to_second_value"] <= 1
    assert set(second_spike_scores(model, TASK, data.second)) == set(TASK.letters)
    four = fourier_analysis(model, TASK)["summary"]
    assert 0 <= four["r2_mean_active"] < 0.9


def test_strict_argmax_counts_ties_as_failures():
    scores = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0], [5.0, 1.0, 0.0]])
    valid = torch.tensor([[True, True, True], [True, True, True], [False, True, True]])
    hit = strict_argmax_is(scores, torch.tensor([0, 1, 1]), valid)
    assert hit.tolist() == [False, True, True]


def test_crossing_steps():
    steps = [0, 10, 20, 30, 40]
    assert crossing_steps(steps, [0.1, 0.95, 0.5, 0.92, 0.99], 0.9) == {
        "threshold": 0.9,
        "first": 10,
        "stable": 30,
    }
    assert crossing_steps(steps, [0.1] * 5, 0.9)["first"] is None
    assert crossing_steps(steps, [0.1, 0.2, 0.3, 0.4, 0.1], 0.9)["stable"] is None
