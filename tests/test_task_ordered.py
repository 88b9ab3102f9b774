"""Ordered held-out pairs (the authors' form): the split rules, train_pairs_file, and every
consumer of the held-out table (training, evaluation sets, is_held, check_held_out)."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import pytest
import torch
from authors_task import AUTHORS, AUTHORS_PAIRS_FILE

from empirical.config.io import ConfigError
from empirical.config.paths import where_to_point
from empirical.task.assign_add.design import _Ctx
from empirical.task.assign_add.draw import TrainingSampler, support_size
from empirical.task.assign_add.eval_sets import _design
from empirical.task.batch import Batch
from empirical.task.config import task_config
from empirical.task.eval_sets import build_eval_set, build_eval_sets
from empirical.task.pairs import check_held_out, held_out_pairs, is_held, training_generator
from empirical.task.sampler import sample_training_batch

AUTHORS_FILE = AUTHORS_PAIRS_FILE
# a seeded ordered split on the default task
ORD = task_config(held_out_form="ordered", held_out_fraction=0.3)


def ranks_of(pairs: torch.Tensor, p: int) -> set[int]:
    return set((pairs[:, 0] * p + pairs[:, 1]).tolist())


def test_seeded_ordered_split():
    held = held_out_pairs(ORD, 0)
    p = ORD.p
    assert held.shape == (p * p - math.floor(0.7 * p * p), 2) == (ORD.n_held_out, 2)
    r = (held[:, 0] * p + held[:, 1]).tolist()
    assert r == sorted(set(r))  # sorted by x*p + y, unique, not canonicalised
    assert (held[:, 0] > held[:, 1]).any() and (held[:, 0] < held[:, 1]).any()
    assert torch.equal(held, held_out_pairs(ORD, 0))
    assert not torch.equal(held, held_out_pairs(ORD, 1))
    rs = set(r)
    rev = sum((y * p + x) in rs for x, y in held.tolist() if x != y)
    assert 0 < rev < len(held)  # some reverses held out too, most not
    assert check_held_out(ORD, held).equal(held)
    # check_held_out keeps (y, x) as it is for "ordered", canonicalises for "unordered"
    assert check_held_out(ORD, torch.tensor([[5, 2], [1, 3], [5, 2]])).tolist() == [
        [1, 3],
        [5, 2],
    ]
    assert check_held_out(task_config(), torch.tensor([[5, 2]])).tolist() == [[2, 5]]


def test_python_random_split_is_the_stdlib_sample_of_row_major_pairs():
    for p, frac, seed in ((7, 0.3, 3), (13, 0.55, 0), (5, 0.0, 1)):
        cfg = task_config(
            p=p, held_out_form="ordered", held_out_fraction=frac, pair_split="python_random",
            pair_seed=seed,
        )  # fmt: skip
        pool = [(n1, n2) for n1 in range(p) for n2 in range(p)]
        train = set(random.Random(seed).sample(pool, math.floor((1 - frac) * p * p)))
        held = {tuple(x) for x in held_out_pairs(cfg, 99).tolist()}
        assert held == set(pool) - train
    # pair_seed None: the run seed
    cfg = task_config(
        p=7, held_out_form="ordered", held_out_fraction=0.3, pair_split="python_random"
    )
    assert torch.equal(
        held_out_pairs(cfg, 4),
        held_out_pairs(task_config(**{**cfg.__dict__, "pair_seed": 4}), 0),
    )
    assert not torch.equal(held_out_pairs(cfg, 4), held_out_pairs(cfg, 5))


@pytest.mark.skipif(not AUTHORS_FILE.exists(), reason=where_to_point(AUTHORS_FILE))
def test_python_random_split_reproduces_the_authors_train_pairs():
    data = json.loads(AUTHORS_FILE.read_text())
    cfg = task_config(**AUTHORS)
    train = {tuple(x) for x in data["train_pairs"]}
    held = {tuple(x) for x in held_out_pairs(cfg, 0).tolist()}
    everything = {(a, b) for a in range(59) for b in range(59)}
    assert len(train) == 2436 and len(held) == 1045
    assert everything - held == train
    # and the file itself, read as train_pairs_file, gives the same table
    from_file = task_config(**{**AUTHORS, "train_pairs_file": str(AUTHORS_FILE)})
    assert torch.equal(held_out_pairs(from_file, 0), held_out_pairs(cfg, 0))
    assert from_file.n_held_out == 1045


def test_training_never_shows_a_held_ordered_pair_but_shows_reverses():
    held = held_out_pairs(ORD, 0)
    p = ORD.p
    b = sample_training_batch(ORD, 60_000, training_generator(0), held_out=held)
    seen = ranks_of(b.operand_values, p)
    hs = ranks_of(held, p)
    assert not seen & hs
    assert not is_held(b.operand_values, held, ORD).any()
    # reverses of held pairs (when not held themselves) are trained, in every kind
    rev = {y * p + x for x, y in held.tolist()} - hs
    assert len(rev) > 500
    for k in range(3):
        assert len(ranks_of(b.operand_values[b.n_vars == k], p) & rev) > 100, k
    # (nearly) every training pair appears: about 9 draws each
    assert len(seen) > 0.99 * (p * p - len(hs))
    # same-variable operands `c+c` take x only where (x, x) is not held
    same = (b.n_vars == 2) & (b.operand_vars[:, 0] == b.operand_vars[:, 1])
    diag_held = {x for x, y in held.tolist() if x == y}
    assert same.any() and not set(b.operand_values[same, 0].tolist()) & diag_held


def test_is_held_reads_the_form():
    held = torch.tensor([[1, 2]])
    pairs = torch.tensor([[1, 2], [2, 1], [0, 0]])
    assert is_held(pairs, held, 5).tolist() == [True, True, False]  # int p: unordered
    assert is_held(pairs, held, 5, form="ordered").tolist() == [True, False, False]
    cfg = task_config(p=5, K=3, max_assignments=2, r1=(), r2=(), held_out_form="ordered")
    assert is_held(pairs, held, cfg).tolist() == [True, False, False]
    unordered = task_config(p=5, K=3, max_assignments=2, r1=(), r2=())
    assert is_held(pairs, held, unordered).tolist() == [True, True, False]


def test_eval_sets_follow_ordered_held_out_pairs():
    cfg = task_config(**{**ORD.__dict__, "eval_size": 3000})
    sets = build_eval_sets(cfg, 0)
    held = held_out_pairs(cfg, 0)
    assert torch.equal(sets.held_out, held)
    hs = ranks_of(held, cfg.p)
    for name, batch in sets.items():
        r = ranks_of(batch.operand_values, cfg.p)
        pair_set = name.endswith(("/pair", "/both")) or name == "curated/held_out_pairs"
        assert (r <= hs) if pair_set else not (r & hs), name
    # curated/held_out_pairs: every held ordered pair in each of the 4 forms
    b = sets["curated/held_out_pairs"]
    form = torch.where(
        b.n_vars == 2,
        3,
        torch.where(b.operand_vars[:, 0] >= 0, 1, torch.where(b.n_vars == 1, 2, 0)),
    )
    cells = set(zip((b.operand_values[:, 0] * cfg.p + b.operand_values[:, 1]).tolist(),
                    form.tolist(), strict=True))  # fmt: skip
    assert len(cells) == 4 * len(held)


def test_tiny_ordered_task_supports_and_training_reach():
    """Enumerated sets have the exact support, and training (rows mix, clamped count, gaps)
    reaches exactly the union of the in-distribution supports."""
    cfg = task_config(
        p=3, K=2, L=8, max_assignments=2, r1=("a",), r2=(), held_out_form="ordered",
        held_out_fraction=0.35, mix="rows", assignment_count="clamped", padding="gaps",
    )  # fmt: skip
    sets = build_eval_sets(cfg, 0)
    held = sets.held_out
    assert len(held) == 9 - math.floor(0.65 * 9)
    ctx = _Ctx(cfg, "cpu")
    for name, batch in sets.items():
        assert sets.enumerated[name]
        n = support_size(ctx, _design(cfg, name, held))
        assert len(batch) == n == len({tuple(r) for r in batch.tokens.tolist()}), name
    union = Batch.cat([sets[f"{k}var/ind"] for k in range(3)])
    support = {tuple(r) for r in union.tokens.tolist()}
    for tables in (True, False):
        b = TrainingSampler(cfg, held, tables=tables).sample(40_000, training_generator(0))
        assert {tuple(r) for r in b.tokens.tolist()} == support


# ---------------------------------------------------------------------- train_pairs_file
SMALL = dict(p=7, K=3, max_assignments=2, r1=(), r2=(), held_out_form="ordered")


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_train_pairs_file_round_trip(tmp_path, monkeypatch):
    seeded = task_config(**SMALL, held_out_fraction=0.4)
    held = held_out_pairs(seeded, 3)
    hs = {tuple(x) for x in held.tolist()}
    train = [[a, b] for a in range(7) for b in range(7) if (a, b) not in hs]
    random.Random(0).shuffle(train)
    for name, data in (
        ("list.json", train),
        ("object.json", {"p": 7, "rule": "test", "train_pairs": train}),
        ("no_p.json", {"train_pairs": train}),
    ):
        path = write(tmp_path / name, data)
        cfg = task_config(**SMALL, train_pairs_file=str(path), held_out_fraction=0.9)
        assert torch.equal(held_out_pairs(cfg, 0), held), name
        assert cfg.n_held_out == len(held)
    # relative paths: from the current working directory
    monkeypatch.chdir(tmp_path)
    cfg = task_config(**SMALL, train_pairs_file="list.json")
    assert torch.equal(held_out_pairs(cfg, 5), held)
    b = sample_training_batch(cfg, 4000, training_generator(0), held_out=held_out_pairs(cfg, 0))
    assert not ranks_of(b.operand_values, 7) & ranks_of(held, 7)
    # a rewritten file is read again (cache keyed by path and modification time)
    write(tmp_path / "list.json", train[:-1])
    st = os.stat("list.json")
    os.utime("list.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert len(held_out_pairs(cfg, 0)) == len(held) + 1
    # every ordered pair listed: nothing held out
    write(tmp_path / "all.json", [[a, b] for a in range(7) for b in range(7)])
    assert held_out_pairs(task_config(**SMALL, train_pairs_file="all.json"), 0).shape == (0, 2)


BAD_FILES = [
    (None, "cannot read it"),
    ("{not json", "not valid JSON"),
    ('"pairs"', "expected a list of [n1, n2] pairs"),
    ('{"pairs": []}', 'must hold the list of pairs under "train_pairs"'),
    ('{"p": 11, "train_pairs": [[0, 1]]}', "the file is for p = 11, but task.p = 7"),
    ("[]", "lists no pair, which leaves no training pair"),
    ('{"train_pairs": []}', "lists no pair"),
    ("[[0, 1], [2]]", "entry 1 is [2], not a pair [n1, n2] of integers"),
    ('[[0, 1], [2, "3"]]', "entry 1 is [2, '3'], not a pair"),
    ("[[0, 1], [2, 1.5]]", "not a pair [n1, n2] of integers"),
    ("[[0, 1], [2, 7]]", "entry 1 [2, 7] is out of range: numbers must lie in 0..6"),
    ("[[0, 1], [-1, 0]]", "entry 1 [-1, 0] is out of range"),
    ("[[0, 1], [3, 4], [0, 1]]", "lists [0, 1] 2 times; each training pair must appear once"),
]


@pytest.mark.parametrize("content, message", BAD_FILES)
def test_bad_train_pairs_files(tmp_path, content, message):
    path = tmp_path / "pairs.json"
    if content is not None:
        path.write_text(content)
    cfg = task_config(**SMALL, train_pairs_file=str(path))
    with pytest.raises(ConfigError) as info:
        held_out_pairs(cfg, 0)
    text = str(info.value)
    assert message in text and "task.train_pairs_file" in text and str(path) in text


def test_train_pairs_file_errors_surface_where_the_table_is_built(tmp_path):
    cfg = task_config(**SMALL, train_pairs_file=str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="cannot read it"):
        build_eval_set(cfg, 0, "0var/pair")
    with pytest.raises(ConfigError, match="cannot read it"):
        _ = cfg.n_held_out
