"""chain-compare-qk: the two-hop model's coordinates in a chain checkpoint, the theory on the
run's sequences, and the command (docs/compare_qk.md, "Deeper models (chain runs)")."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch


def _chain_model(d_model: int = 128, n_layers: int = 3):
    from empirical.model.transformer import AssignAddTransformer
    from empirical.runs.config import load_run_config
    from empirical.task.registry import family_of

    cfg = load_run_config(
        "configs/chain.toml", [f"model.d_model={d_model}", f"model.n_layers={n_layers}"]
    )
    vocab = family_of(cfg.task).vocabulary(cfg.task)
    return AssignAddTransformer(cfg.built_model_config(), seed=3), vocab


@pytest.mark.parametrize("hop", ["last", "middle"])
def test_a_label_space_matrix_goes_through_the_models_vectors_and_back(hop):
    from empirical.bridge.compare_qk.metrics import cosine
    from empirical.studies.chain.analysis.qk_coords import hop_blocks, layer_coordinates

    model, vocab = _chain_model()
    b = hop_blocks(model.cfg.n_layers)[hop]
    c = layer_coordinates(model, vocab, b["block"], b["query_ov"])
    assert c.exact  # 90 key labels in 128 dimensions
    G = np.random.default_rng(0).normal(size=(len(c.rows), len(c.cols)))
    back = c.dual().project(c.gradient_of(G))
    assert cosine(back, G) == pytest.approx(1.0, abs=1e-9)
    assert np.allclose(back, G, atol=1e-6 * np.abs(G).max())


def test_the_map_reads_each_hop_through_the_construction_s_ovs():
    from empirical.studies.chain.analysis.qk_coords import hop_blocks, layer_coordinates, ov_image

    model, vocab = _chain_model(d_model=32, n_layers=4)
    blocks = hop_blocks(4)
    assert blocks == {"last": {"block": 3, "query_ov": 2}, "middle": {"block": 2, "query_ov": 0}}
    c = layer_coordinates(model, vocab, 3, 2)
    K = vocab.K
    assert torch.allclose(c.Q[2:], ov_image(model, vocab.p, K, 2))
    assert torch.allclose(c.K[-K:], ov_image(model, vocab.p, K, 0))
    with pytest.raises(ValueError, match=">= 3 layers"):
        hop_blocks(2)


def test_chain_chunk_puts_ebar_on_right_hand_sides_and_the_query():
    from disentangled.basis import Basis
    from empirical.studies.chain.analysis.qk_coords import chain_chunk

    _, vocab = _chain_model(d_model=16)
    tokens = vocab.encode("a=7,c=a,c+30=?")[None]
    chunk = chain_chunk(tokens, torch.tensor([37]), vocab)
    basis, L = Basis(vocab.p, vocab.K, vocab.L), vocab.L
    assigns, a_op, b_op = vocab._parse_ids(tokens[0])
    marked = {
        int(t): int(chunk.bars[0, t, 0]) for t in range(L - 1) if chunk.bars[0, t, 0] < basis.dim
    }
    assert marked == {lhs + 1: basis.bar_v(var) for var, _, lhs in assigns}
    assert (a_op, b_op) == (vocab.p + 2, 30)  # c + 30: the variable first, then the number
    assert (
        int(chunk.bars[0, L - 1, 0]) == basis.bar_v(2) and int(chunk.bars[0, L - 1, 1]) == basis.dim
    )
    assert int(chunk.tok[0, L - 1]) == basis.eq and int(chunk.tok[0, L - 4]) == basis.plus
    assert float(chunk.weights.sum()) == pytest.approx(1.0)


def test_the_prediction_is_the_simulator_s_g1_and_drive_on_an_enumerated_population():
    from disentangled.basis import Basis
    from disentangled.config import ChainConfig
    from disentangled.gradient import first_order_gradients as chain_g1
    from disentangled.gradient import training_mixture as chain_mixture
    from disentangled.gradient import w2_drive
    from disentangled.population import whole_population as chain_population
    from empirical.studies.chain.analysis.qk_coords import label_block
    from empirical.studies.chain.analysis.qk_theory import chain_prediction

    cfg = ChainConfig(p=5, K=3, L=16, pointers=1, beta=2.0)
    chunks = []
    for kind, w in chain_mixture(cfg):
        c = chain_population(cfg, kind)
        chunks.append(dataclasses.replace(c, weights=c.weights * w))
    pred = chain_prediction(chunks, 5, 3, 16, 2.0, 2.0)
    G2, G3 = chain_g1(cfg)
    D = w2_drive(cfg, G3)
    basis = Basis(5, 3, 16)
    assert np.allclose(label_block(G3, basis, 16).numpy(), pred.G3, atol=1e-13)
    assert np.allclose(label_block(D, basis, 16).numpy(), pred.D, atol=1e-15)
    assert float(torch.tensor(pred.G3).norm()) == pytest.approx(float(G3.norm()), rel=1e-12)
    assert float(torch.tensor(pred.D).norm()) == pytest.approx(float(D.norm()), rel=1e-12)
    assert float(D.norm()) > 0 and pred.G2_norm == 0.0 == float(G2.norm())


def test_order_test_and_maxima_read_the_formation_steps():
    from empirical.studies.chain.analysis.qk_compare import maxima, order_test

    snaps = [
        {"step": s, "middle_gradient": {"all": g, "barv_barv": g / 10, "relative": g}}
        for s, g in ((0, 1.0), (1, 1.0), (2, 4.0), (3, 4.0), (4, 9.0))
    ]
    form = {
        "attention": {"last": {"step": 2}, "middle": {"step": 3}},
        "memory": {"last": {"step": 2}, "middle": {"step": 2}},
    }
    o = order_test(snaps, form)
    assert o["verdict"] == "confirmed" and o["memory_verdict"].startswith("not resolved")
    assert o["middle_gradient"]["all"] == {
        "before": 1.0,
        "after": 4.0,
        "n_before": 2,
        "n_after": 2,
        "ratio": 4.0,
    }
    form["attention"]["middle"]["step"] = 1
    assert order_test(snaps, form)["verdict"] == "refuted"
    cos = {"cos": 0.5, "null_iso95": 0.1, "null_sign95": 0.2, "entries": 4}
    w = [
        {
            "start": 0,
            "end": 1,
            "last": {"cos": {s: cos for s in ("all", "barv_barv", "barv_v")}},
            "middle": {
                "cos": {s: {**cos, "cos": float("nan")} for s in ("all", "barv_barv", "barv_v")}
            },
        }
    ]
    m = maxima(w)
    assert m["last"]["all"]["chosen_from"] == 1 and m["middle"]["all"] is None
    assert (
        m["last"]["all"]["windows_above_sign_null"] == 1 and m["last"]["all"]["null_iso95"] == 0.1
    )


def _fake_run(tmp_path, name, overrides, snapshots=0, config="configs/chain.toml"):
    from empirical.config.io import save_config
    from empirical.runs.config import load_run_config

    run = tmp_path / name
    run.mkdir()
    save_config(load_run_config(config, overrides), run / "config.toml")
    if snapshots:
        (run / "snapshots").mkdir()
        for s in range(snapshots):
            (run / "snapshots" / f"step_{s:06d}.pt").write_bytes(b"")
    return run


def test_the_command_refuses_bad_runs_with_one_error_line(tmp_path, capsys):
    from empirical.__main__ import main

    runs = [
        _fake_run(tmp_path, "other", ["model.n_layers=3"], 2, "configs/paper.toml"),
        _fake_run(tmp_path, "two_layers", ["model.n_layers=2"], 2),
        _fake_run(tmp_path, "no_snapshots", [], 0),
    ]
    for run in runs:
        assert main(["chain-compare-qk", str(run)]) == 2
    assert main(["chain-compare-qk", str(tmp_path / "missing")]) == 2
    assert main(["chain-compare-qk", str(runs[1]), "--n", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5 and all(line.startswith("error: ") for line in err)
    assert "chain runs" in err[0] and ">= 3 layers" in err[1] and "snapshot" in err[2]


@pytest.mark.slow  # trains the tiny chain run (session fixture), then reads its snapshots
def test_the_command_on_a_tiny_chain_run(tiny_chain_run, tmp_path, capsys):
    from empirical.__main__ import main

    out = tmp_path / "out"
    assert (
        main(
            [
                "chain-compare-qk",
                str(tiny_chain_run),
                "--n",
                "6",
                "--out",
                str(out),
                "--format",
                "json",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert {p.name for p in out.iterdir()} >= {
        "chain_compare_qk.json",
        "summary.md",
        "chain_compare_qk.png",
    }
    assert len(res["windows"]) == len(res["steps"]) - 1 >= 1
    w = res["windows"][0]
    for hop in ("last", "middle"):
        e = w[hop]["cos"]["all"]
        assert -1 <= e["cos"] <= 1 and 0 < e["null_iso95"] < 1 and e["entries"] > 100
    assert w["G2_norm_at_W0"] < 1e-12  # the theory: no middle-hop gradient at W^0
    assert res["order"]["verdict"] in (
        "confirmed",
        "refuted",
        "not resolved (same snapshot)",
        "not measurable (a hop never forms)",
    )
    assert "The order of the hops" in (out / "summary.md").read_text()


def test_a_formation_below_twice_the_uniform_weight_does_not_count():
    from empirical.studies.chain.analysis.qk_compare import attention_formed

    f = {"step": 300, "start": 0.06, "peak": 0.075, "peak_step": 400}
    assert attention_formed(f, "m", 16)["step"] is None
    assert attention_formed({**f, "peak": 0.2}, "m", 16)["step"] == 300
