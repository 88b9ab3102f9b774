"""compare-qk after issue 20: the frames (what each reads a label-space gradient as; exact
round trips), G1 of the run's own distribution by default, the decay-only update, the
sign-randomised null, and the split of a score change into its W_QK and moving-vectors parts.
All on tiny synthetic coordinates (milliseconds)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from empirical.bridge.compare_qk.coords import Coordinates, col_labels, row_labels
from empirical.bridge.compare_qk.frames import EXACT, Frames
from empirical.bridge.compare_qk.metrics import (
    cosine,
    null_cos95,
    sign_null95,
    subblock,
    subblock_cosines,
)
from empirical.bridge.compare_qk.observe import one_var_batch
from empirical.bridge.compare_qk.options import DEFAULT_FRAME, FRAMES, Options
from empirical.bridge.compare_qk.prediction import PopulationG1, make_predictor, prediction_kind
from empirical.bridge.compare_qk.updates import decay_factor, score_attribution, undecayed_update
from empirical.task import TaskConfig, held_out_pairs

P, K, L, D = 11, 4, 16, 48
SCALE = float(np.sqrt(D))


def snapshot_like(seed: int = 0, merged: bool = False) -> Coordinates:
    """Labelled vectors shaped like a trained checkpoint's (float64): `=` and pos15 at cos
    0.9, the ebar_v nearly collinear (cos ~0.95), number embeddings near a 4-dimensional
    (Fourier-like) subspace, adjacent positions correlated, unequal norms. merged: W_E[+]
    equal to W_pos[12] (they always occur together; weight decay makes them parallel)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    eq = rnd(D)
    pos = torch.empty(L, D, dtype=torch.float64)
    pos[0] = rnd(D)
    for t in range(1, L):
        pos[t] = 0.9 * pos[t - 1] + 0.45 * rnd(D)
    pos[L - 1] = 0.9 * eq / eq.norm() * pos[L - 1].norm() + 0.45 * rnd(D)
    common = rnd(D)
    ebar = common + 0.33 * rnd(K, D)
    basis = rnd(4, D)
    numbers = rnd(P, 4) @ basis + 0.05 * rnd(P, D)
    variables = 2.0 * rnd(K, D)
    plus, pad = rnd(D), 0.3 * rnd(D)
    if merged:
        plus = pos[L - 4].clone()
    Q = torch.cat([eq[None], pos[L - 1][None], ebar])
    Kv = torch.cat([numbers, variables, torch.stack([eq, plus, pad]), pos, ebar])
    return Coordinates(row_labels(K, L), col_labels(P, K, L), Q, Kv, SCALE, P, K, L)


def _sym_power(G: np.ndarray, power: float) -> np.ndarray:
    e, U = np.linalg.eigh(G)
    return (U * np.clip(e, 0, None) ** power) @ U.T


