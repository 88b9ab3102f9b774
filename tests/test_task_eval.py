"""Evaluation sets: what each set holds, disjointness, sizes, determinism, save/load."""

from __future__ import annotations

import math

import pytest
import torch
from test_task_helpers import ref_parse_text

from empirical.task.assign_add.design import _Ctx
from empirical.task.assign_add.draw import support_size
from empirical.task.assign_add.eval_sets import EVAL_SET_NAMES, _design
from empirical.task.config import task_config
from empirical.task.eval_sets import build_eval_sets, load_eval_sets, save_eval_sets
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import sample_training_batch

CFG = task_config()
SEED = 7


@pytest.fixture(scope="module")
def sets():
    return build_eval_sets(CFG, SEED)


def facts(cfg, batch, held):
    """Per row: held-out pair?, restricted variable position?, re-derived from the tokens."""
    v = family_of(cfg).vocabulary(cfg)
    tok = batch.tokens
    hmask = torch.zeros(cfg.p, cfg.p, dtype=torch.bool)
    if held.numel():
        hmask[held[:, 0], held[:, 1]] = True
    # resolve operand values from the tokens alone
    values = []
    for k in (cfg.L - 3, cfg.L - 2):
        op = tok[:, k]
        val = op.clone()
        is_var = op >= cfg.p
        hit = (tok[:, : cfg.region] == op[:, None]) & is_var[:, None]
        pos = hit.float().argmax(1)
        val[is_var] = tok[torch.arange(len(tok)), pos + 1][is_var]
        values.append(val)
    x, y = values
    pair = hmask[torch.minimum(x, y), torch.maximum(x, y)]
    r1 = torch.tensor([v.var_id(c) for c in cfg.r1] or [-1])
    r2 = torch.tensor([v.var_id(c) for c in cfg.r2] or [-1])
    bad1 = (tok[:, cfg.L - 3, None] == r1).any(1)
    bad2 = (tok[:, cfg.L - 2, None] == r2).any(1)
    n_vars = (tok[:, cfg.L - 3] >= cfg.p).long() + (tok[:, cfg.L - 2] >= cfg.p).long()
    return pair, bad1, bad2, n_vars, x, y


def test_names_sizes_and_definitions(sets):
    held = held_out_pairs(CFG, SEED)
    assert list(sets) == list(EVAL_SET_NAMES)
    assert torch.equal(sets.held_out, held)
    for name, batch in sets.items():
        pair, bad1, bad2, n_vars, x, y = facts(CFG, batch, held)
        assert torch.equal(batch.operand_values, torch.stack([x, y], 1)), name
        assert torch.equal(batch.labels, (x + y) % CFG.p), name
        assert torch.equal(batch.n_vars, n_vars), name
        restricted = bad1 | bad2
        kind, cat = name.split("/")
        if kind != "curated":
            assert len(batch) == CFG.eval_size and not sets.enumerated[name]
            assert (n_vars == int(kind[0])).all(), name
            assert bool(pair.all()) == (cat in ("pair", "both")), name
            assert bool(pair.any()) == (cat in ("pair", "both")), name
            assert bool(restricted.all()) == (cat in ("var", "both")), name
            assert bool(restricted.any()) == (cat in ("var", "both")), name
    # novel orderings: 1-var, allowed pair, variable at the position it never held, seen at
    # the other one (defaults: d first, b second; never e, which is banned from both)
    b = sets["curated/novel_orderings"]
    pair, bad1, bad2, n_vars, _, _ = facts(CFG, b, held)
    assert (n_vars == 1).all() and not pair.any() and (bad1 | bad2).all()
    ops = set(b.operand_vars[b.operand_vars >= 0].tolist())
    assert ops == {1, 3}
    assert set(b.operand_vars[:, 0].tolist()) == {-1, 3}
    # held-out pairs in every form
    b = sets["curated/held_out_pairs"]
    pair, bad1, bad2, n_vars, x, y = facts(CFG, b, held)
    assert pair.all() and not (bad1 | bad2).any()
    form = torch.where(
        n_vars == 2, 3, torch.where(b.operand_vars[:, 0] >= 0, 1, torch.where(n_vars == 1, 2, 0))
    )
    cells = set(zip((x * CFG.p + y).tolist(), form.tolist(), strict=True))
    n_ordered = 2 * len(held) - int((held[:, 0] == held[:, 1]).sum())
    assert len(cells) == 4 * n_ordered
    assert len(b) % len(cells) == 0 and len(b) >= CFG.eval_size


def test_labels_by_reference_parser(sets):
    v = family_of(CFG).vocabulary(CFG)
    for name, batch in sets.items():
        texts = v.decode(batch.tokens[:1500])
        for text, label in zip(texts, batch.labels[:1500].tolist(), strict=True):
            assert ref_parse_text(text, CFG.p)["label"] == label, (name, text)


