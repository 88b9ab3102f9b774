"""The recurrent model (model.recurrence, empirical.model.forward.recurrent_readouts): with
T = 1 and no mechanism it is the feedforward model of the block's layers, number for number;
its iterations have hook points `iter.{t}.*`; a row's answer is its own T-th readout; the
discrete state feeds back the values read out at the slots; the losses count what
docs/graph.md says they count; the switches are checked.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from empirical.analysis.common import light_forward
from empirical.config.io import ConfigError, to_dict
from empirical.model.config import ModelConfig
from empirical.model.forward import RowContext, forward, relative_bias, relative_content_scores
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config
from empirical.task.pairs import training_generator
from empirical.task.sampler import run_training_sampler
from empirical.train.targets import row_context, score_targets, target_loss

CFG = ModelConfig.for_task(11, 9, 30, d_model=16, n_heads=2, d_mlp=24)


def _tokens(n=5, length=30, seed=0):
    return torch.randint(0, CFG.d_vocab, (n, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n_layers,normalization", [(2, "none"), (4, "none"), (2, "LNPre")])
def test_one_iteration_without_mechanisms_is_the_feedforward_model(n_layers, normalization):
    ff = AssignAddTransformer(
        dataclasses.replace(CFG, n_layers=n_layers, normalization=normalization), seed=3
    )
    rec_cfg = dataclasses.replace(CFG, n_layers=n_layers, recurrence="fixed", iterations=1,
                                  normalization=normalization)  # fmt: skip
    rec = AssignAddTransformer(rec_cfg, seed=3)
    assert [n for n, _ in rec.named_parameters()] == [n for n, _ in ff.named_parameters()]
    tokens = _tokens()
    assert torch.equal(rec(tokens), ff(tokens))
    offset = torch.tensor([0, 1, 0, 29, 5])  # rows 3 and 4 wrap around after position 29
    ctx = RowContext(pos_offset=offset)
    assert torch.equal(rec(tokens, context=ctx), ff(tokens, context=ctx))
    _, shifted = ff.run_with_cache(tokens, context=ctx)
    want = ff.W_pos[(torch.arange(30) + 29) % 30]
    assert torch.equal(shifted["hook_pos_embed"][3], want)
    _, cache = rec.run_with_cache(tokens)
    _, ff_cache = ff.run_with_cache(tokens)
    for layer in range(n_layers):
        mine = cache[f"iter.0.blocks.{layer}.hook_resid_post"]
        assert torch.equal(mine, ff_cache[f"blocks.{layer}.hook_resid_post"])
    assert torch.equal(cache["iter.0.hook_readout"], ff(tokens))


def test_two_iterations_are_not_one_and_the_block_is_shared():
    rec = AssignAddTransformer(dataclasses.replace(CFG, recurrence="fixed", iterations=2), seed=0)
    tokens = _tokens()
    _, cache = rec.run_with_cache(tokens)
    one = AssignAddTransformer(dataclasses.replace(CFG, recurrence="fixed"), seed=0)
    assert torch.equal(cache["iter.0.hook_readout"], one(tokens))
    assert not torch.allclose(cache["iter.1.hook_readout"], one(tokens))
    left = cache["iter.0.blocks.1.hook_resid_post"]
    assert torch.equal(cache["iter.1.blocks.0.hook_resid_pre"], left)  # the state carries on
    empty = forward(dict(one.named_parameters()), tokens[:0], one.cfg)
    assert empty.shape == (0, 30, 11)


def test_each_row_answers_at_its_own_iteration_count():
    cfg = dataclasses.replace(CFG, recurrence="depth", iterations=1)
    model = AssignAddTransformer(cfg, seed=1)
    tokens = _tokens(3)
    T = torch.tensor([1, 3, 2])
    every = model(tokens, context=RowContext(iterations=T, every_iteration=True))
    assert every.shape == (3, 3, 30, 11) and len(model.iter) >= 3
    final = model(tokens, context=RowContext(iterations=T))
    for row, t in enumerate(T.tolist()):
        assert torch.equal(final[row], every[t - 1, row])
    with pytest.raises(ValueError, match="takes each row's T from its graph's depth"):
        model(tokens)


def test_the_discrete_state_feeds_back_the_values_read_out_at_the_slots():
    cfg = dataclasses.replace(CFG, recurrence="fixed", iterations=2, discrete_state=True)
    model = AssignAddTransformer(cfg, seed=2)
    tokens = _tokens(2)
    slots = torch.zeros(2, 30, dtype=torch.bool)
    slots[:, [4, 9, 20]] = True
    _, cache = model.run_with_cache(tokens, context=RowContext(slots=slots))
    values = cache["iter.0.hook_readout"].argmax(-1)
    fed = cache["iter.1.hook_value_embed"]
    assert torch.equal(fed[slots], model.W_E[values[slots]])
    assert int(fed[~slots].abs().sum()) == 0
    start = cache["iter.1.blocks.0.hook_resid_pre"]
    assert torch.allclose(start, cache["hook_embed"] + cache["hook_pos_embed"] + fed)
    with pytest.raises(ValueError, match="needs RowContext\\(slots=...\\)"):
        model(tokens)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"latent_supervision": True}, "model.latent_supervision = True needs a recurrent model"),
        ({"iterations": 3}, "model.iterations = 3 needs a recurrent model"),
        ({"recurrence": "fixed", "corruption": 0.1}, "model.corruption = 0.1 corrupts the values"),
        ({"recurrence": "loop"}, "model.recurrence: 'loop' is not one of"),
        ({"recurrence": "fixed", "discrete_state": True, "corruption": 1.0},
         "model.corruption: must be a number in [0, 1)"),
        ({"recurrence": "fixed", "n_layers": 4, "tied_layers": True}, "model.tied_layers = true"),
        ({"recurrence": "fixed", "latent_supervision": True, "teacher_forcing": True},
         "model.teacher_forcing = true feeds the true values"),
        ({"recurrence": "fixed", "discrete_state": True, "corruption": 0.1,
          "corrupted_batches": 0.0}, "model.corrupted_batches: must be a number in (0, 1]"),
        ({"recurrence": "fixed", "discrete_state": True, "corrupted_batches": 0.05},
         "model.corrupted_batches = 0.05 says how training corrupts"),
        ({"recurrence": "fixed", "discrete_state": True, "corruption": 0.1,
          "corruption_scope": "first"}, "model.corruption_scope: 'first' is not one of"),
        ({"recurrence": "fixed", "discrete_state": True, "corruption": 0.1,
          "corruption_scope": "last"}, "model.corruption_scope = 'last' corrupts the values"),
        ({"positions": "rotary"}, "model.positions: 'rotary' is not one of"),
        ({"positions": "relative", "relative_window": 0}, "model.relative_window: must be a"),
    ],
)  # fmt: skip
def test_the_switches_are_checked(fields, message):
    with pytest.raises(ConfigError) as err:
        ModelConfig(**fields)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- the losses on graph batches ------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph_batch():
    task = load_run_config("configs/graph.toml").task
    return run_training_sampler(task, 0).sample(16, training_generator(0)), task


def _model(task, **fields):
    cfg = load_run_config("configs/graph.toml", ["model.d_model=16", "model.d_mlp=16"]).model
    cfg = dataclasses.replace(cfg, **fields)
    return AssignAddTransformer(cfg.with_task(task.p, task.K + 3, task.L), seed=0)


def test_latent_supervision_counts_the_nodes_of_depth_at_most_t(graph_batch):
    batch, task = graph_batch
    model = _model(task, corruption=0.0)
    weights = dict(model.named_parameters())
    loss = target_loss(weights, batch, model.cfg)
    ctx = row_context(model.cfg, batch, every_iteration=True)
    every = forward(weights, batch.tokens, model.cfg, context=ctx)
    T = ctx.iterations
    assert torch.equal(T, batch.target_depths.max(1).values + 1)
    per_step = []
    for t in range(every.shape[0]):
        keep = (batch.targets >= 0) & (batch.target_depths <= t) & (t < T)[:, None]
        per_step.append(F.cross_entropy(every[t][keep], batch.targets[keep]))
    assert torch.allclose(loss, torch.stack(per_step).mean())
    end_to_end = _model(task, latent_supervision=False, corruption=0.0)
    e2e = target_loss(dict(end_to_end.named_parameters()), batch, end_to_end.cfg)
    final = forward(dict(end_to_end.named_parameters()), batch.tokens, end_to_end.cfg,
                    context=row_context(end_to_end.cfg, batch))  # fmt: skip
    keep = batch.targets >= 0
    assert torch.allclose(e2e, F.cross_entropy(final[keep], batch.targets[keep]))


def test_corruption_acts_in_training_only(graph_batch):
    batch, task = graph_batch
    model = _model(task, corruption=0.5)
    weights = dict(model.named_parameters())
    torch.manual_seed(0)
    a = target_loss(weights, batch, model.cfg)
    torch.manual_seed(1)
    b = target_loss(weights, batch, model.cfg)
    assert not torch.equal(a, b)  # the fed-back values were corrupted differently
    first = score_targets(model, batch, batch_size=5)
    second = score_targets(model, batch, batch_size=16)
    has = batch.targets >= 0  # evaluation: no corruption (chunked as it likes)
    assert torch.equal(first.predictions[has], second.predictions[has])
    assert first.nodes == int((batch.targets >= 0).sum())


def test_corruption_scope_last_and_the_corrupted_batches(graph_batch):
    """scope "last": only the values of the nodes of depth t fed into iteration t + 1 are
    corrupted, the shallower ones stay the truth; corrupted_batches: the share of batches
    corrupted at all (a share near 0: the uncorrupted loss, number for number)."""
    batch, task = graph_batch
    model = _model(task, corruption=0.999, corruption_scope="last", teacher_forcing=True)
    ctx = dataclasses.replace(row_context(model.cfg, batch, teacher=True), corrupt=True)
    fed = {}
    hooks = [(f"iter.{t}.hook_value_embed", lambda x, hook: fed.setdefault(hook.name, x))
             for t in range(1, 3)]  # fmt: skip
    torch.manual_seed(0)
    model.run_with_hooks(batch.tokens, context=ctx, fwd_hooks=hooks)
    got = fed["iter.2.hook_value_embed"]
    truth = model.W_E[batch.targets.clamp(min=0)]
    nodes = batch.targets >= 0
    shallower = nodes & (batch.target_depths == 0)
    last = nodes & (batch.target_depths == 1)
    assert torch.equal(got[shallower], truth[shallower])
    changed = (got[last] != truth[last]).any(-1).float().mean()
    assert changed > 0.8, changed  # (a uniform draw keeps the truth with odds 1/23)
    weights = dict(model.named_parameters())
    rare = dataclasses.replace(model.cfg, corrupted_batches=1e-9)
    clean = dataclasses.replace(model.cfg, corruption=0.0, corruption_scope="all")
    torch.manual_seed(0)
    assert torch.equal(target_loss(weights, batch, rare), target_loss(weights, batch, clean))
    torch.manual_seed(0)
    assert not torch.equal(target_loss(weights, batch, model.cfg),
                           target_loss(weights, batch, clean))  # fmt: skip


def test_teacher_forcing_feeds_the_true_values_of_the_resolved_nodes_in_training_only(graph_batch):
    batch, task = graph_batch
    model = _model(task, corruption=0.0, teacher_forcing=True)
    weights = dict(model.named_parameters())
    ctx = row_context(model.cfg, batch, teacher=True)
    fed = {}
    hooks = [(f"iter.{t}.hook_value_embed", lambda x, hook: fed.setdefault(hook.name, x))
             for t in range(1, 3)]  # fmt: skip
    model.run_with_hooks(batch.tokens, context=ctx, fwd_hooks=hooks)
    readout = model.run_with_cache(batch.tokens, context=ctx)[1]["iter.0.hook_readout"]
    known = (batch.target_depths <= 0) & (batch.targets >= 0)
    deeper = (batch.target_depths > 0) & (batch.targets >= 0)
    got = fed["iter.1.hook_value_embed"]
    assert torch.equal(got[known], model.W_E[batch.targets[known]])  # depth 0: the truth
    assert torch.equal(got[deeper], model.W_E[readout.argmax(-1)[deeper]])  # else the model's
    assert not torch.equal(batch.targets[deeper], readout.argmax(-1)[deeper])  # (they differ)
    # the loss trains with the teacher, evaluation reads the model's own state
    plain = dataclasses.replace(model.cfg, teacher_forcing=False)
    with_teacher = target_loss(weights, batch, model.cfg)
    assert not torch.equal(with_teacher, target_loss(weights, batch, plain))
    scored = score_targets(model, batch).predictions
    twin = AssignAddTransformer(plain, seed=0)
    assert torch.equal(scored, score_targets(twin, batch).predictions)


def test_one_step_scores_each_node_at_its_depth_from_the_true_shallower_values(graph_batch):
    """score_targets(one_step=True): a node of depth d is read at iteration d, every node of
    depth < d fed its true value; the same as running with the teacher and picking by hand."""
    batch, task = graph_batch
    model = _model(task, corruption=0.0)
    weights = dict(model.named_parameters())
    ctx = row_context(model.cfg, batch, every_iteration=True, teacher=True)
    every = forward(weights, batch.tokens, model.cfg, context=ctx)
    has = batch.targets >= 0
    want = torch.full_like(batch.targets, -1)
    for t in range(every.shape[0]):
        at = has & (batch.target_depths == t)
        want[at] = every[t].argmax(-1)[at]
    one = score_targets(model, batch, batch_size=6, one_step=True)
    assert torch.equal(one.predictions[has], want[has])
    own = score_targets(model, batch)  # the model's own state: another number
    assert not torch.equal(one.predictions[has], own.predictions[has])
    feedforward = _model(task, recurrence="none", latent_supervision=False,
                         discrete_state=False, corruption=0.0)  # fmt: skip
    with pytest.raises(ValueError, match="one_step scores a recurrent model"):
        score_targets(feedforward, batch, one_step=True)


def test_the_relative_gain_scales_the_bias_and_not_the_model_at_init():
    """model.relative_gain g: the score bias is g x b_rel, b_rel drawn 1/g as wide, so a model
    starts as the gain-1 model does (the same logits) and its b_rel's gradient is g times
    larger (with Adam: the bias moves g times faster)."""
    base = dataclasses.replace(CFG, positions="relative", relative_window=4)
    one = AssignAddTransformer(base, seed=5)
    four = AssignAddTransformer(dataclasses.replace(base, relative_gain=4.0), seed=5)
    b1, b4 = one.blocks[1].attn.b_rel, four.blocks[1].attn.b_rel
    assert torch.allclose(4 * b4, b1) and not torch.allclose(b4, b1)
    tokens = _tokens()
    assert torch.allclose(one(tokens), four(tokens), atol=1e-5)
    for model in (one, four):
        model.zero_grad()
        model(tokens).logsumexp(-1).sum().backward()
    assert torch.allclose(four.blocks[1].attn.b_rel.grad, 4 * one.blocks[1].attn.b_rel.grad,
                          rtol=1e-3, atol=1e-6)  # fmt: skip
    with pytest.raises(ConfigError, match="model.relative_gain = 4.0 scales"):
        dataclasses.replace(CFG, relative_gain=4.0)


def test_relative_positions_are_a_bias_by_distance_and_no_learned_embedding():
    cfg = dataclasses.replace(CFG, positions="relative", relative_window=4)
    model = AssignAddTransformer(cfg, seed=5)
    b = model.blocks[0].attn.b_rel
    assert b.shape == (2, 4)
    bias = relative_bias(b, 6)
    assert torch.equal(bias[1, 5, 3], b[1, 2]) and torch.equal(bias[0, 5, 0], b[0, 3])
    tokens = _tokens()
    _, cache = model.run_with_cache(tokens)
    assert "hook_pos_embed" not in cache
    assert torch.equal(cache["blocks.0.hook_resid_pre"], cache["hook_embed"])
    weights = dict(model.named_parameters())
    q, k = cache["blocks.1.attn.hook_q"], cache["blocks.1.attn.hook_k"]
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / cfg.attn_scale
    want = scores + relative_bias(weights["blocks.1.attn.b_rel"], 30)
    assert torch.allclose(cache["blocks.1.attn.hook_attn_scores"].tril(), want.tril())
    # a row's offset moves no learned position: the same logits
    shifted = model(tokens, context=RowContext(pos_offset=torch.tensor([3, 0, 7, 1, 29])))
    assert torch.equal(shifted, model(tokens))
    answer = forward({n: w[None] for n, w in weights.items()}, tokens[None], model.cfg, "answer")
    assert torch.allclose(answer[0], model(tokens)[:, -1], atol=1e-6)  # through every position


def _layer_norm(x):
    x = x - x.mean(-1, keepdim=True)
    return x / (x.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()


def test_lnpre_normalizes_what_attention_the_mlp_and_the_readout_read():
    """model.normalization = "LNPre" (TransformerLens's LayerNormPre, seed 002's blocks): each
    attention, the MLP and the unembedding read the residual stream centred and divided by its
    RMS; the residual stream itself is not normalized; hooks ln1 / ln2 / ln_final as
    TransformerLens names them, and its apply_ln reads them. A recurrent model normalizes its
    readout after every iteration."""
    model = AssignAddTransformer(dataclasses.replace(CFG, normalization="LNPre"), seed=2)
    tokens = _tokens()
    logits, cache = model.run_with_cache(tokens)
    assert model.cfg.normalization_type == "LNPre"
    assert "blocks.0.ln2.hook_normalized" not in cache  # block 0 has no MLP
    for layer in range(2):
        normed = _layer_norm(cache[f"blocks.{layer}.hook_resid_pre"])
        assert torch.allclose(cache[f"blocks.{layer}.ln1.hook_normalized"], normed, atol=1e-5)
        q = torch.einsum("bpd,hde->bphe", normed, model.blocks[layer].attn.W_Q)
        assert torch.allclose(cache[f"blocks.{layer}.attn.hook_q"], q, atol=1e-5)
    mid = _layer_norm(cache["blocks.1.hook_resid_mid"])
    assert torch.allclose(cache["blocks.1.mlp.hook_pre"], mid @ model.W_in, atol=1e-5)
    final = _layer_norm(cache["blocks.1.hook_resid_post"])
    assert torch.allclose(logits, final @ model.W_U, atol=1e-5)
    stack = cache.accumulated_resid(apply_ln=True)
    assert torch.allclose(stack[-1] @ model.W_U, logits, atol=1e-5)
    plain = AssignAddTransformer(CFG, seed=2)  # the same weights without normalization
    assert not torch.allclose(plain(tokens), logits)
    assert "ln_final.hook_scale" not in plain.run_with_cache(tokens)[1]
    rec = AssignAddTransformer(dataclasses.replace(model.cfg, recurrence="fixed", iterations=2),
                               seed=2)  # fmt: skip
    _, rec_cache = rec.run_with_cache(tokens)
    resid = rec_cache["iter.1.blocks.1.hook_resid_post"]
    assert torch.allclose(rec_cache["iter.1.hook_readout"], _layer_norm(resid) @ rec.W_U,
                          atol=1e-5)  # fmt: skip
    weights = dict(model.named_parameters())
    answer = forward({n: w[None] for n, w in weights.items()}, tokens[None], model.cfg, "answer")
    assert torch.allclose(answer[0], logits[:, -1], atol=1e-6)  # through every position
    with pytest.raises(ConfigError, match="light_forward reads the paper's model"):
        light_forward(model, tokens)


def test_normalization_is_saved_only_when_set():
    assert "normalization" not in to_dict(CFG)
    assert to_dict(dataclasses.replace(CFG, normalization="LNPre"))["normalization"] == "LNPre"
    with pytest.raises(ConfigError, match="model.normalization"):
        dataclasses.replace(CFG, normalization="LN")


def test_relative_content_adds_a_key_per_head_and_distance():
    """model.relative_content: each score also gets q_i . W_rel[h, min(i - j, window - 1)]
    (DeBERTa's content-to-position term), scaled with q . k; saved only when set; it needs
    relative positions."""
    cfg = dataclasses.replace(CFG, positions="relative", relative_window=4, relative_content=True)
    model = AssignAddTransformer(cfg, seed=5)
    W_rel = model.blocks[1].attn.W_rel
    assert W_rel.shape == (2, 4, cfg.d_head_)
    tokens = _tokens()
    _, cache = model.run_with_cache(tokens)
    q, k = cache["blocks.1.attn.hook_q"], cache["blocks.1.attn.hook_k"]
    by_hand = torch.zeros(5, 2, 30, 30)
    for i in range(30):
        for j in range(i + 1):
            by_hand[:, :, i, j] = (q[:, i] * W_rel[:, min(i - j, 3)]).sum(-1)
    assert torch.allclose(relative_content_scores(q, W_rel).tril(), by_hand, atol=1e-6)
    want = (torch.einsum("bqhe,bkhe->bhqk", q, k) + by_hand) / cfg.attn_scale
    want = want + relative_bias(model.blocks[1].attn.b_rel, 30)
    assert torch.allclose(cache["blocks.1.attn.hook_attn_scores"].tril(), want.tril(), atol=1e-5)
    plain = AssignAddTransformer(dataclasses.replace(cfg, relative_content=False), seed=5)
    assert not hasattr(plain.blocks[1].attn, "W_rel")
    assert "relative_content" not in to_dict(plain.cfg) and to_dict(cfg)["relative_content"]
    with pytest.raises(ConfigError, match="model.relative_content = true adds a key"):
        dataclasses.replace(CFG, relative_content=True)
