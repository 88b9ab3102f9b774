"""Training batches: labels, restrictions, reachability, distribution, determinism."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from test_task_helpers import ref_parse_text, ref_parse_tokens

from empirical.config.io import ConfigError
from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.batch import Batch
from empirical.task.config import task_config
from empirical.task.eval_sets import build_eval_set
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import get_training_sampler, sample_training_batch

CFG = task_config()
SEED = 0
N_BIG = 60_000


@pytest.fixture(scope="module")
def big():
    held = held_out_pairs(CFG, SEED)
    batch = sample_training_batch(CFG, N_BIG, training_generator(SEED), held_out=held)
    return batch, held


def held_set(held):
    return {(x, y) for x, y in held.tolist()}


def test_labels_and_fields_match_an_independent_parse_of_the_text(big):
    batch, _ = big
    v = family_of(CFG).vocabulary(CFG)
    n = 15_000
    texts = v.decode(batch.tokens[:n])
    token_forms = v.decode_tokens(batch.tokens[:n])
    labels = batch.labels[:n].tolist()
    values = batch.operand_values[:n].tolist()
    vpos = batch.value_positions[:n].tolist()
    ovars = batch.operand_vars[:n].tolist()
    nvars = batch.n_vars[:n].tolist()
    for i in range(n):
        ref = ref_parse_text(texts[i], CFG.p)
        tok = ref_parse_tokens(token_forms[i], CFG.L)
        assert labels[i] == ref["label"], texts[i]
        assert tuple(values[i]) == ref["values"]
        assert nvars[i] == sum(op.isalpha() for op in ref["ops"])
        block_of = {letter: pos for pos, letter, _ in tok["blocks"]}
        for k, op in enumerate(ref["ops"]):
            if op.isalpha():
                assert ovars[i][k] == ord(op) - ord("a")
                assert vpos[i][k] == block_of[op] + 1
            else:
                assert ovars[i][k] == -1 and vpos[i][k] == CFG.L - 3 + k
        assert CFG.min_assignments <= len(ref["assign"]) <= CFG.max_assignments


def test_no_held_out_pair_in_any_form_and_no_restricted_position(big):
    batch, held = big
    v = family_of(CFG).vocabulary(CFG)
    hs = held_set(held)
    texts = v.decode(batch.tokens[:20_000])
    for text in texts:
        ref = ref_parse_text(text, CFG.p)
        x, y = ref["values"]
        assert (min(x, y), max(x, y)) not in hs, text
        a, b = ref["ops"]
        assert a not in CFG.r1 and b not in CFG.r2, text
    # all rows, straight from the tokens
    tok = batch.tokens
    for k, banned in ((CFG.L - 3, CFG.r1), (CFG.L - 2, CFG.r2)):
        for letter in banned:
            assert not (tok[:, k] == v.var_id(letter)).any()
    x, y = batch.operand_values[:, 0], batch.operand_values[:, 1]
    lo, hi = torch.minimum(x, y), torch.maximum(x, y)
    held_mask = torch.zeros(CFG.p, CFG.p, dtype=torch.bool)
    held_mask[held[:, 0], held[:, 1]] = True
    assert not held_mask[lo, hi].any()
    # operand values really are what the tokens resolve to
    rows = torch.arange(len(batch))
    for k in range(2):
        assert torch.equal(tok[rows, batch.value_positions[:, k]], batch.operand_values[:, k])


def test_everything_reachable(big):
    batch, held = big
    v = family_of(CFG).vocabulary(CFG)
    tok = batch.tokens
    region = tok[:, : CFG.region]
    is_var = (region >= CFG.p) & (region < CFG.p + CFG.K)
    # every variable assigned, every value assigned and at each operand position
    assert set(region[is_var].unique().tolist()) == set(range(CFG.p, CFG.p + CFG.K))
    after_var = torch.zeros_like(is_var)
    after_var[:, 1:] = is_var[:, :-1]
    assert set(region[after_var].unique().tolist()) == set(range(CFG.p))
    for k in (CFG.L - 3, CFG.L - 2):
        nums = tok[:, k][tok[:, k] < CFG.p]
        assert set(nums.unique().tolist()) == set(range(CFG.p))
    # every allowed variable at each operand position, and same-variable 2-var sequences
    assert set(batch.operand_vars[:, 0].unique().tolist()) == {-1, *CFG.allowed_vars(0)}
    assert set(batch.operand_vars[:, 1].unique().tolist()) == {-1, *CFG.allowed_vars(1)}
    same = (batch.operand_vars[:, 0] == batch.operand_vars[:, 1]) & (batch.n_vars == 2)
    assert same.any()
    # every allowed (unordered) pair of values
    x, y = batch.operand_values[:, 0], batch.operand_values[:, 1]
    seen = set((torch.minimum(x, y) * CFG.p + torch.maximum(x, y)).unique().tolist())
    assert len(seen) == CFG.n_pairs - CFG.n_held_out
    # every layout: the set of block start positions, Σ_n C(R - n, n) of them
    R, A = CFG.region, CFG.max_assignments
    layouts = Counter()
    for row in is_var.tolist():
        layouts[tuple(i for i, b in enumerate(row) if b)] += 1
    expected = sum(math.comb(R - n, n) for n in range(CFG.min_assignments, A + 1))
    assert len(layouts) == expected == 210
    assert all(all(b - a >= 2 for a, b in zip(lay, lay[1:], strict=False)) for lay in layouts)
    # placement uniform given n: chi-square per n with a loose bound
    for n in range(1, A + 1):
        counts = [c for lay, c in layouts.items() if len(lay) == n]
        dof = len(counts) - 1
        mean = sum(counts) / len(counts)
        chi2 = sum((c - mean) ** 2 / mean for c in counts)
        assert chi2 < dof + 6 * math.sqrt(2 * dof) + 10, (n, chi2, dof)
    del v, held


def test_mix_positions_and_counts(big):
    batch, _ = big
    nv = batch.n_vars
    for k, share in enumerate((CFG.frac_0var, CFG.frac_1var, CFG.frac_2var)):
        assert abs((nv == k).float().mean().item() - share) < 0.01
    one = nv == 1
    first = (batch.operand_vars[:, 0] >= 0) & one
    assert abs(first.sum().item() / one.sum().item() - 0.5) < 0.015
    # number of assignments: uniform over [max(min, distinct operand variables), max]
    region = batch.tokens[:, : CFG.region]
    n_assign = ((region >= CFG.p) & (region < CFG.p + CFG.K)).sum(1)
    zero = n_assign[nv == 0]
    for n in range(1, 5):
        assert abs((zero == n).float().mean().item() - 0.25) < 0.02
    distinct2 = (nv == 2) & (batch.operand_vars[:, 0] != batch.operand_vars[:, 1])
    assert n_assign[distinct2].min().item() == 2
    # distractor values uniform: assignment values to non-operand variables
    mean_value = (
        batch.tokens[:, : CFG.region][
            torch.cat(
                [
                    torch.zeros_like(region[:, :1], dtype=torch.bool),
                    (region[:, :-1] >= CFG.p) & (region[:, :-1] < CFG.p + CFG.K),
                ],
                1,
            )
        ]
        .float()
        .mean()
        .item()
    )
    assert abs(mean_value - (CFG.p - 1) / 2) < 1.0


def test_other_mixes():
    cfg = task_config(frac_1var=0.2, ratio_2var_to_0var=3.0, allow_same_variable_operands=False)
    held = held_out_pairs(cfg, 1)
    b = sample_training_batch(cfg, 20_000, training_generator(1), held_out=held)
    shares = [(b.n_vars == k).float().mean().item() for k in range(3)]
    assert shares == pytest.approx([0.2, 0.2, 0.6], abs=0.015)
    two = b.n_vars == 2
    assert not (b.operand_vars[two, 0] == b.operand_vars[two, 1]).any()
    cfg = task_config(frac_1var=0.0, ratio_2var_to_0var=0.0)
    b = sample_training_batch(cfg, 2000, training_generator(1), held_out=held_out_pairs(cfg, 1))
    assert (b.n_vars == 0).all()


def test_determinism_per_seed():
    held = held_out_pairs(CFG, 3)
    a = sample_training_batch(CFG, 512, training_generator(3), held_out=held)
    b = sample_training_batch(CFG, 512, training_generator(3), held_out=held)
    assert a.equal(b)
    c = sample_training_batch(CFG, 512, training_generator(4), held_out=held)
    assert not torch.equal(a.tokens, c.tokens)
    g = training_generator(3)
    first = sample_training_batch(CFG, 512, g, held_out=held)
    second = sample_training_batch(CFG, 512, g, held_out=held)
    assert first.equal(a) and not torch.equal(first.tokens, second.tokens)
    # a sampler object and the cached function draw the same stream
    s = TrainingSampler(CFG, held)
    assert s.sample(512, training_generator(3)).equal(a)


def test_training_support_is_exactly_the_in_distribution_support():
    """On a tiny task, sampling reaches every in-distribution sequence and nothing else."""
    cfg = task_config(p=3, K=2, L=8, max_assignments=2, r1=("a",), r2=(), held_out_fraction=0.35)
    held = held_out_pairs(cfg, 0)
    union = Batch.cat([build_eval_set(cfg, 0, f"{k}var/ind", held_out=held)[0] for k in range(3)])
    support = {tuple(r) for r in union.tokens.tolist()}
    assert len(support) == len(union)  # enumerated once each
    b = sample_training_batch(cfg, 40_000, training_generator(0), held_out=held)
    seen = {tuple(r) for r in b.tokens.tolist()}
    assert seen == support


def test_held_out_argument_is_required_and_checked():
    with pytest.raises(ValueError, match="held_out"):
        sample_training_batch(CFG, 8, training_generator(0))
    none = torch.zeros((0, 2), dtype=torch.long)
    b = sample_training_batch(CFG, 8, training_generator(0), held_out=none)
    assert len(b) == 8
    with pytest.raises(ValueError, match="0..96"):
        sample_training_batch(CFG, 8, training_generator(0), held_out=torch.tensor([[0, 97]]))
    assert len(sample_training_batch(CFG, 0, training_generator(0), held_out=none)) == 0


def test_every_diagonal_held_out_with_only_same_variable_pairs_is_an_error():
    cfg = task_config(p=2, K=1, L=8, max_assignments=1, r1=(), r2=(), held_out_fraction=0.6)
    diag_seed = next(s for s in range(100) if held_out_pairs(cfg, s).tolist() == [[0, 0], [1, 1]])
    with pytest.raises(ConfigError, match="same-variable"):
        sample_training_batch(
            cfg, 8, training_generator(diag_seed), held_out=held_out_pairs(cfg, diag_seed)
        )


def test_batch_methods():
    b = sample_training_batch(CFG, 10, training_generator(0), held_out=held_out_pairs(CFG, 0))
    assert len(b) == 10 and len(b.slice(2, 5)) == 3 and len(b[3]) == 1 and len(b[-1]) == 1
    assert b[torch.arange(10) % 2 == 0].tokens.shape == (5, CFG.L)
    assert b.to("cpu").equal(b) and Batch.cat([b.slice(0, 4), b.slice(4, 10)]).equal(b)
    for name in ("tokens", "labels", "n_vars", "operand_values", "value_positions"):
        assert getattr(b, name).dtype == torch.long


def test_distractor_values_do_not_follow_the_operands(big):
    """Assigned values of non-operand variables are uniform, independent of the operands."""
    batch, _ = big
    p, R = CFG.p, CFG.region
    tok = batch.tokens
    is_var = (tok[:, :R] >= p) & (tok[:, :R] < p + CFG.K)
    var_then_value = is_var[:, :-1]
    values = tok[:, 1:R]
    ops = batch.operand_vars
    not_operand = (tok[:, : R - 1] - p != ops[:, :1]) & (tok[:, : R - 1] - p != ops[:, 1:])
    distractor = var_then_value & not_operand
    for k in range(2):
        same = (values == batch.operand_values[:, k : k + 1]) & distractor
        rate = same.sum().item() / distractor.sum().item()
        assert abs(rate - 1 / p) < 0.004, rate


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # default: tabulated lists and layouts, here forced to the sort-based path
        dict(K=26, L=16, r1=("d", "e"), r2=("b", "e")),  # lists too many: permutation table
        dict(K=12, L=40, max_assignments=10, min_assignments=2),  # nothing tabulated
    ],
)
def test_sort_based_paths(kwargs):
    cfg = task_config(**kwargs)
    held = held_out_pairs(cfg, 2)
    tables = bool(kwargs)
    s = TrainingSampler(cfg, held, tables=tables)
    if kwargs.get("K") == 26:
        assert s.ctx.canon is None and s.ctx.perms is not None and s.ctx.layouts is not None
    if kwargs.get("L") == 40:
        assert s.ctx.canon is None and s.ctx.perms is None and s.ctx.layouts is None
    b = s.sample(6000, training_generator(2))
    v = family_of(cfg).vocabulary(cfg)
    hs = held_set(held)
    counts = Counter()
    for text, label in zip(v.decode(b.tokens), b.labels.tolist(), strict=True):
        ref = ref_parse_text(text, cfg.p)
        assert ref["label"] == label
        x, y = ref["values"]
        assert (min(x, y), max(x, y)) not in hs
        assert ref["ops"][0] not in cfg.r1 and ref["ops"][1] not in cfg.r2
        assert cfg.min_assignments <= len(ref["assign"]) <= cfg.max_assignments
        counts[len(ref["assign"])] += 1
    rows = torch.arange(len(b))
    for k in range(2):
        assert torch.equal(b.tokens[rows, b.value_positions[:, k]], b.operand_values[:, k])
    assert set(counts) == set(range(cfg.min_assignments, cfg.max_assignments + 1))


def test_sort_based_and_tabulated_draws_agree_in_distribution():
    cfg = task_config()
    held = held_out_pairs(cfg, 0)
    stats = []
    for tables in (True, False):
        b = TrainingSampler(cfg, held, tables=tables).sample(40_000, training_generator(9))
        region = b.tokens[:, : cfg.region]
        is_var = (region >= cfg.p) & (region < cfg.p + cfg.K)
        first_var = torch.where(is_var.any(1), is_var.float().argmax(1), -1)
        # where the first block sits, which variable comes first, the operand's rank
        first_token = region.gather(1, first_var.clamp(min=0)[:, None])[:, 0]
        stats.append(
            (
                torch.bincount(first_var + 1, minlength=cfg.region + 1).float() / len(b),
                torch.bincount(first_token - cfg.p, minlength=cfg.K).float() / len(b),
                torch.bincount(is_var.sum(1), minlength=5).float() / len(b),
            )
        )
    for a, b in zip(*stats, strict=True):
        assert (a - b).abs().max().item() < 0.015, (a, b)


def test_sort_based_path_reaches_exactly_the_support():
    cfg = task_config(p=3, K=2, L=8, max_assignments=2, r1=("a",), r2=(), held_out_fraction=0.35)
    held = held_out_pairs(cfg, 0)
    union = Batch.cat([build_eval_set(cfg, 0, f"{k}var/ind", held_out=held)[0] for k in range(3)])
    support = {tuple(r) for r in union.tokens.tolist()}
    b = TrainingSampler(cfg, held, tables=False).sample(40_000, training_generator(0))
    assert {tuple(r) for r in b.tokens.tolist()} == support


def test_batch_int_index_bounds():
    b = sample_training_batch(CFG, 4, training_generator(0), held_out=held_out_pairs(CFG, 0))
    assert b[-4].equal(b[0]) and b[3].equal(b.slice(3, 4))
    with pytest.raises(IndexError):
        b[4]
    with pytest.raises(TypeError):
        list(b)


def test_sampler_cache_is_not_fooled_by_a_reused_id(monkeypatch):
    """CPython gives a new object the id of a freed one. A held-out table at a reused id must
    not get the freed table's sampler: it is checked, and its own pairs are held out. Every
    object gets one id here, the worst case of reuse."""
    from empirical.task import sampler as sampler_module

    monkeypatch.setattr(sampler_module, "id", lambda obj: 4242, raising=False)
    monkeypatch.setattr(sampler_module, "_FAST_KEYS", {})
    first = torch.zeros((0, 2), dtype=torch.long)
    assert get_training_sampler(CFG, first).held_out.shape == (0, 2)
    assert get_training_sampler(CFG, first) is get_training_sampler(CFG, first)
    with pytest.raises(ValueError, match=f"0..{CFG.p - 1}"):
        get_training_sampler(CFG, torch.tensor([[0, CFG.p]]))
    assert get_training_sampler(CFG, torch.tensor([[1, 2]])).held_out.tolist() == [[1, 2]]
    assert get_training_sampler(CFG, first).held_out.shape == (0, 2)
