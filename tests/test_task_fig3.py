"""The exact Figure-3 evaluation sets (task.extra_eval_sets): every cell once, nothing else."""

from __future__ import annotations

import pytest
import torch
from test_task_helpers import ref_parse_text

from empirical.task.assign_add.config import EVAL_SET_NAMES, EXTRA_EVAL_SET_NAMES
from empirical.task.config import TaskConfig, task_config
from empirical.task.eval_sets import build_eval_set, build_eval_sets, load_eval_sets, save_eval_sets
from empirical.task.pairs import held_out_pairs
from empirical.task.registry import family_of

SMALL = task_config(
    p=5,
    K=4,
    L=12,
    max_assignments=3,
    r1=("d",),
    r2=("a", "c"),
    held_out_form="ordered",
    held_out_fraction=0.4,
    padding="gaps",
    eval_size=10,  # the fig3 sets ignore it
    extra_eval_sets=EXTRA_EVAL_SET_NAMES,
)  # allow_same_variable_operands stays true: the union still has distinct variables only


def expected_2var_cells(cfg: TaskConfig, held: torch.Tensor) -> set[tuple[int, int, int, int]]:
    """(x, y, v1, v2) by the definition, with plain loops."""
    p, K = cfg.p, cfg.K
    letters = cfg.letters
    r1 = {letters.index(v) for v in cfg.r1}
    r2 = {letters.index(v) for v in cfg.r2}
    if cfg.held_out_form == "ordered":
        hs = {tuple(x) for x in held.tolist()}
    else:
        hs = {(x, y) for x, y in held.tolist()} | {(y, x) for x, y in held.tolist()}
    cells = set()
    for x in range(p):
        for y in range(p):
            for v1 in range(K):
                for v2 in range(K):
                    if v1 == v2:
                        continue
                    bad1, bad2 = v1 in r1, v2 in r2
                    if (x, y) in hs:
                        ok = not bad1 and not bad2
                    else:
                        ok = bad1 != bad2 or (bad1 and bad2)
                    if ok:
                        cells.add((x, y, v1, v2))
    return cells


def check_rows(cfg: TaskConfig, batch) -> None:
    v = family_of(cfg).vocabulary(cfg)
    for text, label, vals in zip(
        v.decode(batch.tokens), batch.labels.tolist(), batch.operand_values.tolist(), strict=True
    ):
        ref = ref_parse_text(text, cfg.p)
        assert ref["label"] == label and ref["values"] == tuple(vals), text


@pytest.mark.parametrize("form", ["ordered", "unordered"])
def test_fig3_sets_cover_every_cell_exactly_once(form):
    cfg = task_config(**{**SMALL.__dict__, "held_out_form": form})
    sets = build_eval_sets(cfg, 0)
    held = held_out_pairs(cfg, 0)
    assert list(sets) == [n for n in EVAL_SET_NAMES if n in sets] + list(EXTRA_EVAL_SET_NAMES)
    # 2-var union
    b = sets["fig3/2var_union"]
    assert sets.enumerated["fig3/2var_union"]
    cells = [
        (x, y, v1, v2)
        for (x, y), (v1, v2) in zip(b.operand_values.tolist(), b.operand_vars.tolist(), strict=True)
    ]
    expected = expected_2var_cells(cfg, held)
    assert len(cells) == len(set(cells)) == len(expected)
    assert set(cells) == expected
    assert (b.n_vars == 2).all()
    check_rows(cfg, b)
    counts = torch.bincount(
        ((b.tokens[:, : cfg.region] >= cfg.p) & (b.tokens[:, : cfg.region] < cfg.p + cfg.K)).sum(1)
    )
    assert counts[:2].sum() == 0 and (counts[2:] > 0).all() and len(counts) == 4  # 2..3
    # 0-var over held-out pairs: every held-out ordered pair once
    z = sets["fig3/0var_held_out"]
    assert sets.enumerated["fig3/0var_held_out"] and (z.n_vars == 0).all()
    pairs = [tuple(x) for x in z.operand_values.tolist()]
    if form == "ordered":
        want = {tuple(x) for x in held.tolist()}
    else:
        want = {(x, y) for x, y in held.tolist()} | {(y, x) for x, y in held.tolist()}
    assert len(pairs) == len(set(pairs)) == len(want) and set(pairs) == want
    check_rows(cfg, z)


def test_fig3_sets_are_deterministic_and_change_no_other_set(tmp_path):
    with_extra = build_eval_sets(SMALL, 1)
    again = build_eval_sets(SMALL, 1)
    assert all(with_extra[k].equal(again[k]) for k in with_extra)
    plain = build_eval_sets(task_config(**{**SMALL.__dict__, "extra_eval_sets": ()}), 1)
    assert set(with_extra) - set(plain) == set(EXTRA_EVAL_SET_NAMES)
    assert all(plain[k].equal(with_extra[k]) for k in plain)
    other = build_eval_sets(SMALL, 2)
    assert not torch.equal(other["fig3/2var_union"].tokens, with_extra["fig3/2var_union"].tokens)
    # saved and loaded like the others
    path = tmp_path / "eval_sets.pt"
    save_eval_sets(with_extra, path)
    back = load_eval_sets(path)
    assert all(back[k].equal(with_extra[k]) for k in with_extra)
    assert back.enumerated == with_extra.enumerated
    # build_eval_set takes an extra name whether or not the config lists it
    one = build_eval_set(
        task_config(**{**SMALL.__dict__, "extra_eval_sets": ()}), 1, "fig3/0var_held_out"
    )
    assert one[1] and one[0].equal(with_extra["fig3/0var_held_out"])
    with pytest.raises(KeyError, match="fig3/2var_union"):
        build_eval_set(SMALL, 1, "fig3/unknown")


def test_fig3_sets_that_cannot_exist():
    cfg = task_config(**{**SMALL.__dict__, "max_assignments": 1})  # no distinct variable pair
    sets = build_eval_sets(cfg, 0)
    assert "fig3/2var_union" not in sets and "fig3/0var_held_out" in sets
    nothing = task_config(**{**SMALL.__dict__, "held_out_fraction": 0.0})
    sets = build_eval_sets(nothing, 0)
    assert "fig3/0var_held_out" not in sets
    # no held-out pair: the union is grids (b) and (c) over all pairs
    assert len(sets["fig3/2var_union"]) == len(
        expected_2var_cells(nothing, held_out_pairs(nothing, 0))
    )


def test_authors_fig3_sizes():
    cfg = task_config(
        p=59, K=12, max_assignments=6, r1=("k", "l"), r2=("a", "b"),
        allow_same_variable_operands=False, held_out_form="ordered", held_out_fraction=0.3,
        pair_split="python_random", pair_seed=42, mix="rows", assignment_count="clamped",
        padding="gaps",
    )  # fmt: skip
    union, enumerated = build_eval_set(cfg, 0, "fig3/2var_union")  # its time: bench_task.py
    assert enumerated and len(union) == 1045 * 92 + 2436 * 36 + 2436 * 4 == 193_580
    assert union.tokens.dtype == torch.long and (union.n_vars == 2).all()
    zero, _ = build_eval_set(cfg, 0, "fig3/0var_held_out")
    assert len(zero) == 1045
