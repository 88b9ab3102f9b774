"""compare-qk: coordinates, prediction, gradients and metrics on hand-built models whose
answers are known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from empirical.bridge.compare_qk.coords import (
    col_labels,
    coordinates,
    row_labels,
    set_qk,
    theorem_w,
)
from empirical.bridge.compare_qk.metrics import (
    attenuation_entries,
    barv_block,
    cosine,
    identity_score,
    sign_agreement,
    subblock_cosines,
)
from empirical.bridge.compare_qk.observe import (
    Weights,
    gradients,
    layer1,
    layer2,
    layer2_attention,
    loss_of,
    one_var_batch,
)
from empirical.bridge.compare_qk.prediction import ab_from_beta, g1_block
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer
from empirical.task.config import TaskConfig, task_config

P, K, L = 5, 2, 16


def small_task(p=P, k=K) -> TaskConfig:
    return task_config(p=p, K=k, L=L, max_assignments=k, r1=[], r2=[], eval_size=200)


def orthonormal_model(d_model=34, seed=0) -> tuple[AssignAddTransformer, torch.Tensor]:
    """W_E rows, W_pos rows and the remapped variables ebar_u = W_E[var u] W_OV^1 are distinct
    vectors of a random orthonormal basis (the theorem's "orthogonal embeddings")."""
    cfg = ModelConfig.for_task(P, K, L, d_model=d_model, d_mlp=16, dtype="float64")
    model = AssignAddTransformer(cfg, seed=seed)
    g = torch.Generator().manual_seed(seed + 100)
    basis, _ = torch.linalg.qr(torch.randn(d_model, d_model, generator=g, dtype=torch.float64))
    basis = basis.T  # rows orthonormal
    V = P + K + 3
    with torch.no_grad():
        model.embed.W_E.copy_(basis[:V])
        model.pos_embed.W_pos.copy_(basis[V : V + L])
        # W_OV^1 = W_V W_O maps the variable u's embedding to the fresh vector basis[V + L + u]
        ov = torch.zeros(d_model, d_model, dtype=torch.float64)
        for u in range(K):
            ov += torch.outer(basis[P + u], basis[V + L + u])
        a0 = model.blocks[0].attn
        a0.W_V[0].copy_(ov)
        a0.W_O[0].copy_(torch.eye(d_model, dtype=torch.float64))
    return model, basis


def test_projection_recovers_a_planted_qk_exactly():
    model, _ = orthonormal_model()
    c = coordinates(model, P, K, L)
    assert c.rows == ["=", "pos15", "bar_v0", "bar_v1"]
    assert c.cols[:P] == [f"n{m}" for m in range(P)] and c.cols[-K:] == ["bar_v0", "bar_v1"]
    rng = np.random.default_rng(0)
    M = rng.standard_normal((len(c.rows), len(c.cols)))
    W = c.scale * (c.Q.T @ torch.as_tensor(M) @ c.K)  # score(q_i, k_j) = M[i, j]
    set_qk(model, W)
    np.testing.assert_allclose(theorem_w(model).numpy(), W.numpy(), atol=1e-12)
    np.testing.assert_allclose(c.project(theorem_w(model)), M, atol=1e-10)
    # the orthonormalised frame is the same frame here
    np.testing.assert_allclose(c.orthonormalized().project(theorem_w(model)), M, atol=1e-10)
    # label by label: the score between `=`'s query and the key vector of position 14
    x_eq = model.W_E[P + K + 1].detach()
    k14 = model.W_pos[14].detach()
    score = float(x_eq @ theorem_w(model) @ k14 / model.cfg.attn_scale)
    assert score == pytest.approx(M[c.rows.index("="), c.cols.index("pos14")], abs=1e-10)
    # ebar rows really are layer 1's remapped variables
    e1 = model.W_E[P + 1].detach() @ model.OV[0, 0].AB.detach()
    score = float(e1 @ theorem_w(model) @ model.W_E[0].detach() / model.cfg.attn_scale)
    assert score == pytest.approx(M[c.rows.index("bar_v1"), c.cols.index("n0")], abs=1e-10)


def independent_vectors(model) -> dict[str, torch.Tensor]:
    """label -> vector, built from the vocabulary's names (not from `coordinates`)."""
    from empirical.task.vocab import Vocabulary

    vocab = Vocabulary(P, K, L)
    E, pos = model.W_E.detach(), model.W_pos.detach()
    ov1 = model.OV[0, 0].AB.detach()
    out = {f"n{m}": E[vocab.token_id(str(m))] for m in range(P)}
    out.update({f"v{u}": E[vocab.var_id(vocab.letters[u])] for u in range(K)})
    out.update({name: E[vocab.token_id(name)] for name in ("=", "+", "pad")})
    out.update({f"pos{t}": pos[t] for t in range(L)})
    out.update({f"bar_v{u}": E[vocab.var_id(vocab.letters[u])] @ ov1 for u in range(K)})
    return out


@pytest.mark.parametrize("orthonormal", [True, False])
def test_every_entry_is_the_score_between_its_labels(orthonormal):
    model = orthonormal_model()[0] if orthonormal else random_model(seed=4)
    c = coordinates(model, P, K, L)
    vec = independent_vectors(model)
    S = c.project(theorem_w(model))
    W = theorem_w(model)
    for i, r in enumerate(c.rows):
        for j, col in enumerate(c.cols):
            want = float(vec[r].double() @ W @ vec[col].double()) / model.cfg.attn_scale
            assert S[i, j] == pytest.approx(want, abs=1e-9), (r, col)


def test_a_mislabelled_projection_is_caught():
    model, _ = orthonormal_model()
    c = coordinates(model, P, K, L)
    M = np.random.default_rng(1).standard_normal((len(c.rows), len(c.cols)))
    W = c.scale * (c.Q.T @ torch.as_tensor(M) @ c.K)
    swapped = M.copy()
    swapped[:, [c.cols.index("pos13"), c.cols.index("pos14")]] = M[
        :, [c.cols.index("pos14"), c.cols.index("pos13")]
    ]
    assert not np.allclose(c.project(W), swapped, atol=1e-3)


def test_lift_inverts_projection_on_non_orthogonal_vectors():
    cfg = ModelConfig.for_task(P, K, L, d_model=40, d_mlp=16, dtype="float64")
    model = AssignAddTransformer(cfg, seed=3)  # random, far from orthonormal
    c = coordinates(model, P, K, L)
    S = np.random.default_rng(2).standard_normal((len(c.rows), len(c.cols)))
    np.testing.assert_allclose(c.project(c.lift(S)), S, atol=1e-8)
    o = c.orthonormalized()
    np.testing.assert_allclose((o.Q @ o.Q.T).numpy(), np.eye(len(c.rows)), atol=1e-10)
    np.testing.assert_allclose((o.K @ o.K.T).numpy(), np.eye(len(c.cols)), atol=1e-8)
    np.testing.assert_allclose(o.project(o.lift(S)), S, atol=1e-8)
    assert c.exact and o.exact
    # more key labels (33) than dimensions (24): no exact frame, but nothing blows up
    narrow = coordinates(random_model(seed=3), P, K, L)
    assert not narrow.exact
    on = narrow.orthonormalized()
    assert torch.isfinite(on.K).all() and float(torch.linalg.matrix_norm(on.K, 2)) <= 1 + 1e-8


@pytest.mark.parametrize(("p", "k", "beta"), [(5, 3, 4.0), (11, 2, 2.0), (7, 4, 1.0)])
def test_prediction_is_the_theorys_g1(p, k, beta):
    from theory.g1_closed_form import g1_matrix

    labels, G = g1_matrix(p, k, beta)
    a, b = ab_from_beta(beta)
    pred = g1_block(a, b, p, k, L, layout="packed")
    rows, cols = row_labels(k, L), col_labels(p, k, L)
    want = G[np.ix_([labels.index(r) for r in rows], [labels.index(c) for c in cols])]
    np.testing.assert_allclose(pred, want, rtol=1e-12, atol=1e-15)
    # averaged layout: the assignment-region columns are their mean, the rest unchanged
    avg = g1_block(a, b, p, k, L, layout="averaged")
    region = [cols.index(f"pos{t}") for t in range(L - 4)]
    mean = np.broadcast_to(want[:, region].mean(1, keepdims=True), want[:, region].shape)
    np.testing.assert_allclose(avg[:, region], mean)
    rest = [j for j in range(len(cols)) if j not in region]
    np.testing.assert_allclose(avg[:, rest], want[:, rest])
    # the theorem's structure: identity-like bar_v block, attenuation entries negative
    assert identity_score(barv_block(pred, rows, cols))["row_argmax_on_diag"] == 1.0
    for r, c in attenuation_entries(rows, cols, L, "fixed"):
        assert pred[rows.index(r), cols.index(c)] < 0, (r, c)


def test_prediction_refuses_inconsistent_weights():
    with pytest.raises(ValueError, match="2a"):
        g1_block(0.3, 0.1, 5, 2, L)
    with pytest.raises(ValueError, match="layout"):
        g1_block(*ab_from_beta(2.0), 5, 2, L, layout="nope")


def test_cosine_and_scores():
    X = np.random.default_rng(0).standard_normal((4, 9))
    assert cosine(X, X) == pytest.approx(1.0)
    assert cosine(X, -X) == pytest.approx(-1.0)
    assert cosine(X, 3 * X) == pytest.approx(1.0)
    Y = np.zeros_like(X)
    Y[0, 0] = 1
    Z = np.zeros_like(X)
    Z[1, 1] = 1
    assert cosine(Y, Z) == pytest.approx(0.0)
    assert np.isnan(cosine(X, np.zeros_like(X)))
    assert identity_score(np.eye(4) + 0.1)["row_argmax_on_diag"] == 1.0
    assert identity_score(np.eye(4)[::-1] + 0.1 * np.eye(4))["row_argmax_on_diag"] == 0.0
    ident = identity_score(np.eye(3))
    assert ident["diag_margin_over_std"] == pytest.approx(1 / np.eye(3).std())
    rows, cols = ["=", "bar_v0"], ["v0", "pos14"]
    pred = np.array([[0.0, -1.0], [-2.0, -1.0]])
    obs = np.array([[5.0, -0.5], [1.0, 0.2]])
    ag = sign_agreement(pred, obs, rows, cols, attenuation_entries(rows, cols, L, "fixed"))
    # (=, pos14) agrees; (bar_v0, pos14) and (bar_v0, v0) do not
    assert ag["fraction"] == pytest.approx(1 / 3)


def random_model(seed=0, dtype="float64", p=P, k=K):
    cfg = ModelConfig.for_task(p, k, L, d_model=24, d_mlp=32, dtype=dtype, init_std=0.3)
    return AssignAddTransformer(cfg, seed=seed)


def test_layer2_forward_matches_the_model_and_gradients_match_autograd():
    model = random_model()
    batch = one_var_batch(small_task(), 64, seed=0)
    w = Weights.of(model)
    logits, pattern = layer2(w, layer1(w, batch.tokens).resid1)
    ref, cache = model.run_with_cache(batch.tokens, last_only=True)
    np.testing.assert_allclose(logits.numpy(), ref.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(pattern.numpy(), cache["pattern", 1][:, 0, -1].numpy(), atol=1e-12)
    g = gradients(w, layer1(w, batch.tokens).resid1, batch.labels, "ce")
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(batch.tokens)[:, -1], batch.labels).backward()
    attn = model.blocks[1].attn
    np.testing.assert_allclose(g.G_Q.numpy(), attn.W_Q.grad[0].numpy(), atol=1e-10)
    np.testing.assert_allclose(g.G_K.numpy(), attn.W_K.grad[0].numpy(), atol=1e-10)
    # dL/dW_Q = dL/dW_QK W_K and dL/dW_K = dL/dW_QK^T W_Q (chain rule through W_Q W_K^T)
    np.testing.assert_allclose((g.G_QK @ w.W_K2).numpy(), g.G_Q.numpy(), atol=1e-10)
    np.testing.assert_allclose((g.G_QK.T @ w.W_Q2).numpy(), g.G_K.numpy(), atol=1e-10)
    # the first-order loss: -(f_y* - mean f)
    ref = ref.detach()
    lin = loss_of(ref, batch.labels, "first_order")
    want = -(ref.gather(1, batch.labels[:, None]).squeeze(1) - ref.mean(-1)).mean()
    assert float(lin) == pytest.approx(float(want))


def test_merged_gradient_is_a_finite_difference():
    model = random_model(seed=1)
    batch = one_var_batch(small_task(), 32, seed=1)
    w = Weights.of(model)
    r1 = layer1(w, batch.tokens).resid1
    g = gradients(w, r1, batch.labels, "ce")
    c = coordinates(model, P, K, L)
    D = c.lift(np.random.default_rng(3).standard_normal((len(c.rows), len(c.cols))))
    W0 = theorem_w(model)
    eps = 1e-6

    def loss_at(W):
        m = random_model(seed=1)
        set_qk(m, W)
        wm = Weights.of(m)
        return float(loss_of(layer2(wm, r1)[0], batch.labels, "ce"))

    fd = (loss_at(W0 + eps * D) - loss_at(W0 - eps * D)) / (2 * eps)
    assert fd == pytest.approx(float((g.G_QK * D).sum()), rel=1e-5, abs=1e-9)


def test_set_qk_keeps_the_function_and_handles_narrow_heads():
    model = random_model(seed=2)
    tokens = one_var_batch(small_task(), 16, seed=2).tokens
    before = model(tokens).detach()
    set_qk(model, theorem_w(model))
    np.testing.assert_allclose(model(tokens).detach().numpy(), before.numpy(), atol=1e-10)
    cfg = ModelConfig.for_task(P, K, L, d_model=24, d_head=6, d_mlp=8, dtype="float64")
    narrow = AssignAddTransformer(cfg, seed=0)
    W = theorem_w(narrow)  # rank 6
    set_qk(narrow, W * 2)
    np.testing.assert_allclose(theorem_w(narrow).numpy(), (2 * W).numpy(), atol=1e-10)


def test_one_var_batch_and_attention_weights():
    task = small_task()
    fixed = one_var_batch(task, 200, seed=0, order="fixed")
    assert len(fixed) == 200 and bool((fixed.n_vars == 1).all())
    assert bool((fixed.operand_vars[:, 0] == -1).all() and (fixed.operand_vars[:, 1] >= 0).all())
    mixed = one_var_batch(task, 400, seed=0, order="mixed")
    first = float((mixed.operand_vars[:, 0] >= 0).double().mean())
    assert 0.35 < first < 0.65
    full = one_var_batch(small_task(5, 3), 50, seed=0, all_assigned=True)
    region = full.tokens[:, : L - 4]
    assert bool(((region >= 5) & (region < 8)).sum(1).eq(3).all())
    # uniform attention: a = b = 1/L, beta = 0
    att = layer2_attention(torch.full((200, L), 1 / L), fixed, P, K)
    assert att["a_operands"] == pytest.approx(1 / L) and att["b_operands"] == pytest.approx(1 / L)
    assert att["beta_operands"] == pytest.approx(0.0, abs=1e-12)
    # all mass on the two operand positions: a = 1/2 ... and on the value positions
    pat = torch.zeros(200, L)
    pat[:, L - 3] = 0.5
    pat[torch.arange(200), fixed.value_positions[:, 1]] = 0.5
    att = layer2_attention(pat, fixed, P, K)
    assert att["a_values"] == pytest.approx(0.5)
    assert att["a_operands"] == pytest.approx(0.25)
    assert att["mass"]["bound_number"] == pytest.approx(0.5)


def test_subblock_cosines_see_only_their_block():
    rows, cols = row_labels(K, L), col_labels(P, K, L)
    A = np.random.default_rng(0).standard_normal((len(rows), len(cols)))
    B = A.copy()
    bv = [cols.index(f"bar_v{u}") for u in range(K)]
    rv = [rows.index(f"bar_v{u}") for u in range(K)]
    B[np.ix_(rv, bv)] *= -1
    cs = subblock_cosines(A, B, rows, cols)
    assert cs["barv_barv"] == pytest.approx(-1.0)
    assert cs["positions"] == pytest.approx(1.0)
    assert cs["all"] < 1.0


def test_factored_change_is_the_first_order_change_of_the_product():
    model = random_model(seed=5)
    batch = one_var_batch(small_task(), 32, seed=5)
    w = Weights.of(model)
    g = gradients(w, layer1(w, batch.tokens).resid1, batch.labels, "ce")
    lr = 1e-6
    WQ, WK = w.W_Q2 - lr * g.G_Q, w.W_K2 - lr * g.G_K
    fd = (WQ @ WK.T - w.W_Q2 @ w.W_K2.T) / lr
    np.testing.assert_allclose(g.factored_change(w).numpy(), fd.numpy(), atol=1e-5)


def test_layer1_measures_on_a_hand_built_first_layer():
    """Numbers attend to the previous token and `=` to the two operands: the measures must
    read 1 (and 1/2 for the coefficient of ebar_v in `=`, which splits its attention)."""
    from empirical.bridge.compare_qk.observe import embedding_measures, layer1_measures

    model, basis = orthonormal_model()
    V = P + K + 3
    big = 60.0
    pos = basis[V : V + L]
    W1 = sum(torch.outer(pos[t], pos[t - 1]) for t in range(1, L - 4))
    W1 = W1 + torch.outer(pos[L - 1], pos[L - 3] + pos[L - 2])
    a0 = model.blocks[0].attn
    with torch.no_grad():
        a0.W_Q[0].copy_(big * model.cfg.attn_scale * W1)
        a0.W_K[0].copy_(torch.eye(W1.shape[0], dtype=torch.float64))
    task = small_task()
    batch = one_var_batch(task, 128, seed=0)
    w = Weights.of(model)
    m = layer1_measures(layer1(w, batch.tokens), w, batch, P, K)
    assert m["l1_num_to_prev_mass"] == pytest.approx(1.0, abs=1e-6)
    assert m["l1_num_to_prev_argmax"] == 1.0
    assert m["l1_eq_to_operands_mass"] == pytest.approx(1.0, abs=1e-6)
    assert m["number_added_cos_ebar"] == pytest.approx(1.0, abs=1e-6)
    assert m["query_added_cos_ebar"] == pytest.approx(1.0, abs=1e-6)
    assert m["query_ebar_coefficient"] == pytest.approx(0.5, abs=1e-6)
    e = embedding_measures(w, P, K, L)
    assert e["embeddings"]["max_abs_cos"] < 1e-10 and e["ebar"]["max_abs_cos"] < 1e-10
    assert e["ebar_vs_embeddings_max_abs_cos"] < 1e-10
    assert e["key_vectors_condition_number"] == pytest.approx(1.0)
    assert e["numbers_effective_rank_99"] == P  # orthonormal: every direction counts
    from empirical.bridge.compare_qk.observe import effective_rank

    low = np.outer(np.arange(1, 6), np.ones(8)) + 1e-9 * np.eye(5, 8)
    assert effective_rank(low) == 1


def test_parallel_co_occurring_labels_share_a_row_of_the_orth_frame():
    """W_E[+] and W_pos[L-4] always occur together; weight decay makes them parallel. The
    orth frame must then give both labels the same vector instead of blowing up."""
    model, _ = orthonormal_model()
    with torch.no_grad():
        model.embed.W_E[P + K] = model.pos_embed.W_pos[L - 4]
    c = coordinates(model, P, K, L)
    assert c.deficit() == (0, 1) and not c.exact
    o = c.orthonormalized()
    i, j = c.cols.index("+"), c.cols.index(f"pos{L - 4}")
    np.testing.assert_allclose(o.K[i].numpy(), o.K[j].numpy(), atol=1e-12)
    assert float(o.K[i].norm()) == pytest.approx(2**-0.5)
    others = [k for k in range(len(c.cols)) if k not in (i, j)]
    np.testing.assert_allclose(o.K[others].numpy(), c.K[others].numpy(), atol=1e-12)
    # a block with equal `+` and pos12 columns (as the theory's G1 has) is still realised
    S = np.random.default_rng(0).standard_normal((len(c.rows), len(c.cols)))
    S[:, j] = S[:, i]
    np.testing.assert_allclose(o.project(o.lift(S)), S, atol=1e-10)


def test_oracle_routing_matches_a_patched_attention_pattern():
    """The ideal-routing accuracy equals the model's accuracy with `=`'s layer-2 pattern
    patched (TransformerLens hook) to 1/2 on each value position."""
    from empirical.bridge.compare_qk.observe import oracle_routing_accuracy

    model = random_model(seed=6, p=11, k=3)
    task = small_task(11, 3)
    batch = one_var_batch(task, 300, seed=6, order="mixed")
    w = Weights.of(model)
    got = oracle_routing_accuracy(w, layer1(w, batch.tokens).resid1, batch)

    def patch(pattern, hook):
        new = torch.zeros_like(pattern[:, 0, -1])
        rows = torch.arange(len(batch))
        new[rows, batch.value_positions[:, 0]] += 0.5
        new[rows, batch.value_positions[:, 1]] += 0.5
        pattern = pattern.clone()
        pattern[:, 0, -1] = new
        return pattern

    hooks = [("blocks.1.attn.hook_pattern", patch)]
    logits = model.run_with_hooks(batch.tokens, fwd_hooks=hooks)[:, -1].detach()
    want = float((logits.argmax(-1) == batch.labels).double().mean())
    assert got == pytest.approx(want)
    unpatched = float((model(batch.tokens)[:, -1].argmax(-1) == batch.labels).double().mean())
    logits_diff = (logits - model(batch.tokens)[:, -1].detach()).abs().max()
    assert float(logits_diff) > 1e-6  # the patch changed something
    assert 0 <= unpatched <= 1


def test_one_step_accuracies_in_one_pass_equal_each_models_own_forward():
    """compare-qk's one-step test counts every stepped model's correct answers from layer 1's
    residuals computed once per chunk (`_correct_each`): the same counts as each model's own
    forward, chunked or not."""
    import copy

    from empirical.bridge.compare_qk.coords import set_qk, theorem_w
    from empirical.bridge.compare_qk.one_step import _correct_each

    model = random_model(seed=3, dtype="float32")
    sets = {
        "a": one_var_batch(small_task(), 96, seed=1),
        "b": one_var_batch(small_task(), 40, seed=2),
    }
    gen = torch.Generator().manual_seed(0)
    stepped = [model]
    for scale in (5.0, 50.0):
        m = copy.deepcopy(model)
        W = theorem_w(model)
        set_qk(m, W + scale * torch.randn(W.shape, generator=gen, dtype=W.dtype))
        stepped.append(m)
    expected = [
        {n: int((m.forward_fast(b.tokens).argmax(-1) == b.labels).sum()) for n, b in sets.items()}
        for m in stepped
    ]
    got = _correct_each([Weights.of(m) for m in stepped], Weights.of(model), sets, chunk=32)
    assert got == expected and len({tuple(c.values()) for c in got}) > 1
