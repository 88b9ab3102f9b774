"""The authors' sampling rules: row-uniform mix, clamped assignment count, gap padding; and
the default config's batches unchanged."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch
from authors_task import AUTHORS as AUTHORS_TASK

from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.config import TaskConfig, task_config
from empirical.task.eval_sets import build_eval_set, build_eval_sets
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.sampler import sample_training_batch

AUTHORS = task_config(**AUTHORS_TASK)
N = 60_000


def within(count: int, n: int, prob: float, sigmas: float = 4.5) -> bool:
    """count of n Bernoulli(prob) draws within `sigmas` standard errors of n * prob."""
    return abs(count - n * prob) <= sigmas * math.sqrt(n * prob * (1 - prob)) + 1


def n_assign(cfg: TaskConfig, tokens: torch.Tensor) -> torch.Tensor:
    region = tokens[:, : cfg.region]
    return ((region >= cfg.p) & (region < cfg.p + cfg.K)).sum(1)


def chi2_ok(observed: Counter, probs: dict) -> tuple[bool, float]:
    """Pearson chi-square of counts against exact probabilities (every key of probs)."""
    assert set(observed) <= set(probs), set(observed) - set(probs)
    n = sum(observed.values())
    stat = sum((observed.get(k, 0) - n * q) ** 2 / (n * q) for k, q in probs.items())
    dof = len(probs) - 1
    return stat < dof + 5 * math.sqrt(2 * max(dof, 1)) + 10, stat


@pytest.fixture(scope="module")
def authors_batch():
    held = held_out_pairs(AUTHORS, 0)
    return sample_training_batch(AUTHORS, N, training_generator(0), held_out=held)


def test_rows_mix_shares(authors_batch):
    b = authors_batch
    shares = AUTHORS.mix_weights
    assert shares == pytest.approx((12 / 42, 20 / 42, 10 / 42))
    for k in range(3):
        assert within(int((b.n_vars == k).sum()), N, shares[k]), k
    one = b.n_vars == 1
    first = int(((b.operand_vars[:, 0] >= 0) & one).sum())
    assert within(first, int(one.sum()), 0.5)
    # 2-var: uniform over the 92 allowed distinct (first, second) pairs
    two = b.n_vars == 2
    pairs = Counter(map(tuple, b.operand_vars[two].tolist()))
    combos = AUTHORS.training_2var_combos()
    assert len(combos) == 92 and all(a != c for a, c in combos)
    assert chi2_ok(pairs, {c: 1 / 92 for c in combos})[0]
    # asymmetric restrictions: 1-var first : second = |allowed first| : |allowed second|
    asym = task_config(**{**AUTHORS.__dict__, "r2": ("a",)})
    b2 = sample_training_batch(
        asym, 30_000, training_generator(1), held_out=held_out_pairs(asym, 0)
    )
    assert asym.mix_weights == pytest.approx((12 / 43, 21 / 43, 10 / 43))
    for k in range(3):
        assert within(int((b2.n_vars == k).sum()), 30_000, asym.mix_weights[k]), k
    one = b2.n_vars == 1
    first = int(((b2.operand_vars[:, 0] >= 0) & one).sum())
    assert within(first, int(one.sum()), 10 / 21)


def test_two_var_frequency_zero_trains_no_2var():
    cfg = task_config(**{**AUTHORS.__dict__, "two_var_frequency": 0.0})
    b = sample_training_batch(cfg, 5000, training_generator(0), held_out=held_out_pairs(cfg, 0))
    assert not (b.n_vars == 2).any()
    assert within(int((b.n_vars == 0).sum()), 5000, 12 / 32)
    sets = build_eval_sets(task_config(**{**cfg.__dict__, "eval_size": 100}), 0)
    assert len(sets["2var/ind"]) == 100  # the evaluation sets still have 2-var sequences


def test_clamped_assignment_count(authors_batch):
    b = authors_batch
    n = n_assign(AUTHORS, b.tokens)
    two = b.n_vars == 2
    m = int(two.sum())
    assert within(int((n[two] == 2).sum()), m, 2 / 6)
    for k in range(3, 7):
        assert within(int((n[two] == k).sum()), m, 1 / 6), k
    for kind in (0, 1):
        sel = n[b.n_vars == kind]
        for k in range(1, 7):
            assert within(int((sel == k).sum()), sel.numel(), 1 / 6), (kind, k)
    # "uniform" on the same task: a 2-var sequence has 2..6 assignments, 1/5 each
    uni = task_config(**{**AUTHORS.__dict__, "assignment_count": "uniform"})
    bu = sample_training_batch(uni, 20_000, training_generator(0), held_out=held_out_pairs(uni, 0))
    nu = n_assign(uni, bu.tokens)[bu.n_vars == 2]
    assert within(int((nu == 2).sum()), nu.numel(), 1 / 5)


def exact_gap_layouts(R: int, n: int) -> dict[tuple[int, ...], float]:
    """Block start positions -> probability when each of the R - 2n pads goes to one of the
    n + 1 gaps uniformly (enumerating every assignment of pads to gaps)."""
    probs: Counter = Counter()
    pads = R - 2 * n
    for gaps in itertools.product(range(n + 1), repeat=pads):
        sizes = [gaps.count(g) for g in range(n + 1)]
        starts = tuple(sum(sizes[: i + 1]) + 2 * i for i in range(n))
        probs[starts] += (n + 1) ** -pads
    return dict(probs)


@pytest.mark.parametrize("tables", [True, False])
def test_gap_padding_is_the_multinomial(tables):
    cfg = task_config(p=5, K=3, L=12, max_assignments=3, r1=(), r2=(), padding="gaps")
    b = TrainingSampler(cfg, held_out_pairs(cfg, 0), tables=tables).sample(
        30_000, training_generator(3)
    )
    region = b.tokens[:, : cfg.region]
    is_var = (region >= cfg.p) & (region < cfg.p + cfg.K)
    by_n: dict[int, Counter] = {}
    for row in is_var.tolist():
        starts = tuple(i for i, v in enumerate(row) if v)
        by_n.setdefault(len(starts), Counter())[starts] += 1
    assert set(by_n) == {1, 2, 3}
    for n, observed in by_n.items():
        exact = exact_gap_layouts(cfg.region, n)
        assert len(exact) == math.comb(cfg.region - n, n)  # every arrangement reachable
        ok, stat = chi2_ok(observed, exact)
        assert ok, (n, stat)
        # and it is not the uniform placement (except where there is one layout)
        if len(exact) > 1:
            assert not chi2_ok(observed, {k: 1 / len(exact) for k in exact})[0], n
    # n = 1, R = 8: the block starts at s with probability C(6, s) / 64
    one = by_n[1]
    total = sum(one.values())
    for s in range(7):
        assert within(one[(s,)], total, math.comb(6, s) / 64), s


def test_default_layouts_unchanged_bit_for_bit():
    """Checksums of the default config's data, computed before the new fields existed."""
    cfg = task_config()
    held = held_out_pairs(cfg, 0)
    b = sample_training_batch(cfg, 2048, training_generator(0), held_out=held)
    w = torch.arange(1, cfg.L + 1)
    assert int((b.tokens * w).sum()) == 24811895
    assert int(b.labels.sum()) == 98416
    assert int((held[:, 0] * 97 + held[:, 1]).sum()) == 1489432
    s = build_eval_set(cfg, 0, "1var/var")[0]
    assert int((s.tokens * w).sum()) == 121590629
    # explicit defaults are the same config
    same = task_config(padding="layouts", assignment_count="uniform", mix="fractions")
    assert same == cfg


@pytest.mark.parametrize(
    "cfg",
    [
        task_config(),
        AUTHORS,
        task_config(K=12, L=40, max_assignments=10, padding="gaps", assignment_count="clamped"),
    ],
    ids=["default", "authors", "untabulated"],
)
def test_0var_sequences_carry_at_least_one_assignment(cfg):
    assert cfg.min_assignments == 1
    held = held_out_pairs(cfg, 0)
    b = sample_training_batch(cfg, 20_000, training_generator(0), held_out=held)
    zero = b.n_vars == 0
    assert zero.sum() > 1000
    n = n_assign(cfg, b.tokens[zero])
    assert int(n.min()) == 1 and int(n.max()) == cfg.max_assignments
    small = task_config(**{**cfg.__dict__, "eval_size": 500})
    for name in ("0var/ind", "0var/pair"):
        s = build_eval_set(small, 0, name)[0]
        assert int(n_assign(cfg, s.tokens).min()) >= 1, name
    s = build_eval_set(small, 0, "fig3/0var_held_out")[0]
    assert int(n_assign(cfg, s.tokens).min()) >= 1