def test_each_frame_reads_a_label_space_gradient_as_documented():
    c = snapshot_like()
    assert c.exact and c.deficit() == (0, 0)
    GQ, GK = c.gram()
    assert np.linalg.cond(GK) > 1e3  # far from orthonormal, as in trained models
    G = np.random.default_rng(1).standard_normal((len(c.rows), len(c.cols)))
    X = c.gradient_of(G)  # dL/dW_QK of a loss with label-space gradient G
    # the chain rule: <X, dW> = <G, dS> for the scores' change dS = Q dW K^T / s
    dW = torch.as_tensor(np.random.default_rng(2).standard_normal((D, D)))
    assert float((X * dW).sum()) == pytest.approx(float((G * c.project(dW)).sum()), rel=1e-10)
    fr = Frames(c)
    # dual: G back, exactly (and so for a gradient step W0 -> W0 - eta X)
    np.testing.assert_allclose(fr.read(X, "dual"), G, atol=1e-9)
    W0 = torch.as_tensor(np.random.default_rng(3).standard_normal((D, D)))
    step = (W0 + 0.37 * X) - W0
    assert cosine(fr.read(step, "dual"), G) == pytest.approx(1.0, abs=1e-12)
    # raw: the score change (QQ^T) G (KK^T) / s^2; orth: (QQ^T)^1/2 G (KK^T)^1/2 / s^2
    np.testing.assert_allclose(fr.read(X, "raw"), GQ @ G @ GK / SCALE**2, atol=1e-9)
    want = _sym_power(GQ, 0.5) @ G @ _sym_power(GK, 0.5) / SCALE**2
    np.testing.assert_allclose(fr.read(X, "orth"), want, atol=1e-9)
    # the exact frames score such a network 1.000; the legacy ones read something else
    for f in FRAMES:
        got = subblock_cosines(fr.predicted(G, f), fr.read(X, {"score": "raw"}.get(f, f)),
                               c.rows, c.cols)  # fmt: skip
        if EXACT[f]:
            assert got["all"] == pytest.approx(1.0, abs=1e-12), f
            assert got["barv_barv"] == pytest.approx(1.0, abs=1e-12), f
        else:
            assert got["all"] < 0.99, f
    assert DEFAULT_FRAME == "dual" and EXACT[DEFAULT_FRAME]
    # the dual frame's lift is the gradient map
    np.testing.assert_allclose(c.dual().lift(G).numpy(), X.numpy(), atol=1e-9)


def test_dual_frame_with_merged_labels_reads_the_expressible_part():
    c = snapshot_like(merged=True)
    assert c.deficit() == (0, 1)
    fr = Frames(c)
    i, j = c.cols.index("+"), c.cols.index(f"pos{L - 4}")
    G = np.random.default_rng(4).standard_normal((len(c.rows), len(c.cols)))
    read = fr.read(c.gradient_of(G), "dual")
    # two equal vectors: only the sum of their columns is seen, split evenly
    want = G.copy()
    want[:, [i, j]] = G[:, [i, j]].mean(1, keepdims=True)
    np.testing.assert_allclose(read, want, atol=1e-8)
    # a block that respects the merge (as the theory's G1 does: x_12 = e_+ + pi_12) is exact
    G[:, j] = G[:, i]
    np.testing.assert_allclose(fr.read(c.gradient_of(G), "dual"), G, atol=1e-8)
    assert cosine(fr.predicted(G, "dual"), G) == pytest.approx(1.0, abs=1e-12)


def test_the_cli_offers_the_frames_of_the_library():
    from empirical.bridge.compare_qk.options import CompareQKOptions
    from empirical.config.options import build_parser

    opts = CompareQKOptions(run_dir="RUN")  # the defaults the command line shows
    assert "{dual,score,orth,raw}" in build_parser(CompareQKOptions).format_help()
    assert (opts.frame, opts.order, opts.distribution) == ("dual", "mixed", "train")
    assert set(FRAMES) == {"dual", "score", "orth", "raw"} and DEFAULT_FRAME in FRAMES
# -- G1 of the run's own distribution ----------------------------------------------------------


def restricted_task() -> TaskConfig:
    return TaskConfig(p=7, K=4, L=L, max_assignments=4, r1=["a"], r2=["b"], eval_size=100,
                      held_out_fraction=0.2)  # fmt: skip


