"""The chain family (task.family = "chain", empirical/task/chain.py): multi-hop assignment.

Labels are checked against a plain-Python resolver written here from the token sequence
alone; training is checked to hold no held-out pointer pair, value pair or hop count; the
assign_add family is checked to give the data it gave before the family existed (hashes
recorded from the code before this change).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import pytest
import torch

from empirical.config.io import ConfigError, non_default_fields
from empirical.runs.config import load_run_config
from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.batch import FIELDS
from empirical.task.chain.draw import ChainSampler
from empirical.task.chain.vocab import ChainVocabulary
from empirical.task.config import TaskConfig, task_config
from empirical.task.eval_sets import build_eval_set, build_eval_sets, eval_set_names
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import sample_training_batch, training_sampler
from empirical.task.vocab import Vocabulary

EXAMPLE = "configs/chain_task_example.toml"


def example_task(**changes) -> TaskConfig:
    task = load_run_config(EXAMPLE).task
    fields = {**task.__dict__, **changes}
    return task_config(**fields)


# -- an independent resolver: plain Python over the token ids ------------------------------


def parse(tokens: list[int], p: int, K: int, L: int):
    """(bindings {variable: (right-hand id, position)}, [operand ids]) of one row; asserts
    the layout (pads and two-token assignments in 0..L-5, `+`, two operands, `=`)."""
    pad, plus, eq = p + K + 2, p + K, p + K + 1
    assert tokens[L - 4] == plus and tokens[L - 1] == eq
    bindings = {}
    i = 0
    while i < L - 4:
        t = tokens[i]
        if t == pad:
            i += 1
            continue
        assert p <= t < p + K, (i, tokens)
        assert i + 1 < L - 4 and tokens[i + 1] < p + K, (i, tokens)
        assert t not in bindings, "a variable assigned twice"
        bindings[t] = (tokens[i + 1], i + 1)
        i += 2
    return bindings, [tokens[L - 3], tokens[L - 2]]


def resolve(t: int, bindings: dict, p: int, depth: int = 0) -> tuple[int, int, int]:
    """(number, hop count, position of the number) of token id t; hop 0 for a number."""
    assert depth <= len(bindings), "a pointer cycle"
    if t < p:
        return t, 0, -1
    rhs, pos = bindings[t]
    if rhs < p:
        return rhs, 1, pos
    number, hops, where = resolve(rhs, bindings, p, depth + 1)
    return number, hops + 1, where


def check_rows(batch, cfg: TaskConfig, deep: bool = True) -> dict:
    """Every row's label and facts against the resolver; returns what it saw: operand hop
    counts, the value pairs and, if `deep`, the longest hop count of any variable, the
    pointer pairs and whether each pointer's target comes first."""
    p, K, L = cfg.p, cfg.K, cfg.L
    rows = zip(
        batch.tokens.tolist(),
        batch.labels.tolist(),
        batch.operand_values.tolist(),
        batch.value_positions.tolist(),
        batch.operand_vars.tolist(),
        batch.n_vars.tolist(),
        strict=True,
    )
    seen = {"hops": Counter(), "max_hop": 0, "pointers": set(), "pairs": set(), "orders": set()}
    for tokens, label, values, vpos, ovars, n_vars in rows:
        bindings, ops = parse(tokens, p, K, L)
        resolved = [resolve(t, bindings, p) for t in ops]
        numbers = [r[0] for r in resolved]
        assert label == sum(numbers) % p, tokens
        assert values == numbers
        for j, (t, (_, _, where)) in enumerate(zip(ops, resolved, strict=True)):
            assert vpos[j] == (where if t >= p else L - 3 + j)
            assert ovars[j] == (t - p if t >= p else -1)
        assert n_vars == sum(t >= p for t in ops)
        seen["hops"][max(r[1] for r in resolved)] += 1
        seen["pairs"].add(tuple(numbers))
        if not deep:
            continue
        for v in bindings:
            seen["max_hop"] = max(seen["max_hop"], resolve(v, bindings, p)[1])
        for v, (rhs, pos) in bindings.items():
            if rhs >= p:
                seen["pointers"].add((v - p, rhs - p))
                seen["orders"].add(bindings[rhs][1] < pos)  # target assigned first?
    return seen


# -- assign_add is untouched ---------------------------------------------------------------


