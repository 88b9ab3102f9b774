"""The lego family (task.family = "lego", empirical/task/lego): LEGO's chains with signs.

Every row is checked against a plain-Python reading of its token ids written here (clauses,
chains, the query's hop count and sign product); training is checked to hold no held-out hop
count, the clause order to be shuffled (and the unshuffled set not), the distractor chain to
be independent, the data to be a function of the seed; bad values to be one-line errors; the
`sample` command to print `a=+1, c=+b, b=-a, c=? -1`; the association measures to be the
attention entries they name; `analyze` to write its files on a tiny run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from empirical.config.io import ConfigError
from empirical.runs.config import load_run_config
from empirical.task.config import TaskConfig, task_config
from empirical.task.eval_sets import build_eval_set, build_eval_sets, eval_set_names
from empirical.task.pairs import training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import run_training_sampler

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "lego.toml"


def lego_task(**changes) -> TaskConfig:
    task = load_run_config(CONFIG).task
    return task_config(**{**task.__dict__, **changes})


# -- an independent reading of a row: plain Python over the token ids -----------------------


def read_row(ids: list[int], K: int, L: int) -> dict:
    """The row's clauses {variable: (sign, named or None, clause index)}, the query variable,
    its hop count and value (+1 / -1), and the chains (lists of variables from the root).
    Ids: the query `v=?` is 2 + v; the clause `v=sx` is 2 + K + (2 v + s)(K + 1) + x (x = K:
    the constant 1); pad 2 + K + 2K(K + 1)."""
    pad = 2 + K + 2 * K * (K + 1)
    assert 2 <= ids[L - 1] < 2 + K  # the query, last
    i = 0
    while ids[i] == pad:
        i += 1
    clauses = {}
    for j, t in enumerate(ids[i : L - 1]):
        assert 2 + K <= t < pad, (t, ids)
        (v, s), x = divmod((t - 2 - K) // (K + 1), 2), (t - 2 - K) % (K + 1)
        assert v not in clauses, "a variable defined twice"
        clauses[v] = (s, None if x == K else x, j)
    q = ids[L - 1] - 2
    value, hops, v = 1, -1, q
    while v is not None:
        sign, v = clauses[v][0], clauses[v][1]
        value, hops = value * (-1 if sign else 1), hops + 1
        assert hops <= len(clauses), "a cycle"
    named_by = {x: v for v, (_, x, _) in clauses.items() if x is not None}
    assert len(named_by) == sum(x is not None for _, x, _ in clauses.values()), "named twice"
    chains = []
    for root in (v for v, (_, x, _) in clauses.items() if x is None):
        chain = [root]
        while chain[-1] in named_by:
            chain.append(named_by[chain[-1]])
        chains.append(chain)
    assert sum(map(len, chains)) == len(clauses), "a clause outside every chain"
    return {"clauses": clauses, "query": q, "hops": hops, "value": value, "chains": chains}


def check_batch(batch, task: TaskConfig) -> list[dict]:
    rows = []
    for ids, label in zip(batch.tokens.tolist(), batch.labels.tolist(), strict=True):
        r = read_row(ids, task.K, task.L)
        assert label == (0 if r["value"] == 1 else 1)  # class 0: +1, class 1: -1
        main = next(c for c in r["chains"] if r["query"] in c)
        assert len(main) == task.lego_chain_length
        others = [c for c in r["chains"] if c is not main]
        assert len(others) <= task.lego_distractors
        assert all(1 <= len(c) <= task.lego_distractor_length for c in others)
        rows.append({**r, "main": main, "others": others})
    return rows


def in_chain_order(r: dict) -> bool:
    """Whether every clause comes after the clause defining the variable it names."""
    c = r["clauses"]
    return all(x is None or c[x][2] < at for _, x, at in c.values())


# -- the data ----------------------------------------------------------------------------------


def test_training_rows_by_construction():
    task = lego_task()
    batch = run_training_sampler(task, 0).sample(4000, training_generator(0))
    rows = check_batch(batch, task)
    hops = Counter(r["hops"] for r in rows)
    assert set(hops) == {0, 1, 2}  # hop 3 is held out of training
    for h in (0, 1, 2):
        assert abs(hops[h] / len(rows) - 1 / 3) < 0.04
    assert {in_chain_order(r) for r in rows} == {True, False}  # shuffled: both occur
    distractors = Counter(len(r["others"]) for r in rows)
    assert set(distractors) == {0, 1} and abs(distractors[1] / len(rows) - 0.5) < 0.04
    lengths = Counter(len(c) for r in rows for c in r["others"])
    assert set(lengths) == set(range(1, task.lego_distractor_length + 1))
    values = Counter(r["value"] for r in rows)
    assert abs(values[1] / len(rows) - 0.5) < 0.04
    assert torch.equal(batch.operand_vars[:, 0], batch.tokens[:, task.L - 1] - 2)
    assert batch.tokens.shape == (4000, task.L)


def test_evaluation_sets_by_hop_count_and_order():
    task = lego_task(eval_size=600)
    sets = build_eval_sets(task, 0)
    assert list(sets) == list(eval_set_names(task))
    assert list(sets) == ["lego/h0", "lego/h1", "lego/h2", "lego/h3", "lego/unshuffled"]
    for name, batch in sets.items():
        rows = check_batch(batch, task)
        assert len(rows) == 600
        if name == "lego/unshuffled":
            assert all(in_chain_order(r) for r in rows)
            assert {r["hops"] for r in rows} == {0, 1, 2}
            for r in rows:  # chain after chain
                at = sorted((r["clauses"][v][2], k) for k, c in enumerate(r["chains"]) for v in c)
                switches = sum(a[1] != b[1] for a, b in zip(at, at[1:], strict=False))
                assert switches == len(r["chains"]) - 1
        else:
            assert {r["hops"] for r in rows} == {int(name.removeprefix("lego/h"))}
            assert {in_chain_order(r) for r in rows} == {True, False}


def test_minus_share_biases_training_signs_only():
    task = lego_task(lego_minus_share=0.2)
    batch = run_training_sampler(task, 0).sample(3000, training_generator(0))
    signs = [s for r in check_batch(batch, task) for s, _, _ in r["clauses"].values()]
    assert abs(sum(signs) / len(signs) - 0.2) < 0.03
    batch, _ = build_eval_set(task, 0, "lego/h2")
    signs = [s for r in check_batch(batch, task) for s, _, _ in r["clauses"].values()]
    assert abs(sum(signs) / len(signs) - 0.5) < 0.03


def test_same_seed_same_data():
    task = lego_task(eval_size=200)
    a = run_training_sampler(task, 0).sample(500, training_generator(3))
    b = run_training_sampler(task, 0).sample(500, training_generator(3))
    c = run_training_sampler(task, 0).sample(500, training_generator(4))
    assert a.equal(b) and not a.equal(c)
    assert len(run_training_sampler(task, 0).sample(0, training_generator(3))) == 0
    first, second = build_eval_sets(task, 1), build_eval_sets(task, 1)
    assert all(first[k].equal(second[k]) for k in first)
    assert not first["lego/h1"].equal(build_eval_sets(task, 2)["lego/h1"])
    chunked = run_training_sampler(task, 0).sample(2500, training_generator(5))  # chunks of 1024
    assert chunked.slice(0, 500).equal(
        run_training_sampler(task, 0).sample(500, training_generator(5))
    )


def test_vocabulary_text_round_trips():
    task = lego_task()
    vocab = family_of(task).vocabulary(task)
    batch = run_training_sampler(task, 0).sample(200, training_generator(0))
    for ids, label in zip(batch.tokens, batch.labels.tolist(), strict=True):
        text = vocab.decode(ids)
        assert re.fullmatch(r"([a-z]=[+-]([a-z]|1), )+[a-z]=\?", text), text
        assert torch.equal(vocab.encode(text), ids)
        assert vocab.label(ids) == label
    assert vocab.encode("a=+1, b=-a, c=+b, c=?").shape == (task.L,)
    assert vocab.label(vocab.encode("a=+1, c=+b, b=-a, c=?")) == 1  # -1
    assert vocab.label_text(1) == "-1" and vocab.label_text(0) == "+1"


# -- bad values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"lego_hops": (0, -1)}, "task.lego_hops: -1 is not a hop count"),
        ({"lego_hops": (1, 1)}, "repeats a hop count"),
        ({"lego_held_out_hops": (0, 1, 2)}, "leaving nothing to train"),
        ({"lego_hop_weights": (1.0,)}, "has 1 weights for the 3 hop counts"),
        ({"lego_hop_weights": (0.0, 0.0, 0.0)}, "gives weight 0 to every trained hop count"),
        ({"lego_chain_length": 3}, "task.lego_chain_length = 3 is out of range"),
        ({"lego_order": "sorted"}, "task.lego_order = 'sorted' is not allowed"),
        ({"lego_minus_share": 1.0}, "task.lego_minus_share = 1.0 must be a number in (0, 1)"),
        ({"lego_distractors": -1}, "task.lego_distractors = -1 is out of range"),
        ({"K": 5}, "task.K = 5 variables are too few"),
        ({"L": 8, "lego_distractor_length": 4}, "task.L = 8 is too short"),
        ({"p": 11}, "task.p = 11 is not read by the lego family"),
    ],
)
def test_bad_values_name_the_field(changes, needle):
    with pytest.raises(ConfigError) as err:
        lego_task(**changes)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_lego_fields_need_the_lego_family():
    with pytest.raises(ConfigError, match="task.lego_order = 'chain' is a setting of the lego"):
        task_config(lego_order="chain")


def test_a_bad_override_is_one_error_line_before_torch():
    code = (
        "import sys; from empirical.__main__ import main\n"
        "status = main(['sample', '--config', 'configs/lego.toml', 'task.lego_order=up'])\n"
        "assert 'torch' not in sys.modules; sys.exit(status)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        "error: task.lego_order = 'up' is not allowed: must be one of 'random', 'chain'"
    )


# -- the command line ------------------------------------------------------------------------


def test_sample_prints_text_then_label(capsys):
    from empirical.cli.sample import main

    assert main(["--config", str(CONFIG), "--split", "lego/h2", "--n", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 20
    task = lego_task()
    vocab = family_of(task).vocabulary(task)
    for line in lines:
        m = re.fullmatch(r"((?:[a-z]=[+-](?:[a-z]|1), )+[a-z]=\?) ([+-]1)", line)
        assert m, line
        r = read_row(vocab.encode(m.group(1)).tolist(), task.K, task.L)
        assert r["hops"] == 2 and m.group(2) == f"{r['value']:+d}"
    assert main(["--config", str(CONFIG), "--n", "3", "--tokens"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(re.fullmatch(r"(pad )*([a-z]=[+-]([a-z]|1) )+[a-z]=\? [+-]1", x) for x in lines)


# -- the association analysis ----------------------------------------------------------------


def test_association_measures_are_the_attention_entries_they_name():
    from empirical.model.transformer import AssignAddTransformer
    from empirical.studies.lego.analysis import MEASURES, association_attention

    cfg = load_run_config(CONFIG, ["model.d_model=32", "model.d_mlp=64"])
    torch.manual_seed(0)
    model = AssignAddTransformer(cfg.built_model_config()).eval()
    task = cfg.task
    vocab = family_of(task).vocabulary(task)
    text = "a=+1, c=+b, b=-a, e=-1, c=?"  # b names a (earlier); c names b (later)
    tokens = vocab.encode(text)[None]
    table = association_attention(model, vocab, tokens)
    assert list(table) == list(MEASURES)
    _, cache = model.run_with_cache(tokens)
    L, start = task.L, task.L - 1 - 4  # clauses at start .. start + 3, the query at L - 1
    for layer in range(cfg.model.n_layers):
        att = cache["pattern", layer][0].mean(0)  # the heads' mean [q, k]
        named = float(att[start + 2, start])  # b=-a onto a=+1
        assert table["named -> its clause"]["mean"][layer] == pytest.approx(named, abs=1e-6)
        query = float(att[L - 1, start + 1])  # c=? onto c=+b
        assert table["query -> its clause"]["mean"][layer] == pytest.approx(query, abs=1e-6)
        back = float(att[start + 2, start + 1])  # b=-a onto c=+b (which names b)
        assert table["defined -> naming clause"]["mean"][layer] == pytest.approx(back, abs=1e-6)
        for k, at in ((1, start + 2), (2, start)):  # c=? onto b=-a, then a=+1
            name = f"query -> {k} hop{'s' if k > 1 else ''} down"
            assert table[name]["mean"][layer] == pytest.approx(float(att[L - 1, at]), abs=1e-6)
    assert table["named -> its clause"]["n"] == 1 and table["defined -> naming clause"]["n"] == 1
    assert table["named -> its clause"]["chance"] == pytest.approx(1 / (start + 2 + 1))
    assert table["query -> 3 hops down"]["n"] == 0 and table["query -> 2 hops down"]["n"] == 1


@pytest.fixture(scope="module")
def tiny_lego_run(tmp_path_factory):
    from empirical.train.loop import train_run

    cfg = load_run_config(CONFIG, [
        "train.steps=4", "task.eval_size=40", "train.eval_every=2", "train.eval_subsample=0",
        "train.full_eval_every=2", "train.checkpoint_every=4", "train.snapshot_every=2",
        "train.batch_size=16", "model.d_model=16", "model.d_mlp=32"])  # fmt: skip
    run = tmp_path_factory.mktemp("lego") / "run"
    train_run(cfg, run, progress=False, figures=False)
    return run


def test_train_and_analyze_a_tiny_run(tiny_lego_run, capsys):
    import json

    from empirical.__main__ import main

    summary = json.loads((tiny_lego_run / "summary.json").read_text())
    assert set(summary["final_acc"]) == {"lego/h0", "lego/h1", "lego/h2", "lego/h3",
                                         "lego/unshuffled"}  # fmt: skip
    assert main(["analyze", str(tiny_lego_run), "--quiet"]) == 0
    out = tiny_lego_run / "analysis"
    result = json.loads((out / "analysis.json").read_text())
    assert result["set"] == "lego/h2" and result["steps"] == [0, 2, 4]
    assert (out / "association.png").stat().st_size > 0 and (out / "summary.md").is_file()
    assert main(["evaluate", str(tiny_lego_run)]) == 0
