"""compare-qk: training windows, the theorem's decomposition (the all-assignment term's share),
G1 of the theorem's model on a sampled population, and the split-half gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from empirical.bridge.compare_qk.coords import col_labels, row_labels
from empirical.bridge.compare_qk.metrics import TERMS, cosine, theorem_terms
from empirical.bridge.compare_qk.observe import (
    Weights,
    gradients,
    layer1,
    one_var_batch,
    split_gradients,
)
from empirical.bridge.compare_qk.prediction import (
    PopulationG1,
    ab_from_beta,
    closed_form_applies,
    g1_block,
)
from empirical.bridge.compare_qk.windows import (
    default_windows,
    in_window,
    parse_windows,
    stat,
    window_summary,
)
from empirical.model import AssignAddTransformer, ModelConfig
from empirical.task import TaskConfig

L = 16

# -- windows ---------------------------------------------------------------------------------


def test_parse_windows():
    assert parse_windows("plateau1=4801:5301, spike=5301:5401") == [
        ("plateau1", 4801, 5301),
        ("spike", 5301, 5401),
    ]
    assert parse_windows("a=3:3,") == [("a", 3, 3)]
    for bad, why in [
        ("plateau1", "name=lo:hi"),
        ("x=5:4", "lo <= hi"),
        ("x=1-4", "lo <= hi"),
        ("x=a:4", "integers"),
        ("x=1:2,x=3:4", "twice"),
        ("=1:2", "name=lo:hi"),
        (" , ", "no window"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_windows(bad)


def _rise(s0, s1, j0, j1):
    return {"start_step": s0, "end_step": s1, "jump_start_step": j0, "jump_end_step": j1}


def test_default_windows_follow_the_phases_on_the_snapshot_grid():
    steps = [1, 501, 1001, 4801, 4901, 5001, 5101, 5201, 5301, 5401, 5501, 6001, 14501, 15101,
             15201, 16001, 40000]  # fmt: skip
    phases = {
        "zero_var_learned_step": 501,
        "first_spike": _rise(4501, 6001, 5301, 5401),
        "second_spike": _rise(14301, 16201, 15101, 15201),
    }
    assert default_windows(phases, steps) == [
        ("before_0var", 1, 501),
        ("plateau1", 501, 5301),
        ("spike1", 5301, 5401),
        ("plateau2", 6001, 15101),
        ("spike2", 15101, 15201),
        ("after", 15201, 40000),
    ]
    # a jump between two evaluations that are not snapshots widens to the snapshots around it
    phases["first_spike"] = _rise(4501, 5450, 5350, 5450)
    got = dict((n, (lo, hi)) for n, lo, hi in default_windows(phases, steps))
    assert got["spike1"] == (5301, 5501) and got["plateau1"] == (501, 5301)
    assert default_windows(None, steps) == [("all", 1, 40000)]
    only0 = default_windows({"zero_var_learned_step": 1, "first_spike": None}, steps)
    assert only0 == [("plateau", 1, 40000)]


def _record(step, nxt, c):
    def v(x):
        return {
            "cos": {"all": x, "barv_barv": -x},
            "identity": {"row_argmax_on_diag": 0.5},
            "attenuation": {"fraction": 1.0},
        }

    comp = {"grad_ce": v(c), "grad_lin": v(2 * c), "sgd_factored": v(c)}
    if nxt is not None:
        comp |= {"diff": v(10 * c), "diff_nodecay": v(10 * c), "diff_perp": v(10 * c)}
    terms = {k: {"aw_share_vs_memory": c} for k in ("pred", "weights", "grad_ce", "grad_lin")}
    if nxt is not None:
        terms["diff_nodecay"] = {"aw_share_vs_memory": 10 * c}
    return {
        "step": step,
        "next_step": nxt,
        "a": c,
        "comparison": {"orth": comp, "raw": comp},
        "terms": terms,
        "metrics_acc": {"1var/ind": c},
    }


def test_window_summary_selects_snapshots_and_updates():
    steps = [0, 100, 200, 300, 400]
    recs = [
        _record(s, n, 0.01 * (i + 1))
        for i, (s, n) in enumerate(zip(steps, steps[1:] + [None], strict=True))
    ]
    w = window_summary(recs, [("p", 100, 300), ("s", 300, 400), ("one", 200, 200)], "orth")
    p = w["p"]
    assert p["snapshots"] == [100, 200, 300] and p["updates"] == [[100, 200], [200, 300]]
    g = p["cos"]["orth"]["grad_ce"]["all"]
    assert g == pytest.approx({"mean": 0.03, "min": 0.02, "max": 0.04, "n": 3})
    d = p["cos"]["orth"]["diff"]["barv_barv"]  # updates 100->200 and 200->300: 10 c of 100, 200
    assert d == pytest.approx({"mean": -0.25, "min": -0.3, "max": -0.2, "n": 2})
    assert p["aw_share"]["diff_nodecay"]["n"] == 2 and p["aw_share"]["pred"]["n"] == 3
    assert p["identity_rows"]["diff"]["n"] == 2 and p["frame"] == "orth"
    assert p["quantities"]["accuracy 1var/ind (metrics)"]["mean"] == pytest.approx(0.03)
    s = w["s"]  # the last snapshot has no update: one update (300 -> 400), two snapshots
    assert s["updates"] == [[300, 400]] and s["cos"]["orth"]["diff"]["all"]["n"] == 1
    assert w["one"]["updates"] == [] and w["one"]["cos"]["orth"]["diff"]["all"]["n"] == 0
    assert w["one"]["cos"]["orth"]["diff"]["all"]["mean"] is None
    assert in_window({"step": 5301, "next_step": 5401}, 5301, 5401, True)
    assert not in_window({"step": 5301, "next_step": 5501}, 5301, 5401, True)
    assert stat([None, float("nan"), 1.0, 3.0]) == {"mean": 2.0, "min": 1.0, "max": 3.0, "n": 2}


# -- the theorem's decomposition -------------------------------------------------------------


def _parts(p, K):
    rows, cols = row_labels(K, L), col_labels(p, K, L)
    q = np.array([1.0, 1.0] + [1.0 / K] * K)
    rng = np.random.default_rng(0)
    rho = rng.standard_normal(len(cols))
    C = K * np.eye(K) - np.ones((K, K))
    bar_c = [cols.index(f"bar_v{u}") for u in range(K)]
    v_c = [cols.index(f"v{u}") for u in range(K)]
    mem, tok = np.zeros((len(rows), len(cols))), np.zeros((len(rows), len(cols)))
    mem[np.ix_(range(2, 2 + K), bar_c)] = C
    tok[np.ix_(range(2, 2 + K), v_c)] = C
    return rows, cols, q, rho, mem, tok


def test_theorem_terms_recover_a_constructed_block():
    p, K = 7, 4
    rows, cols, q, rho, mem, tok = _parts(p, K)
    A = np.outer(q, rho)
    op = [cols.index(f"pos{L - 3}"), cols.index(f"pos{L - 2}")]
    A_op = np.zeros_like(A)
    A_op[:, op] = A[:, op]
    M = A + 0.7 * mem - 0.2 * tok
    d = theorem_terms(M, rows, cols, L)
    np.testing.assert_allclose(d["terms"]["assignment_wide"], A - A_op, atol=1e-12)
    np.testing.assert_allclose(d["terms"]["operand_attenuation"], A_op, atol=1e-12)
    np.testing.assert_allclose(d["terms"]["memory"], 0.7 * mem, atol=1e-12)
    assert d["c_mem"] == pytest.approx(0.7) and d["c_tok"] == pytest.approx(-0.2)
    assert d["share"]["residual"] == pytest.approx(0.0, abs=1e-12)
    assert sum(d["share"][t] for t in TERMS) == pytest.approx(1.0)
    e = d["energy"]
    want = e["assignment_wide"] / (e["assignment_wide"] + e["memory"])
    assert d["aw_share_vs_memory"] == pytest.approx(want)
    assert 0 < want < 1
    # something outside the theorem's form lands in the residual, the terms are unchanged
    R = np.zeros_like(M)
    R[2, cols.index("n0")], R[3, cols.index("n0")] = 1.0, -1.0  # bar_v rows that differ
    d2 = theorem_terms(M + R, rows, cols, L)
    assert d2["energy"]["residual"] == pytest.approx(2.0)
    assert d2["c_mem"] == pytest.approx(0.7)
    # pure terms: only memory -> share 0; only assignment-wide -> 1
    assert theorem_terms(mem, rows, cols, L)["aw_share_vs_memory"] == pytest.approx(0.0)
    assert theorem_terms(A - A_op, rows, cols, L)["aw_share_vs_memory"] == pytest.approx(1.0)


def test_theorems_g1_is_exactly_its_terms():
    a, b = ab_from_beta(2.0)
    G = g1_block(a, b, 11, 3, L, "fixed", "packed")
    d = theorem_terms(G, row_labels(3, L), col_labels(11, 3, L), L)
    assert d["share"]["residual"] < 1e-12
    assert d["c_mem"] > 0 and d["c_tok"] < 0  # the bound number up, its variable token down
    # the operand columns' share is the attenuation: pos{L-2} negative in the `=` row
    assert d["terms"]["operand_attenuation"][0, col_labels(11, 3, L).index("pos14")] < 0


# -- G1 on a sampled population --------------------------------------------------------------


def _slow_g1(tokens, labels, var, p, K, a, b):
    """x_T r^T averaged over sequences, one sequence and one position at a time (the
    definition in PopulationG1's docstring, written independently)."""
    cols = col_labels(p, K, L)
    G = np.zeros((2 + K, len(cols)))
    names = {p + K: "+", p + K + 1: "=", p + K + 2: "pad"}
    for n in range(len(tokens)):
        tok = [int(x) for x in tokens[n]]
        sig = [a if t in (L - 3, L - 2) else b for t in range(L)]
        h = np.zeros(p)
        for t in range(L):
            if tok[t] < p:
                h[tok[t]] += sig[t]
        y = int(labels[n])
        g = [2 * h[(y - tok[t]) % p] - 2 * h.sum() / p if tok[t] < p else 0.0 for t in range(L)]
        gbar = sum(s * x for s, x in zip(sig, g, strict=True))
        r = np.zeros(len(cols))
        for t in range(L):
            c = sig[t] * (g[t] - gbar)
            tl = f"n{tok[t]}" if tok[t] < p else (
                f"v{tok[t] - p}" if tok[t] < p + K else names[tok[t]])  # fmt: skip
            r[cols.index(tl)] += c
            r[cols.index(f"pos{t}")] += c
            if t == L - 1:
                r[cols.index(f"bar_v{int(var[n])}")] += c
            elif t < L - 4 and tok[t] < p and t > 0 and p <= tok[t - 1] < p + K:
                r[cols.index(f"bar_v{tok[t - 1] - p}")] += c
        G[0] += r
        G[1] += r
        G[2 + int(var[n])] += r
    return G / len(tokens)


def test_population_g1_is_its_definition_sequence_by_sequence():
    task = TaskConfig(p=5, K=8, L=L, max_assignments=6, r1=[], r2=[], eval_size=100)
    assert not closed_form_applies(8, L)  # K = 8: only the sampled population applies
    batch = one_var_batch(task, 40, seed=3, order="mixed")
    pop = PopulationG1.from_batch(batch, 5, 8, L)
    var = batch.operand_vars.max(1).values
    for a in (0.1, 0.3):
        b = (1 - 2 * a) / (L - 2)
        want = _slow_g1(batch.tokens, batch.labels, var, 5, 8, a, b)
        np.testing.assert_allclose(pop.block(a, b, layout="packed"), want, atol=1e-14)


def test_population_g1_on_the_theorems_population_is_the_closed_form(order="fixed"):
    p, K = 5, 3
    task = TaskConfig(p=p, K=K, L=L, min_assignments=K, max_assignments=K, r1=[], r2=[],
                      eval_size=100)  # fmt: skip
    batch = one_var_batch(task, 40000, seed=1, order=order)
    a, b = ab_from_beta(2.0)
    got = PopulationG1.from_batch(batch, p, K, L).block(a, b)
    want = g1_block(a, b, p, K, L, order, "averaged")
    assert cosine(got, want) > 0.999
    np.testing.assert_allclose(got, want, atol=0.05 * np.abs(want).max())
    rows, cols = row_labels(K, L), col_labels(p, K, L)
    assert theorem_terms(got, rows, cols, L)["aw_share_vs_memory"] == pytest.approx(
        theorem_terms(want, rows, cols, L)["aw_share_vs_memory"], abs=0.02
    )


def test_population_g1_refuses_what_it_cannot_describe():
    task = TaskConfig(p=5, K=3, L=L, max_assignments=3, r1=[], r2=[], eval_size=100)
    batch = one_var_batch(task, 10, seed=0)
    pop = PopulationG1.from_batch(batch, 5, 3, L)
    with pytest.raises(ValueError, match="0 < a < 1/2"):
        pop.block(0.6, 0.01)
    with pytest.raises(ValueError, match="layout"):
        pop.block(0.3, 0.4 / 14, layout="diagonal")
    two = batch.slice(0, 10)
    two.operand_vars[:, 0] = 0
    with pytest.raises(ValueError, match="1-var"):
        PopulationG1.from_batch(two, 5, 3, L)


# -- gradients --------------------------------------------------------------------------------


def test_split_gradients_average_to_the_whole_batch():
    cfg = ModelConfig.for_task(5, 2, L, d_model=24, d_mlp=32, dtype="float64", init_std=0.3)
    model = AssignAddTransformer(cfg, seed=4)
    task = TaskConfig(p=5, K=2, L=L, max_assignments=2, r1=[], r2=[], eval_size=100)
    batch = one_var_batch(task, 63, seed=2)  # odd: halves of 31 and 32
    w = Weights.of(model)
    resid = layer1(w, batch.tokens).resid1
    out = split_gradients(w, resid, batch.labels, ("ce", "first_order"))
    for kind in ("ce", "first_order"):
        whole, h1, h2 = out[kind]
        ref = gradients(w, resid, batch.labels, kind)
        for name in ("G_QK", "G_Q", "G_K"):
            torch.testing.assert_close(getattr(whole, name), getattr(ref, name), atol=1e-12,
                                       rtol=1e-9)  # fmt: skip
        assert whole.loss == pytest.approx(ref.loss)
        half = gradients(w, resid[:31], batch.labels[:31], kind)
        torch.testing.assert_close(h1.G_QK, half.G_QK, atol=1e-12, rtol=1e-9)
    logits, pattern = out["forward"]
    assert logits.shape == (63, 5) and pattern.shape == (63, L)
