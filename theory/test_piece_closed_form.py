"""Closed forms of other pieces' G1 (theory.piece_closed_form) against exact numerics: layer 1's
OV rows of the variables and the variable embeddings against `disentangled.pieces` (autograd on
the whole population), G1's memory block at a given attention at `=` and ebar Gram matrix
against `disentangled.gradient.g1` at a W with that attention and a geometry with that Gram
matrix; same tolerance as G1's (theory.claims.compare). A wrong closed form must fail."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch

from disentangled.basis import Basis
from disentangled.fast import Geometry
from disentangled.gradient import g1
from disentangled.pieces import piece_g1, residual_labels, token_labels
from theory import piece_closed_form as pcf
from theory.claims import Point, compare
from theory.g1_closed_form import entry, entry_key
from theory.symbols import DEFAULT_L, K, a, b, p

# G1's four points; the piece model's autograd over the population takes 15-140 s on the larger
# three (2 shared cores), so those are slow checks and the default suite runs p = 7, K = 2
POINTS = [
    pytest.param(pt, marks=[pytest.mark.slow] if pt.p != 7 else [], id=pt.label())
    for pt in (Point(5, 3, 4.0), Point(11, 2, 2.0), Point(3, 4, 3.0), Point(7, 2, 1.0))
]


def _closed_rows(pt: Point, values: dict[str, float], labels: list[str], n_rows: int):
    row = np.zeros(len(labels))
    for col, v in values.items():
        row[labels.index(col)] = v
    return np.tile(row, (n_rows, 1))


@pytest.mark.parametrize("pt", POINTS)
def test_variable_rows_of_layer1_ov_and_embeddings_equal_the_exact_gradient(pt):
    cfg = pt.sim_config()
    exact = piece_g1(cfg, "1var")
    closed = pcf.closed_variable_rows(pt.p, pt.K, pt.beta, pt.L)
    R, T = residual_labels(cfg), token_labels(cfg)
    ov1 = exact["ov1"].numpy()[[R.index(f"v{u}") for u in range(pt.K)]]
    tok = exact["tok"].numpy()[[T.index(f"v{u}") for u in range(pt.K)]]
    for name, got in (("ov1", ov1), ("tok", tok)):
        want = _closed_rows(pt, closed[name], R, pt.K)
        c = compare(want, got, R)
        assert c.ok, (name, c)
        bad = want.copy()
        bad[:, R.index(f"pos{pt.L - 2}")] *= 1 + 1e-6
        assert not compare(bad, got, R).ok  # a wrong coefficient is caught


def test_mean_gbar_is_minus_the_query_position_entry_over_b():
    L = DEFAULT_L
    gT = entry("1var", "fixed", L, *entry_key("=", f"pos{L - 1}", 3, L))
    assert sp.simplify(pcf.mean_gbar(L) + gT / b) == 0
    assert sp.simplify(pcf.mean_gbar(L) - 4 * a * b * (p - 1) / p) == 0


def test_memory_at_w0_attention_is_g1s_memory_block():
    """At s_n = s_v = a, s_A = K b (and 2a + (L-2) b = 1) the operating-point block is G1's."""
    L = DEFAULT_L
    diag, off = pcf.memory_at(L)
    at_w0 = {pcf.s_n: a, pcf.s_v: a, pcf.s_A: K * b}
    for expr, col in ((diag, "bar_v0"), (off, "bar_v1")):
        g1_entry = entry("1var", "fixed", L, *entry_key("bar_v0", col, 3, L))
        assert sp.simplify((expr.subs(at_w0) - g1_entry).subs(a, (1 - (L - 2) * b) / 2)) == 0


class _GramGeometry(Geometry):
    """Orthonormal embeddings but for the ebar, whose Gram matrix is `gram`: W_eff = G W G."""

    def __init__(self, cfg, gram: torch.Tensor):
        basis = Basis.from_config(cfg)
        idx = [basis.labels.index(f"bar_v{u}") for u in range(cfg.K)]
        self.G = torch.eye(basis.dim, dtype=torch.float64)
        self.G[np.ix_(idx, idx)] = gram

    def effective_W(self, W):
        return self.G @ W @ self.G


def _w_with_attention(cfg, s_num, s_var, s_assigned) -> torch.Tensor:
    """A W whose query row (`=`) reads positions only, giving attention s_num, s_var on the
    number and variable operands, s_assigned / K on each assigned number, the rest even."""
    basis = Basis.from_config(cfg)
    L, Kv = cfg.L, cfg.K
    rest = (1 - s_num - s_var - s_assigned) / (L - 2 - Kv)
    W = torch.zeros(basis.dim, basis.dim, dtype=torch.float64)
    n_pos, v_pos = cfg.operand_pos  # fixed order: the number operand first
    W[basis.eq, basis.pos(n_pos)] = math.log(s_num / rest)
    W[basis.eq, basis.pos(v_pos)] = math.log(s_var / rest)
    for j in range(Kv):
        W[basis.eq, basis.pos(2 * j + 1)] = math.log(s_assigned / Kv / rest)
    return W


@pytest.mark.parametrize("pt", [Point(5, 3, 4.0), Point(7, 2, 4.0)], ids=lambda pt: pt.label())
def test_memory_block_at_an_operating_point_and_gram_equals_the_exact_gradient(pt):
    cfg = pt.sim_config()
    gen = torch.Generator().manual_seed(pt.p)
    X = torch.randn(pt.K, pt.K + 2, generator=gen, dtype=torch.float64)
    gram = X @ X.T / (pt.K + 2)
    op = (0.41, 0.02, 0.49)  # the paper's run at step 5 301
    W = _w_with_attention(cfg, *op)
    basis = Basis.from_config(cfg)
    idx = [basis.labels.index(f"bar_v{u}") for u in range(pt.K)]
    labels = [f"bar_v{u}" for u in range(pt.K)]
    for G in (torch.eye(pt.K, dtype=torch.float64), gram):
        exact = g1(cfg, "1var", W, _GramGeometry(cfg, G)).numpy()[np.ix_(idx, idx)]
        closed = pcf.memory_block(pt.p, pt.K, *op, gram=G.numpy(), L=pt.L)
        assert compare(closed, exact, labels).ok, compare(closed, exact, labels)
    wrong = pcf.memory_block(pt.p, pt.K, 0.41, 0.03, 0.49, gram=gram.numpy(), L=pt.L)
    assert not compare(wrong, exact, labels).ok


def test_memory_summary_and_bad_gram():
    block = pcf.memory_block(5, 3, 0.41, 0.02, 0.49)
    s = pcf.memory_summary(block)
    assert s["diag"] > 0 and s["contrast_min"] > 0 and s["ratio"] < 1
    with pytest.raises(ValueError, match="gram has shape"):
        pcf.memory_block(5, 3, 0.41, 0.02, 0.49, gram=np.eye(2))