def test_g1_defaults_to_the_runs_training_distribution():
    task = restricted_task()
    held = held_out_pairs(task, 0)
    opts = Options(prediction_size=8192)
    assert (opts.order, opts.distribution, opts.frame) == ("mixed", "train", "dual")
    # K = 4 has a closed form, but it knows no restrictions: auto takes the sampled population
    assert prediction_kind(task, opts) == "population"
    with pytest.raises(Exception, match="--distribution unrestricted"):
        prediction_kind(task, Options(prediction="closed"))
    assert prediction_kind(task, Options(distribution="unrestricted")) == "closed"
    a, b = 0.2, 0.6 / (L - 2)
    predict = make_predictor(task, opts, held_out=held)
    assert (predict.kind, predict.order, predict.distribution) == ("population", "mixed", "train")
    # exactly G1 of the run's 1-var training sequences (restrictions, held-out pairs)
    batch = one_var_batch(task, 8192, 0, "mixed", "train", held, stream="compare-qk/prediction")
    ops = batch.operand_vars
    assert not bool((ops[:, 0] == 0).any())  # r1 = a: never the first operand
    assert not bool((ops[:, 1] == 1).any())  # r2 = b: never the second
    assert bool((ops[:, 0] >= 0).any()) and bool((ops[:, 1] >= 0).any())  # both orders
    want = PopulationG1.from_batch(batch, task.p, task.K, task.L).block(a, b)
    np.testing.assert_array_equal(predict(a, b), want)
    # the theorem's fixed order on every variable (the old default) is another matrix
    old = make_predictor(
        task,
        Options(
            order="fixed",
            distribution="unrestricted",
            prediction="population",
            prediction_size=8192,
        ),
    )(a, b)
    rows, cols = row_labels(task.K, L), col_labels(task.p, task.K, L)
    cs = subblock_cosines(old, want, rows, cols)
    assert cs["all"] < 0.9 and cs["positions"] < 0.9
    # the restrictions show: `a` is only ever the second operand (the number at L-3, as in
    # fixed order) and `b` only ever the first, so their bar_v rows have opposite signs at the
    # operand positions, each its own way round
    i13, i14 = cols.index(f"pos{L - 3}"), cols.index(f"pos{L - 2}")
    ra, rb = rows.index("bar_v0"), rows.index("bar_v1")
    assert want[ra, i13] > 0 > want[ra, i14]
    assert want[rb, i13] < 0 < want[rb, i14]
    assert old[ra, i13] > 0 > old[ra, i14] and old[rb, i13] > 0 > old[rb, i14]


# -- weight decay ----------------------------------------------------------------------------


def _tc(**kw):
    base = {"lr": 0.1, "weight_decay": 0.5, "warmup_steps": 0, "lr_schedule": "constant",
            "steps": 100, "warmup_from": 0}  # fmt: skip
    return SimpleNamespace(**(base | kw))


def test_decay_factor_is_lr_times_wd_per_step():
    assert decay_factor(_tc(), 10, 13) == pytest.approx(0.95**3, rel=1e-15)
    assert decay_factor(_tc(), 10, 10) == 1.0
    # warm-up: lr 0.05 at step 0, 0.1 from step 1 (lr * (k + 1) / warmup_steps)
    assert decay_factor(_tc(warmup_steps=2), 0, 3) == pytest.approx(0.975 * 0.95 * 0.95)


def test_the_decay_only_update_removes_exactly_the_decay_of_each_factor():
    rng = np.random.default_rng(0)
    WQ0, WK0, uQ, uK = (torch.as_tensor(rng.standard_normal((5, 3))) for _ in range(4))
    lr, wd, n = 0.1, 0.5, 3
    c = decay_factor(_tc(lr=lr, weight_decay=wd), 0, n)
    # pure decay for n steps (torch's AdamW with zero gradients: its Adam step is 0)
    WQ, WK = WQ0.clone().requires_grad_(True), WK0.clone().requires_grad_(True)
    opt = torch.optim.AdamW([WQ, WK], lr=lr, weight_decay=wd)
    for _ in range(n):
        WQ.grad, WK.grad = torch.zeros_like(WQ), torch.zeros_like(WK)
        opt.step()
    WQ1, WK1 = WQ.detach(), WK.detach()
    np.testing.assert_allclose(WQ1.numpy(), (0.95**3 * WQ0).numpy(), rtol=1e-14)
    D = WQ1 @ WK1.T - WQ0 @ WK0.T
    assert float(D.norm()) > 0.1  # the raw update is all decay ...
    nodecay = undecayed_update(WQ0, WK0, WQ1, WK1, c)
    assert float(nodecay.abs().max()) < 1e-14  # ... and nothing is left without it
    # decay, then increments at the last step: the increments' product change, exactly
    WQ2, WK2 = c * WQ0 + uQ, c * WK0 + uK
    want = (WQ0 + uQ) @ (WK0 + uK).T - WQ0 @ WK0.T
    np.testing.assert_allclose(undecayed_update(WQ0, WK0, WQ2, WK2, c).numpy(), want.numpy(),
                               atol=1e-14)  # fmt: skip
    # the legacy 'diff_perp' removes the whole component along W instead: another matrix
    W0 = WQ0 @ WK0.T
    D2 = WQ2 @ WK2.T - W0
    perp = D2 - (D2 * W0).sum() / (W0 * W0).sum() * W0
    assert float((perp - want).abs().max()) > 1e-3


