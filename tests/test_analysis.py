"""Analyses on models whose answers are known: the hand-built reference circuit (every
measure 1), the same circuit with a scrambled part (that measure low), planted Fourier
features, and random weights (values in range, circuit measures low)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from empirical.analysis.attention import attention_examples, attention_summary
from empirical.analysis.authors import AUTHORS_MEASURE_NAMES
from empirical.analysis.common import light_forward, strict_argmax_is
from empirical.analysis.fourier import fit_gromov, fourier_analysis
from empirical.analysis.ov_mlp import (
    isolated_ov_mlp,
    ov2_mlp2_accuracy,
    ov_mlp_cosine,
    same_addition_cosine,
)
from empirical.analysis.probe_data import make_probe_data
from empirical.analysis.probes import answer_probes
from empirical.analysis.progress import (
    ALL_MEASURE_NAMES,
    MEASURE_NAMES,
    crossing_steps,
    progress_measures,
    second_spike_scores,
)
from empirical.analysis.qk import (
    qk1_embedding_scores,
    qk1_positional_preference,
    qk2_ov1_identity,
)
from empirical.analysis.reference import reference_model
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer
from empirical.task.config import task_config
from empirical.task.eval_sets import build_eval_sets

TASK = task_config(p=11, K=3, max_assignments=3, r1=("c",), r2=("b",), eval_size=300)


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
    torch.testing.assert_close(fw.logits, logits[:, -1], atol=1e-5, rtol=1e-5)
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
        acc = (ideal(batch.tokens)[:, -1].argmax(-1) == batch.labels).double().mean().item()
        assert acc == 1.0, name


def test_every_progress_measure_is_one_on_the_reference_circuit(ideal, data):
    values, spike = progress_measures(ideal, data, with_second_spike=True)
    assert set(values) == set(ALL_MEASURE_NAMES)
    for name in MEASURE_NAMES:
        assert values[name] == pytest.approx(1.0), name
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


# -- the authors' definitions (`NAME@authors`) ----------------------------------------------

DETERMINISTIC_AUTHORS = [n for n in AUTHORS_MEASURE_NAMES if not n.startswith("probe")]


def test_authors_batches_are_their_unrestricted_zero_and_one_var_mix(data):
    b = data.authors
    assert (len(b.eval), len(b.train), len(b.test)) == (512, 1024, 256)
    for batch in (b.eval, b.train, b.test):
        assert set(batch.n_vars.tolist()) <= {0, 1}
    one = b.train[b.train.n_vars == 1]
    assert 0.25 < 1 - len(one) / len(b.train) < 0.42  # a third 0-var
    first = torch.bincount(one.operand_vars[:, 0][one.operand_vars[:, 0] >= 0], minlength=3)
    second = torch.bincount(one.operand_vars[:, 1][one.operand_vars[:, 1] >= 0], minlength=3)
    assert (first > 50).all() and (second > 50).all()  # b second, c first: unrestricted


def test_authors_measures_are_one_on_the_reference_circuit(ideal, data):
    values = progress_measures(ideal, data)
    assert set(values) == set(ALL_MEASURE_NAMES)
    for name in DETERMINISTIC_AUTHORS:
        assert values[name] == pytest.approx(1.0), name
    # their probe: 4 Adam steps from a random start cannot fit the one-hot features of the
    # hand-built basis, though the variable is exactly linear there (ours reads it perfectly)
    assert values["probe_l1_var_from_num"] == 1.0
    assert 0.45 < values["probe_l1_var_from_num@authors"] < 0.8


def test_the_authors_probe_is_a_working_probe_with_a_small_budget(ideal, data):
    from empirical.analysis.authors import _probe_features, adam_linear_probe

    fw = light_forward(ideal, torch.cat([data.authors.train.tokens, data.authors.test.tokens]))
    n = len(data.authors.train)
    Xtr, ytr = _probe_features(TASK, data.authors.train, fw.rows(0, n))
    Xte, yte = _probe_features(TASK, data.authors.test, fw.rows(n, n + len(data.authors.test)))
    assert adam_linear_probe(Xtr, ytr, Xte, yte, TASK.K, epochs=300) == 1.0
    assert adam_linear_probe(Xtr, ytr, Xte, yte, TASK.K) < 0.8


def test_every_measure_is_basis_free_on_the_rotated_reference(data):
    model = reference_model(TASK, rotation_seed=0)
    for name, batch in build_eval_sets(TASK, 0).items():
        batch = batch.slice(0, 100)
        acc = (model(batch.tokens)[:, -1].argmax(-1) == batch.labels).double().mean().item()
        assert acc == 1.0, name
    values = progress_measures(model, data)
    for name in MEASURE_NAMES + tuple(DETERMINISTIC_AUTHORS):
        assert values[name] == pytest.approx(1.0), name
    assert values["probe_l1_var_from_num@authors"] > 0.9  # dense features: their probe works


def test_authors_variants_break_where_they_should(data):
    values = progress_measures(reference_model(TASK, shuffle_qk1=True), data)
    # numbers attend to position 0: only t = 1, 2 (where t-1 is the only valid key) count
    assert values["qk1_num_to_prev_var@authors"] == pytest.approx(2 / (TASK.L - 5))
    assert values["attn_l1_num_to_prev@authors"] < 0.25
    assert values["attn_l2_equal_to_values@authors"] < 0.6
    assert values["qk2_ov1_var_identity@authors"] == 1.0
    values = progress_measures(reference_model(TASK, shuffle_qk2=True), data)
    assert values["qk2_ov1_var_identity@authors"] == 0.0
    assert values["attn_l2_equal_to_values@authors"] < 0.6  # 0-var sequences only
    assert values["attn_l1_equal_to_operands@authors"] == 1.0
    model = reference_model(TASK)
    with torch.no_grad():
        model.W_out.copy_(model.W_out[torch.randperm(model.W_out.shape[0])])
    assert progress_measures(model, data)["ov2_mlp2_accuracy@authors"] < 0.3


def test_authors_ov_mlp_has_no_skip_term():
    from empirical.analysis.authors import ov2_mlp2_accuracy_authors

    model = reference_model(TASK)
    with torch.no_grad():  # a skip path that alone answers x + y: ours uses it, theirs not
        model.W_in.zero_()
        model.W_U.zero_()
    assert ov2_mlp2_accuracy_authors(model, TASK) < 0.2
    assert isolated_ov_mlp(model, TASK)["accuracy_mlp_only"] < 0.2


# -- held-out pairs, Figure 6, phase-2 levels, compared steps --------------------------------


def test_isolated_circuit_reads_held_out_pairs_in_the_tables_form(ideal):
    import dataclasses

    held = torch.tensor([[1, 2], [3, 3], [4, 7]])
    ordered = dataclasses.replace(TASK, held_out_form="ordered")
    iso_o = isolated_ov_mlp(ideal, ordered, held_out=held)
    iso_u = isolated_ov_mlp(ideal, TASK, held_out=held)
    assert iso_o["n_held_out_pairs"] == 3  # exactly the table's ordered pairs
    assert iso_u["n_held_out_pairs"] == 5  # both orders of {1, 2}, {4, 7}; {3, 3} once
    model = reference_model(TASK)
    with torch.no_grad():
        model.W_out.copy_(model.W_out[torch.randperm(model.W_out.shape[0])])
    iso = isolated_ov_mlp(model, ordered, held_out=held)
    correct = iso["correct"]
    assert iso["accuracy_held_out_pairs"] == pytest.approx(
        correct[held[:, 0], held[:, 1]].double().mean().item()
    )


def test_figure6_effects_on_a_planted_table():
    from empirical.analysis.qk import figure6_effects

    p, K, L = TASK.p, TASK.K, TASK.L
    V = p + K + 3
    T = torch.zeros(V + L, V + L, dtype=torch.float64)
    T[:p, p : p + K] = 2.0  # numbers -> variables
    T[V : V + L - 4, p : p + K] = 1.0  # positions 0..L-5 -> variables
    T[V:, V:] = torch.arange(L, dtype=torch.float64)[None, :]  # rises with the key position
    eff = figure6_effects(T, TASK)
    assert eff["num_to_var_gap"] == pytest.approx(2.0)
    assert eff["num_top_key_is_var"] == 1.0
    assert eff["pos_to_var_gap"] == pytest.approx(1.0)
    assert eff["pos_top_key_is_var"] == 1.0
    assert eff["pos_pos_rank_corr"] == pytest.approx(1.0)
    assert eff["pos_pos_rising_steps"] == 1.0
    T[V:, V:] = -T[V:, V:]  # falls to the right
    eff = figure6_effects(T, TASK)
    assert eff["pos_pos_rank_corr_region"] == pytest.approx(-1.0)
    assert eff["pos_pos_rising_steps_region"] == 0.0


def test_phase2_levels_between_the_spikes():
    from empirical.analysis.progress import ProgressHistory, phase2_levels
    from empirical.runs.phases import Phases, Rise

    steps = [0, 100, 200, 300, 400, 500]
    history = ProgressHistory(
        steps,
        {
            "attn_l2_equal_to_values": [0.1, 0.5, 0.85, 0.95, 0.9, 1.0],
            "attn_l2_equal_to_values@authors": [0.1, 0.5, 0.9, 1.0, 1.0, 1.0],
        },
        {},
    )
    phases = Phases(
        zero_var_learned_step=0,
        first_spike=Rise(0, 200, 0.5, 200),
        second_spike=Rise(400, 500, 0.1, 500),
        variable_series="",
        restricted_series="",
    )
    levels = phase2_levels(history, phases)
    assert (levels["start"], levels["end"], levels["n_snapshots"]) == (200, 400, 3)
    ours = levels["routing"]["attn_l2_equal_to_values"]
    assert ours["mean"] == pytest.approx(0.9) and (ours["min"], ours["max"]) == (0.85, 0.95)
    assert ours["within_80_99"] and ours["mean_within_80_99"]
    theirs = levels["routing"]["attn_l2_equal_to_values@authors"]
    assert not theirs["within_80_99"] and theirs["max"] == 1.0
    assert phase2_levels(history, None) is None


def test_default_compare_steps_prefers_the_papers_steps_inside_the_spikes():
    from empirical.analysis.options import parse_steps
    from empirical.analysis.spikes import default_compare_steps

    phases = {
        "first_spike": {"start_step": 4501, "end_step": 6001, "jump_start_step": 5301,
                        "jump_end_step": 5401, "gain": 0.4},
        "second_spike": {"start_step": 14301, "end_step": 16201, "jump_start_step": 15101,
                         "jump_end_step": 15201, "gain": 0.25},
    }  # fmt: skip
    paper = [1, 5301, 5401, 14301, 14501, 16001, 16201, 40000]
    assert default_compare_steps(phases, paper) == {
        "first_spike": (5301, 5401),
        "second_spike": (14501, 16001),
    }
    every_500 = list(range(0, 40001, 500))
    assert default_compare_steps(phases, every_500) == {
        "first_spike": (5000, 5500),  # around the largest jump
        "second_spike": (14000, 16500),  # the whole window, without records
    }
    records = [
        {"step": s, "acc": {"1var/var": v, "1var/both": v, "2var/var": v, "2var/both": v}}
        for s, v in ((14301, 0.70), (14801, 0.72), (15001, 0.75), (15301, 0.9), (16201, 0.95))
    ]
    no_paper = [s for s in range(1, 40002, 100) if s != 14501]
    got = default_compare_steps(phases, no_paper, records)
    assert got["second_spike"] == (14801, 16201)  # onset: last before +10% of the gain
    assert default_compare_steps(None, paper) == {"first_spike": None, "second_spike": None}
    assert parse_steps("5301, 5401") == (5301, 5401)
    assert parse_steps("auto") == "auto" and parse_steps("off") is None
    with pytest.raises(ValueError, match="before"):
        parse_steps("20,10")
    with pytest.raises(ValueError, match="two steps"):
        parse_steps("1,2,3")


def test_definition_agreement_reports_where_the_definitions_part():
    from empirical.analysis.progress import ProgressHistory, definition_agreement

    steps = [0, 10, 20, 30]
    ours = [0.1, 0.5, 0.95, 1.0]
    theirs = [0.1, 0.9, 0.95, 1.0]
    h = ProgressHistory(
        steps,
        {"attn_l2_equal_to_values": ours, "attn_l2_equal_to_values@authors": theirs},
        {},
        {
            "attn_l2_equal_to_values": crossing_steps(steps, ours, 0.9),
            "attn_l2_equal_to_values@authors": crossing_steps(steps, theirs, 0.9),
        },
    )
    a = definition_agreement(h)["attn_l2_equal_to_values"]
    assert a["max_abs_diff"] == pytest.approx(0.4) and a["max_at_step"] == 10
    assert a["mean_abs_diff"] == pytest.approx(0.1)
    assert a["share_diff_above_0.05"] == 0.25
    assert a["crossing_ours"]["stable"] == 20 and a["crossing_theirs"]["stable"] == 10


def test_probes_title_states_the_sum_only_where_the_circuit_adds():
    from empirical.analysis.model_analysis import probes_title

    failing = probes_title(0.033, 59, "step 100")
    assert "3.3%" in failing and "not the sum of every pair" in failing
    assert "computes the sum" not in failing
    adding = probes_title(0.998, 59, "final")
    assert "99.8% of all 59x59 pairs" in adding and "not" not in adding