def test_sets_are_disjoint_from_each_other_and_from_training(sets):
    rows = {name: {tuple(r) for r in b.tokens.tolist()} for name, b in sets.items()}
    main = [n for n in EVAL_SET_NAMES if not n.startswith("curated")]
    for i, a in enumerate(main):
        for b in main[i + 1 :]:
            assert not rows[a] & rows[b], (a, b)
    train = sample_training_batch(
        CFG, 50_000, training_generator(SEED), held_out=held_out_pairs(CFG, SEED)
    )
    seen = {tuple(r) for r in train.tokens.tolist()}
    for name in rows:
        if not name.endswith("/ind"):
            assert not rows[name] & seen, name
    # the in-distribution sets are the training distribution: some overlap is expected
    assert rows["0var/ind"] & seen or rows["1var/ind"] & seen or len(seen) > 0


def test_deterministic_per_seed_and_seeds_differ(sets):
    again = build_eval_sets(CFG, SEED)
    assert all(sets[k].equal(again[k]) for k in sets)
    other = build_eval_sets(CFG, SEED + 1)
    assert not torch.equal(other.held_out, sets.held_out)
    assert all(not torch.equal(sets[k].tokens, other[k].tokens) for k in sets)


def test_save_and_load(sets, tmp_path):
    path = tmp_path / "run" / "eval_sets.pt"
    save_eval_sets(sets, path)
    back = load_eval_sets(path)
    assert list(back) == list(sets) and all(back[k].equal(sets[k]) for k in sets)
    assert torch.equal(back.held_out, sets.held_out) and back.seed == SEED
    assert back.config == sets.config and back.enumerated == sets.enumerated
    assert not list(path.parent.glob("*.tmp"))
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="not an evaluation-set file"):
        load_eval_sets(tmp_path / "junk.pt")


def test_held_out_pairs():
    h = held_out_pairs(CFG, 0)
    assert h.shape == (CFG.n_held_out, 2) and h.dtype == torch.long
    assert (h[:, 0] <= h[:, 1]).all() and len(torch.unique(h, dim=0)) == len(h)
    assert torch.equal(h, held_out_pairs(CFG, 0))
    assert not torch.equal(h, held_out_pairs(CFG, 1))
    assert (h[:, 0] == h[:, 1]).any()  # x == y pairs can be held out
    assert held_out_pairs(task_config(held_out_fraction=0.0), 0).shape == (0, 2)
    half = task_config(held_out_fraction=0.5)
    assert len(held_out_pairs(half, 0)) == math.floor(0.5 * 4753 + 0.5)


def test_tiny_task_enumerates_whole_supports():
    cfg = task_config(p=3, K=2, L=8, max_assignments=2, r1=("a",), r2=(), held_out_fraction=0.35)
    sets = build_eval_sets(cfg, 0)
    held = sets.held_out
    ctx = _Ctx(cfg, "cpu")
    for name, batch in sets.items():
        assert sets.enumerated[name]
        n = support_size(ctx, _design(cfg, name, held))
        assert len(batch) == n == len({tuple(r) for r in batch.tokens.tolist()}), name
    # by hand: 0-var, allowed ordered pairs (9 minus held) * layouts
    n_held_ordered = sum(2 - (x == y) for x, y in held.tolist())
    layouts = 2 * 3 * math.comb(3, 1) + 1 * 2 * 9 * math.comb(2, 2)
    assert len(sets["0var/ind"]) == (9 - n_held_ordered) * layouts
    # a small eval_size samples instead
    small = build_eval_sets(task_config(**{**cfg.__dict__, "eval_size": 20}), 0)
    for k, b in small.items():
        if small.enumerated[k]:
            assert len(b) < 20 and len(b) == len(sets[k])
        else:
            assert len(b) == 20 or k == "curated/held_out_pairs"
    assert not all(small.enumerated.values())


def test_sets_that_cannot_exist_are_left_out():
    no_held = build_eval_sets(task_config(held_out_fraction=0.0, eval_size=100), 0)
    assert set(no_held) == {
        "0var/ind",
        "1var/ind",
        "1var/var",
        "2var/ind",
        "2var/var",
        "curated/novel_orderings",
    }
    no_restr = build_eval_sets(task_config(r1=(), r2=(), eval_size=100), 0)
    assert set(no_restr) == {
        "0var/ind",
        "0var/pair",
        "1var/ind",
        "1var/pair",
        "2var/ind",
        "2var/pair",
        "curated/held_out_pairs",
    }
    both_banned = build_eval_sets(task_config(r1=("e",), r2=("e",), eval_size=100), 0)
    assert "curated/novel_orderings" not in both_banned and "1var/var" in both_banned
