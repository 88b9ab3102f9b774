"""Exact enumeration of the populations: counts, brute-force agreement, structure."""

import math
from collections import Counter

import pytest
import torch

from disentangled import Basis, SimConfig, brute_force_population, iter_population, population_size
from disentangled.population import iter_compact


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _rows(X, y, w):
    return Counter(
        (tuple(x.flatten().tolist()), int(lab), round(float(wt), 15))
        for x, lab, wt in zip(X, y, w, strict=True)
    )


CONFIGS = [
    SimConfig(p=3, K=2),
    SimConfig(p=3, K=2, operand_order="swapped"),
    SimConfig(p=3, K=2, operand_order="mixed", L=10),
    SimConfig(p=3, K=3, L=12),
]


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("kind", ["0var", "1var", "2var"])
def test_enumeration_matches_brute_force(cfg, kind):
    chunks = list(iter_population(cfg, kind, chunk_size=97))
    X = torch.cat([c.inputs for c in chunks])
    y = torch.cat([c.labels for c in chunks])
    w = torch.cat([c.weights for c in chunks])
    ref = brute_force_population(cfg, kind)
    n_ops = {"0var": cfg.p**2, "1var": cfg.p * cfg.K, "2var": cfg.K**2}[kind]
    if kind == "1var" and cfg.operand_order == "mixed":
        n_ops *= 2
    expected = math.factorial(cfg.K) * cfg.p**cfg.K * n_ops
    assert population_size(cfg, kind) == expected == X.shape[0] == ref.inputs.shape[0]
    assert X.dtype == torch.float64 and X.shape[1:] == (cfg.L, Basis.from_config(cfg).dim)
    assert math.isclose(float(w.sum()), 1.0, rel_tol=1e-12)
    assert _rows(X, y, w) == _rows(ref.inputs, ref.labels, ref.weights)


@pytest.mark.parametrize("kind", ["0var", "1var", "2var"])
def test_structure_of_every_sequence(kind):
    cfg = SimConfig(p=3, K=3, operand_order="mixed")
    b = Basis.from_config(cfg)
    X = torch.cat([c.inputs for c in iter_population(cfg, kind)])
    y = torch.cat([c.labels for c in iter_population(cfg, kind)])
    nums = X[:, :, : cfg.p]
    # each position has exactly one positional embedding, at its own index
    torch.testing.assert_close(
        X[:, :, b.pos(0) : b.pos(0) + cfg.L],
        torch.eye(cfg.L).double().expand_as(X[:, :, b.pos(0) : b.pos(0) + cfg.L]),
    )
    for u in range(cfg.K):
        # variable u appears once in the assignment region, its number right after it
        in_region = X[:, : cfg.n_assign_positions, b.v(u)]
        assert torch.all(in_region.sum(1) == 1)
        s = in_region.argmax(1)
        nxt = X[torch.arange(len(X)), s + 1]
        assert torch.all(nxt[:, b.bar_v(u)] == 1) and torch.all(nxt[:, : cfg.p].sum(1) == 1)
    # ebar components: one per assignment number, none outside the region except the query
    bars = X[:, :, b.bar_v(0) : b.bar_v(0) + cfg.K].sum(2)
    assert torch.all(bars[:, : cfg.n_assign_positions].sum(1) == cfg.K)
    assert torch.all(bars[:, cfg.n_assign_positions : cfg.L - 1] == 0)
    assert torch.all(X[:, :, b.bar_n(0) : b.bar_n(0) + cfg.p] == 0)
    # every position holds exactly one token
    tokens = X[:, :, : b.pos(0)].sum(2)
    assert torch.all(tokens == 1)
    query = X[:, -1]
    assert torch.all(query[:, b.eq] == 1)
    n_var_operands = X[:, cfg.L - 3 : cfg.L - 1, b.v(0) : b.v(0) + cfg.K].sum((1, 2))
    assert torch.all(query[:, b.bar_v(0) : b.bar_v(0) + cfg.K].sum(1) == n_var_operands)
    assert torch.all(n_var_operands == {"0var": 0, "1var": 1, "2var": 2}[kind])
    # the label is the sum of the operand values
    total = torch.zeros(len(X), dtype=torch.long)
    for t in (cfg.L - 3, cfg.L - 2):
        direct = nums[:, t].argmax(1)
        is_num = nums[:, t].sum(1) == 1
        var = X[:, t, b.v(0) : b.v(0) + cfg.K].argmax(1)
        slot = X[torch.arange(len(X)), :, b.v(0) + var][:, : cfg.n_assign_positions].argmax(1)
        bound_value = nums[torch.arange(len(X)), slot + 1].argmax(1)
        total += torch.where(is_num, direct, bound_value)
    assert torch.equal(total % cfg.p, y)


def test_slot_orders_are_all_permutations_uniformly():
    cfg = SimConfig(p=3, K=3)
    b = Basis.from_config(cfg)
    orders = Counter()
    for c in iter_population(cfg, "2var"):
        var_at = c.inputs[:, 0 : 2 * cfg.K : 2, b.v(0) : b.v(0) + cfg.K].argmax(2)
        orders.update(tuple(r) for r in var_at.tolist())
    assert len(orders) == math.factorial(cfg.K)
    assert len(set(orders.values())) == 1


def test_chunking_does_not_change_the_population():
    cfg = SimConfig(p=3, K=3)
    a = [c.tok for c in iter_compact(cfg, "1var", chunk_size=50, cache=False)]
    b = [c.tok for c in iter_compact(cfg, "1var", chunk_size=10_000)]
    assert torch.equal(torch.cat(a), torch.cat(b))
    assert max(len(t) for t in a) == 50


def test_large_population_streams():
    cfg = SimConfig(p=11, K=6)
    assert population_size(cfg, "1var") == 720 * 11**6 * 11 * 6
    first = next(iter_compact(cfg, "1var", chunk_size=1000))
    assert len(first) == 1000 and first.bound.sum(1).eq(1).all()
