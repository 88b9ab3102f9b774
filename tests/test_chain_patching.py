"""Activation patching of a chain run (empirical.studies.chain.analysis.patching): an independent
label resolver, corruptions that change one token and the answer, and the two identities
any model obeys (the changed token's embedding restores everything before layer 1; the
query's final residual restores everything after the last layer), then the command."""

from __future__ import annotations

import json

import pytest
import torch

from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config
from empirical.studies.chain.analysis.patching import chain_patching, corrupt, resolve_label
from empirical.task.eval_sets import build_eval_set
from empirical.task.registry import family_of


def setup(n_layers=3, n=64):
    overrides = [f"model.n_layers={n_layers}", "model.d_model=16", "model.d_mlp=32",
                 f"task.eval_size={n}"]  # fmt: skip
    cfg = load_run_config("configs/chain.toml", overrides)
    vocab = family_of(cfg.task).vocabulary(cfg.task)
    model = AssignAddTransformer(cfg.built_model_config(), seed=0)
    model.attach_vocab(vocab)
    batch, _ = build_eval_set(cfg.task, 0, "chain/1var_h2")
    return model, vocab, batch


def test_resolver_and_corruptions():
    _, vocab, batch = setup()
    assert [resolve_label(vocab, t) for t in batch.tokens] == batch.labels.tolist()
    g = torch.Generator().manual_seed(0)
    for kind in ("number", "pointer"):
        changed = 0
        for ids in batch.tokens:
            c = corrupt(vocab, ids, kind, g)
            if c is None:
                continue
            new, label, roles = c
            assert int((new != ids).sum()) == 1 and label != resolve_label(vocab, ids)
            where = int((new != ids).nonzero())
            assert where == roles["hop 2 RHS" if kind == "number" else "hop 1 RHS"]
            assert roles["query"] == len(ids) - 1 and ids[roles["operand"]] >= vocab.p
            changed += 1
        assert changed > len(batch.tokens) // 4, kind
    with pytest.raises(ValueError, match="corruption"):
        corrupt(vocab, batch.tokens[0], "nope", g)


@pytest.mark.parametrize("n_layers", [2, 3])
def test_patching_identities_hold_for_any_model(n_layers):
    model, vocab, batch = setup(n_layers)
    for kind, changed_role in (("number", "hop 2 RHS"), ("pointer", "hop 1 RHS")):
        res = chain_patching(model, vocab, batch.tokens, kind)
        assert res["n"] > 0 and len(res["points"]) == n_layers + 1
        first, last = res["restored"][res["points"][0]], res["restored"][res["points"][-1]]
        for role, share in first.items():  # the embedding differs only at the changed token
            assert share == pytest.approx(1.0 if role == changed_role else 0.0, abs=1e-5)
        for role, share in last.items():  # the last residual at the query is the logits
            assert share == pytest.approx(1.0 if role == "query" else 0.0, abs=1e-5)


@pytest.mark.slow  # trains a run (~10 s); the measures themselves: the tests above
def test_command_writes_json_and_figure(tiny_chain_run, tmp_path, capsys):
    from empirical.__main__ import main
    from empirical.runs.rundir import RunDir
    from empirical.train.loop import train_run

    run = tiny_chain_run
    assert main(["chain-patching", str(run), "--n", "30"]) == 0
    out = RunDir(run).analysis_dir()
    saved = json.loads((out / "chain_patching_chain_1var_h2.json").read_text())
    assert [r["corruption"] for r in saved["results"]] == ["number", "pointer"]
    assert (out / "chain_patching_chain_1var_h2.png").stat().st_size > 10_000
    assert "corrupted: the number" in capsys.readouterr().out
    # `analyze` on a chain run (any depth): the chain's report instead of the paper's
    assert main(["analyze", str(run), "--quiet"]) == 0
    summary = (out / "summary.md").read_text()
    for section in ("Attention onto the construction's targets", "Patching, corrupted: the "
                    "pointer", "The last layer's MLP on 0-var sums (layer 3)"):  # fmt: skip
        assert section in summary
    report = json.loads((out / "analysis.json").read_text())
    assert report["fourier"]["n_neurons"] == 32 and len(report["patching"]) == 2
    pairs = [(r["query_ov_layer"], r["key_ov_layer"]) for r in report["last_qk_identity"]]
    assert pairs == [(1, 1), (1, 2), (2, 1), (2, 2)] and "ebar identity of layer 3" in summary
    assert {"chain_attention.png", "chain_patching.png"} <= {p.name for p in out.iterdir()}
    smoke = tmp_path / "smoke"
    tiny = ["train.steps=2", "task.eval_size=20", "train.eval_every=2", "train.checkpoint_every=2"]
    smoke_cfg = load_run_config("configs/smoke.toml", tiny)
    train_run(smoke_cfg, smoke, progress=False, figures=False)
    assert main(["chain-patching", str(smoke)]) == 2
    assert "chain-patching reads chain runs" in capsys.readouterr().err