def digest(batch) -> str:
    h = hashlib.sha256()
    for f in FIELDS:
        h.update(getattr(batch, f).to(torch.int64).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# computed with the code before the chain family existed (commit 32eeed3)
BEFORE = {
    "default": {
        "held": "f7c25e9f3642ffd0",
        "train": ["8dd070e528045aac", "3d2d483412d7e513"],
        "0var/pair": "2680a7a93af96d94",
        "1var/both": "2e6b72bf88291770",
        "2var/var": "7369ea812c4373c5",
        "curated/held_out_pairs": "295324577b43c985",
    },
    "authors": {
        "held": "ea2fe35d8ce79253",
        "train": ["10854c95419c2fc1", "a2212165fbd8d848"],
        "0var/pair": "33c85986408eb0e2",
        "1var/both": "f822ba6ddb05ddf2",
        "2var/var": "0db2fd0cd0243e82",
        "curated/held_out_pairs": "22c4039384466fcd",
    },
}


@pytest.mark.parametrize("name", ["default", "authors"])
def test_assign_add_data_unchanged(name):
    cfg = task_config() if name == "default" else load_run_config("configs/authors.toml").task
    assert "family" not in non_default_fields(cfg)  # fingerprints keep their inputs
    assert not any(k.startswith("chain_") for k in non_default_fields(cfg))
    want = BEFORE[name]
    held = held_out_pairs(cfg, 0)
    assert hashlib.sha256(held.numpy().tobytes()).hexdigest()[:16] == want["held"]
    sampler = TrainingSampler(cfg, held, "cpu")
    assert type(sampler) is TrainingSampler
    g = training_generator(0)
    assert [digest(sampler.sample(512, g)) for _ in range(2)] == want["train"]
    for set_name in ("0var/pair", "1var/both", "2var/var", "curated/held_out_pairs"):
        batch, _ = build_eval_set(cfg, 0, set_name, held_out=held)
        assert digest(batch) == want[set_name], set_name


# -- labels against the resolver -----------------------------------------------------------


def _all_sets(cfg: TaskConfig, n: int):
    """(name, batch) of n training rows and of every evaluation set (n rows each)."""
    cfg = task_config(**{**cfg.__dict__, "eval_size": n})
    held = held_out_pairs(cfg, 0)
    yield "train", training_sampler(cfg, held).sample(n, training_generator(0))
    yield from build_eval_sets(cfg, 0).items()


VARIANTS = {
    "example": {},
    "targets_first_gaps": {"chain_order": "targets_first", "padding": "gaps"},
    # the authors' value-pair fields: ordered pairs split by Python's random, 30% held out
    "ordered_pairs": {
        "held_out_form": "ordered",
        "pair_split": "python_random",
        "pair_seed": 42,
        "held_out_fraction": 0.3,
        "allow_same_variable_operands": False,
    },
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_labels_match_an_independent_resolver(variant):
    cfg = example_task(**VARIANTS[variant])
    n = 5_000 if variant == "example" else 500
    names = []
    for name, batch in _all_sets(cfg, n):
        assert len(batch) == n
        check_rows(batch, cfg, deep=False)
        names.append(name)
    assert names == ["train", *eval_set_names(cfg)]


@pytest.mark.slow
def test_labels_match_an_independent_resolver_100k():
    for variant in VARIANTS:
        cfg = example_task(**VARIANTS[variant])
        for _, batch in _all_sets(cfg, 100_000):
            check_rows(batch, cfg, deep=False)


# -- what training never shows -------------------------------------------------------------


def check_training(cfg: TaskConfig, n: int) -> dict:
    held = held_out_pairs(cfg, 0)
    batch = training_sampler(cfg, held).sample(n, training_generator(0))
    seen = check_rows(batch, cfg)
    pointers = {(cfg.letters.index(t[0]), cfg.letters.index(t[-1]))
                for t in cfg.chain_held_out_pointers}  # fmt: skip
    assert pointers and not seen["pointers"] & pointers
    assert set(seen["hops"]) == {0, 1, 2}  # 0: a 0-var row; 3 is held out
    assert seen["max_hop"] == 2  # no variable at all has the held-out hop count 3
    held_pairs = {tuple(r) for r in held.tolist()}
    assert held_pairs and not seen["pairs"] & held_pairs  # ordered form: (x, y) as listed
    r1 = {cfg.letters.index(v) for v in cfg.r1}
    r2 = {cfg.letters.index(v) for v in cfg.r2}
    assert not set(batch.operand_vars[:, 0].tolist()) & r1
    assert not set(batch.operand_vars[:, 1].tolist()) & r2
    return seen


def test_training_holds_no_held_out_pointer_pair_or_hop_count():
    cfg = example_task(held_out_form="ordered", held_out_fraction=0.3,
                       chain_held_out_pointers=("a->b", "c->d", "e->a", "f->g"))  # fmt: skip
    seen = check_training(cfg, 20_000)
    assert len(seen["pointers"]) > 50  # the other pointer pairs are trained


@pytest.mark.slow
def test_training_holds_no_held_out_pointer_pair_or_hop_count_1m():
    cfg = example_task(held_out_form="ordered", held_out_fraction=0.3,
                       chain_held_out_pointers=("a->b", "c->d", "e->a", "f->g"))  # fmt: skip
    check_training(cfg, 1_000_000)


def test_held_out_pointer_set_holds_the_pointers():
    cfg = example_task(eval_size=500)
    batch, _ = build_eval_set(cfg, 0, "chain/held_out_pointers")
    seen = check_rows(batch, cfg)
    heads = [int(v) for v in batch.operand_vars.max(1).values]
    for tokens, u in zip(batch.tokens.tolist(), heads, strict=True):
        bindings, _ = parse(tokens, cfg.p, cfg.K, cfg.L)
        w = bindings[cfg.p + u][0] - cfg.p
        assert f"{cfg.letters[u]}->{cfg.letters[w]}" in cfg.chain_held_out_pointers
    assert min(seen["hops"]) >= 2


# -- the mix, the order ----------------------------------------------------------------------


def test_hop_weights_order_and_mix():
    cfg = example_task(chain_hop_weights=(1.0, 3.0), chain_order="targets_first")
    n = 8_000
    batch = training_sampler(cfg, held_out_pairs(cfg, 0)).sample(n, training_generator(0))
    seen = check_rows(batch, cfg)
    assert seen["orders"] == {True}  # every target assigned before its pointer
    var_rows = seen["hops"][1] + seen["hops"][2]
    share2 = seen["hops"][2] / var_rows
    sd = (0.75 * 0.25 / var_rows) ** 0.5
    assert abs(share2 - 0.75) < 5 * sd, share2
    shares = torch.bincount(batch.n_vars, minlength=3).double() / n
    for got, want in zip(shares.tolist(), cfg.mix_weights, strict=True):
        assert abs(got - want) < 5 * (want * (1 - want) / n) ** 0.5
    sampler = training_sampler(example_task(), held_out_pairs(cfg, 0))
    random_order = check_rows(sampler.sample(1000, training_generator(0)), cfg)
    assert random_order["orders"] == {True, False}


def test_same_seed_same_data_and_dispatch():
    cfg = example_task(eval_size=300)
    held = held_out_pairs(cfg, 0)
    sampler = training_sampler(cfg, held)
    assert isinstance(sampler, ChainSampler)
    a = sampler.sample(700, training_generator(3))
    b = sample_training_batch(cfg, 700, training_generator(3), held_out=held)
    assert a.equal(b)
    assert not a.equal(sampler.sample(700, training_generator(4)))
    assert len(sampler.sample(0, training_generator(3))) == 0
    assert build_eval_set(cfg, 0, "chain/2var_h3")[0].equal(
        build_eval_set(cfg, 0, "chain/2var_h3")[0]
    )


# -- config errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"chain_hops": (1, 5)}, "raise task.L to at least 24"),
        ({"chain_held_out_hops": (5,)}, "task.chain_held_out_hops: hop count 5 does not fit"),
        ({"K": 5, "L": 40}, "K = 5"),
        ({"chain_held_out_hops": (1, 2, 3)}, "leaving nothing to train"),
        ({"chain_hop_weights": (1.0,)}, "task.chain_hop_weights"),
        ({"chain_hop_weights": (0.0, 0.0)}, "task.chain_hop_weights"),
        ({"chain_hops": (0, 1)}, "task.chain_hops"),
        ({"chain_hops": (1, 1)}, "repeats"),
        ({"chain_order": "sorted"}, "task.chain_order"),
        ({"chain_distractors": -1}, "task.chain_distractors"),
        ({"chain_distractor_length": 3}, "task.chain_distractor_length"),
        ({"chain_held_out_pointers": ("a-b",)}, "'u->w'"),
        ({"chain_held_out_pointers": ("a->z",)}, "'z' is not a variable"),
        ({"chain_held_out_pointers": ("a->a",)}, "itself"),
        ({"chain_held_out_pointers": ("a->b", "a->c", "a->d", "a->e", "a->f")}, "at most 2"),
        ({"mix": "rows"}, "task.mix"),
    ],
)
def test_bad_chain_settings_are_config_errors(changes, needle):
    with pytest.raises(ConfigError) as info:
        example_task(**changes)
    assert needle in str(info.value), str(info.value)