# -- the sign-randomised null ------------------------------------------------------------------


def test_sign_null_sees_a_few_dominant_entries():
    rng = np.random.default_rng(0)
    n = 14 * 102
    x = 0.02 * rng.standard_normal(n)
    y = 0.02 * rng.standard_normal(n)
    big = [3, 70, 500, 900]
    x[big] = [1.0, -0.8, 0.9, 0.7]  # four entries hold most of the energy, as G1's do
    y[big] = [0.5, 0.6, -0.4, 0.8]
    assert (x[big] ** 2).sum() / (x**2).sum() > 0.5
    iso = null_cos95(n)
    signs = sign_null95(x, y, seed=3)
    assert signs > 3 * iso
    assert sign_null95(x, y, seed=3) == signs  # deterministic in the seed
    assert sign_null95(x, y, seed=4) == pytest.approx(signs, rel=0.15)
    # spread-out blocks: about the isotropic level
    flat = sign_null95(rng.standard_normal(n), rng.standard_normal(n), seed=3)
    assert flat == pytest.approx(iso, rel=0.25)
    assert np.isnan(sign_null95(np.zeros(5), np.ones(5)))


# -- the score change, split -----------------------------------------------------------------


def test_score_change_splits_exactly_into_its_parts():
    c0, c1 = snapshot_like(0), snapshot_like(0)
    g = torch.Generator().manual_seed(9)
    c1.Q = c0.Q + 0.1 * torch.randn(c0.Q.shape, generator=g, dtype=torch.float64)
    c1.K = c0.K + 0.1 * torch.randn(c0.K.shape, generator=g, dtype=torch.float64)
    W0 = torch.randn(D, D, generator=g, dtype=torch.float64)
    W1 = W0 + 0.2 * torch.randn(D, D, generator=g, dtype=torch.float64)
    out = score_attribution(c0, c1, W0, W1)
    total = c1.project(W1) - c0.project(W0)
    parts = (
        c0.project(W1 - W0),
        c1.project(W0) - c0.project(W0),
        c1.project(W1 - W0) - c0.project(W1 - W0),
    )
    np.testing.assert_allclose(sum(parts), total, atol=1e-12)
    for sub in ("all", "barv_barv"):
        norms = out["norm"][sub]
        for name, part in zip(("w_qk", "vectors", "cross"), parts, strict=True):
            assert norms[name] == pytest.approx(np.linalg.norm(subblock(part, c0.rows, c0.cols,
                                                                        sub)))  # fmt: skip
        assert norms["total"] == pytest.approx(np.linalg.norm(subblock(total, c0.rows, c0.cols,
                                                                       sub)))  # fmt: skip
        assert sum(out["share"][sub].values()) == pytest.approx(1.0, abs=1e-12)
    # vectors held: all of it is W_QK's; W_QK held: all of it is the vectors'
    same = score_attribution(c0, c0, W0, W1)
    assert same["share"]["all"]["w_qk"] == pytest.approx(1.0)
    assert same["norm"]["all"]["vectors"] == 0.0 and same["norm"]["all"]["cross"] == 0.0
    still = score_attribution(c0, c1, W0, W0)
    assert still["norm"]["all"]["w_qk"] == 0.0
    assert still["share"]["all"]["vectors"] == pytest.approx(1.0)
