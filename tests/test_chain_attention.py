"""The chain mechanism measures (empirical.studies.chain.analysis.attention): the chain read
from the tokens, each measure equal to the attention pattern's entries it names, and the
command."""

import json

import pytest

from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config
from empirical.studies.chain.analysis.attention import chain_attention, chain_structure
from empirical.task.registry import family_of

TEXT = "a=17,e=3,b=a,d=b,d+5=?"  # d -> b -> a -> 17 (3 hops), e=3 a distractor


def model_and_vocab(n_layers=3):
    cfg = load_run_config("configs/chain.toml", [f"model.n_layers={n_layers}", "model.d_model=16",
                                                 "model.d_mlp=32"])  # fmt: skip
    vocab = family_of(cfg.task).vocabulary(cfg.task)
    model = AssignAddTransformer(cfg.built_model_config(), seed=0)
    model.attach_vocab(vocab)
    return model, vocab


def test_chain_structure_follows_the_pointers_from_the_operand():
    _, vocab = model_and_vocab()
    s = chain_structure(vocab, vocab.encode(TEXT))
    # assignments in order: a=17 @0, e=3 @2, b=a @4, d=b @6
    assert [(lhs, rhs) for lhs, rhs, _, _ in s["assign"]] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert s["chains"] == [[3, 2, 0]]  # d's own assignment, then b's, then a's (the number)
    assert s["on_chain"] == [0, 2, 3]


def test_measures_are_the_pattern_entries_they_name():
    model, vocab = model_and_vocab()
    tokens = vocab.encode(TEXT)[None]
    table = chain_attention(model, vocab, tokens)
    _, cache = model.run_with_cache(tokens)
    L = tokens.shape[1]
    for layer in range(3):
        att = cache["pattern", layer][0, 0]
        q = L - 1
        operands = float(att[q, L - 3] + att[q, L - 2])
        assert table["query -> operands"][layer] == pytest.approx(operands)
        assert table["query -> hop 1"][layer] == pytest.approx(float(att[q, 7]))  # d=b: b
        assert table["query -> hop 3"][layer] == pytest.approx(float(att[q, 1]))  # a=17: 17
        assert table["query -> distractors"][layer] == pytest.approx(float(att[q, 2] + att[q, 3]))
        binding = [float(att[r, r - 1]) for r in (1, 3, 5, 7)]
        assert table["RHS -> own LHS"][layer] == pytest.approx(sum(binding) / 4)
        # pointers b=a (RHS @5 -> a=17 @0, @1) and d=b (RHS @7 -> b=a @4, @5)
        assert table["pointer -> target's variable"][layer] == pytest.approx(
            (float(att[5, 0]) + float(att[7, 4])) / 2
        )
        assert table["pointer -> target's value"][layer] == pytest.approx(
            (float(att[5, 1]) + float(att[7, 5])) / 2
        )
        assert table["pointer: uniform"][layer] == pytest.approx((1 / 6 + 1 / 8) / 2)
    assert "query -> hop 4" not in table and table["uniform"] == [1 / L] * 3


def test_command_refuses_other_families_and_unknown_sets(tmp_path, capsys):
    from empirical.__main__ import main

    assert main(["chain-attention", str(tmp_path / "missing")]) == 2
    assert main(["chain-attention", str(tmp_path), "--n", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("error: ") for line in err) and len(err) == 2
    assert "--n 0" in err[1]


@pytest.mark.slow  # trains a run with snapshots (the measures themselves: the tests above)
def test_over_training_reads_every_snapshot_and_the_command_writes_both_figures(
    tiny_chain_run, capsys
):
    from empirical.__main__ import main
    from empirical.runs.load import load_run
    from empirical.runs.rundir import RunDir
    from empirical.studies.chain.analysis.attention import (
        chain_attention_over_training,
        key_series,
    )

    run = tiny_chain_run
    _, vocab = load_run(run)
    tokens = vocab.encode(TEXT)[None]
    history = chain_attention_over_training(run, tokens)
    assert history["steps"] == RunDir(run).snapshot_steps() and len(history["steps"]) >= 2
    model, _ = load_run(run, step=history["steps"][-1])
    assert history["tables"][-1] == chain_attention(model, vocab, tokens)
    series = key_series(history)
    assert list(series)[-1] == "layer 3: query -> the number (hop 3)"
    assert main(["chain-attention", str(run), "--set", "chain/1var_h2", "--n", "8",
                 "--over-training"]) == 0  # fmt: skip
    out = RunDir(run).analysis_dir()
    names = {p.name for p in out.iterdir()}
    stem = "chain_attention_chain_1var_h2"
    assert {f"{stem}{tail}" for tail in (".png", "_steps.png", ".json", "_steps.json")} <= names
    printed = capsys.readouterr().out
    assert "query -> operands" in printed and "half of each measure's rise" in printed
    saved = json.loads((out / f"{stem}_steps.json").read_text())
    assert set(saved["formed_at_half_rise"]) == set(saved["key_series"])


def test_formation_steps_find_the_half_rise_and_a_measure_that_never_rises():
    from empirical.studies.chain.analysis.attention import formation_steps

    steps = [0, 1000, 2000, 3000]
    formed = formation_steps(steps, {
        "early": [0.1, 0.5, 0.6, 0.55],   # half of 0.1 -> 0.6 is 0.35: step 1000
        "late": [0.2, 0.1, 0.2, 0.8],     # half of 0.2 -> 0.8 is 0.5: step 3000
        "flat": [0.3, 0.2, 0.1, 0.0],     # peaks at the start: never rises
        "gaps": [None, None, 0.1, 0.3],
    })  # fmt: skip
    assert formed["early"] == {"step": 1000, "start": 0.1, "peak": 0.6, "peak_step": 2000}
    assert formed["late"]["step"] == 3000 and formed["flat"]["step"] is None
    assert formed["gaps"]["step"] == 3000
    with pytest.raises(ValueError, match="fraction"):
        formation_steps(steps, {}, fraction=0)