def test_chain_fields_need_the_chain_family():
    with pytest.raises(ConfigError, match="task.chain_hops"):
        task_config(chain_hops=(1, 2, 3))
    with pytest.raises(ConfigError, match="task.family"):
        task_config(family="nope")


# -- text and the command line ----------------------------------------------------------------


def test_vocabulary_pointers():
    vocab = ChainVocabulary(23, 5, 16)
    ids = vocab.encode("a=17,c=4,b=a,d=b,d+c=?")
    assert vocab.label(ids) == (17 + 4) % 23
    assert vocab.decode(ids) == "a=17,c=4,b=a,d=b,d+c=?"
    assert vocab.encode(vocab.decode_tokens(ids)).equal(ids)
    with pytest.raises(ValueError, match="cycle"):
        vocab.encode("a=b,b=a,a+1=?")
    with pytest.raises(ValueError, match="never assigned"):
        vocab.encode("b=e,b+1=?")
    with pytest.raises(ValueError):  # the assign_add family has no pointers
        Vocabulary(23, 5, 16).encode("a=17,b=a,b+1=?")


def test_chain_config_trains_the_same_under_another_name_and_loads_with_pointer_text(tmp_path):
    """configs/chain.toml is a 3-layer chain run; docs/chain.md's seeds were trained from a
    copy that differed only in `name`: no random stream reads it. load_run gives a model
    whose to_tokens reads the chain family's text (pointer assignments)."""
    from empirical.runs.load import load_run
    from empirical.runs.rundir import RunDir
    from empirical.train.loop import train_run

    tiny = ["train.steps=4", "task.eval_size=40", "train.eval_every=2", "train.eval_subsample=0",
            "train.checkpoint_every=4", "train.batch_size=16"]  # fmt: skip
    cfg = load_run_config("configs/chain.toml", tiny)
    assert (cfg.task.family, cfg.model.n_layers, tuple(cfg.task.chain_hops)) == ("chain", 3, (1, 2))
    runs = []
    for name in ("chain", "chainD"):
        train_run(load_run_config("configs/chain.toml", [*tiny, f"name={name}"]),
                  tmp_path / name, progress=False)  # fmt: skip
        runs.append([(r["step"], r["train_loss"], r["acc"])
                     for r in RunDir(tmp_path / name).read_metrics()])  # fmt: skip
    assert runs[0] == runs[1]
    model, vocab = load_run(tmp_path / "chain")
    assert isinstance(vocab, ChainVocabulary) and model.vocab is vocab
    text = "a=17,c=4,b=a,d=b,d+c=?"
    tokens = model.to_tokens(text)
    assert tokens.shape == (1, cfg.task.L) and vocab.label(tokens[0]) == 17 + 4
    assert "".join(model.to_str_tokens(text)).startswith("a17")
    assert model(tokens).shape == (1, cfg.task.L, cfg.task.p)
    with pytest.raises(ValueError, match="do not match"):
        model.attach_vocab(ChainVocabulary(23, 5, 16))


def test_sample_command_shows_chain_sequences(capsys):
    from empirical.cli.sample import main

    assert main(["--config", EXAMPLE, "--split", "chain/2var_h2", "--n", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 30
    vocab = family_of(task := example_task()).vocabulary(task)
    assert any(re.search(r"(^|,)[a-j]=[a-j],", line) for line in lines)  # pointers shown
    for line in lines:
        text, label = line.rsplit(" ", 1)
        assert vocab.label(vocab.encode(text)) == int(label)
