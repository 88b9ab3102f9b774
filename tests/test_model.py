"""The hooked transformer: architecture, hooks, caches, circuits, fast path, init, config."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformer_lens import ActivationCache, FactoredMatrix

from empirical.config.io import ConfigError, from_dict, to_dict
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer

P, K, L = 97, 5, 16
V = P + K + 3


def tokens_for(batch: int, length: int = L, seed: int = 0, vocab: int = V) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def model() -> AssignAddTransformer:
    return AssignAddTransformer(ModelConfig.for_task(P, K, L), seed=0)


@pytest.fixture(scope="module")
def model64() -> AssignAddTransformer:
    return AssignAddTransformer(ModelConfig.for_task(P, K, L, dtype="float64"), seed=0)


# -- architecture -------------------------------------------------------------------------------


def test_parameters_no_biases_no_norm_no_layer1_mlp(model):
    assert [name for name, _ in model.named_parameters()] == [
        "embed.W_E",
        "pos_embed.W_pos",
        "blocks.0.attn.W_Q",
        "blocks.0.attn.W_K",
        "blocks.0.attn.W_V",
        "blocks.0.attn.W_O",
        "blocks.1.attn.W_Q",
        "blocks.1.attn.W_K",
        "blocks.1.attn.W_V",
        "blocks.1.attn.W_O",
        "blocks.1.mlp.W_in",
        "blocks.1.mlp.W_out",
        "unembed.W_U",
    ]
    assert list(model.state_dict()) == [name for name, _ in model.named_parameters()]
    assert model.blocks[0].mlp is None
    assert not any(isinstance(m, (torch.nn.LayerNorm, torch.nn.Linear)) for m in model.modules())


def test_weight_accessors_have_transformer_lens_shapes(model):
    d, e, m = 128, 128, 512
    assert model.W_E.shape == (V, d)
    assert model.W_pos.shape == (L, d)
    for name in ("W_Q", "W_K", "W_V"):
        assert getattr(model, name).shape == (2, 1, d, e)
        assert getattr(model.blocks[1].attn, name).shape == (1, d, e)
    assert model.W_O.shape == (2, 1, e, d)
    assert model.W_in.shape == (d, m) and model.W_in is model.blocks[1].mlp.W_in
    assert model.W_out.shape == (m, d)
    assert model.W_U.shape == (d, P)
    assert torch.equal(model.W_Q[1, 0], model.blocks[1].attn.W_Q[0])


def test_factored_circuits(model):
    qk, ov = model.QK, model.OV
    assert isinstance(qk, FactoredMatrix) and isinstance(ov, FactoredMatrix)
    assert qk.shape == (2, 1, 128, 128) and ov.shape == (2, 1, 128, 128)
    with torch.no_grad():
        for layer in range(2):
            attn = model.blocks[layer].attn
            expected_qk = attn.W_Q[0] @ attn.W_K[0].T
            torch.testing.assert_close(qk[layer, 0].AB, expected_qk)
            torch.testing.assert_close(attn.QK.AB[0], expected_qk)
            torch.testing.assert_close(ov.AB[layer, 0], attn.W_V[0] @ attn.W_O[0])


def test_logits_shape_dtype_and_loss(model):
    tokens = tokens_for(6)
    labels = torch.arange(6)
    logits = model(tokens)[:, -1]
    assert logits.shape == (6, P) and logits.dtype == torch.float32
    loss = model(tokens, labels, return_type="loss")
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))
    both_logits, both_loss = model(tokens, labels, return_type="both", fast=True)
    torch.testing.assert_close(both_loss, loss)
    with pytest.raises(ValueError, match="labels"):
        model(tokens, return_type="loss")


def test_forward_returns_transformer_lens_shape_and_last_only(model):
    tokens = tokens_for(6)
    labels = torch.arange(6)
    logits = model(tokens)
    assert logits.shape == (6, L, P)  # [batch, pos, d_vocab_out], the unembed at every position
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(logits, cache["resid_post", 1] @ model.W_U)
    last = model(tokens, last_only=True)
    assert last.shape == (6, P)
    torch.testing.assert_close(last, logits[:, -1])
    both_logits, both_loss = model(tokens, labels, return_type="both")
    torch.testing.assert_close(both_logits, logits)
    torch.testing.assert_close(both_loss, F.cross_entropy(logits[:, -1], labels))
    last_logits, last_loss = model(tokens, labels, return_type="both", last_only=True)
    assert last_logits.shape == (6, P)
    torch.testing.assert_close(last_loss, both_loss)
    assert model(tokens, return_type=None) is None
    with pytest.raises(ValueError, match="return_type"):
        model(tokens, labels, return_type="logprobs")
    short = model(tokens[:, :5])  # fewer positions than n_ctx: the prefix's logits
    torch.testing.assert_close(short, logits[:, :5], rtol=1e-5, atol=1e-6)


def test_bad_tokens_rejected(model):
    with pytest.raises(ValueError, match="n_ctx"):
        model(tokens_for(2, L + 1))
    with pytest.raises(ValueError, match="batch, pos"):
        model(tokens_for(2)[0])
    with pytest.raises(TypeError):
        model(tokens_for(2).float())


# -- hooks and the activation cache -------------------------------------------------------------

EXPECTED_SHAPES = {
    "hook_embed": (3, L, 128),
    "hook_pos_embed": (3, L, 128),
    "blocks.1.mlp.hook_pre": (3, L, 512),
    "blocks.1.mlp.hook_post": (3, L, 512),
    "blocks.1.hook_mlp_out": (3, L, 128),
}
for _l in range(2):
    for _n in ("resid_pre", "attn_out", "resid_mid", "resid_post"):
        EXPECTED_SHAPES[f"blocks.{_l}.hook_{_n}"] = (3, L, 128)
    for _n in ("q", "k", "v", "z"):
        EXPECTED_SHAPES[f"blocks.{_l}.attn.hook_{_n}"] = (3, L, 1, 128)
    EXPECTED_SHAPES[f"blocks.{_l}.attn.hook_result"] = (3, L, 1, 128)
    EXPECTED_SHAPES[f"blocks.{_l}.attn.hook_attn_scores"] = (3, 1, L, L)
    EXPECTED_SHAPES[f"blocks.{_l}.attn.hook_pattern"] = (3, 1, L, L)


def test_run_with_cache_hook_names_and_shapes(model):
    logits, cache = model.run_with_cache(tokens_for(3))
    assert isinstance(cache, ActivationCache)
    assert {k: tuple(v.shape) for k, v in cache.items()} == EXPECTED_SHAPES
    torch.testing.assert_close(logits, model(tokens_for(3)))
    assert not model.has_active_hooks()  # run_with_cache cleaned up


def test_cache_shorthand_and_semantics(model64):
    tokens = tokens_for(4)
    logits, cache = model64.run_with_cache(tokens)
    pattern = cache["pattern", 1]
    assert pattern.shape == (4, 1, L, L)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(4, 1, L, dtype=torch.float64))
    assert torch.all(pattern.triu(diagonal=1) == 0)  # causal
    assert cache["q", 0].shape == (4, L, 1, 128)
    assert cache["pre", 1].shape == (4, L, 512)
    assert cache["pattern", -1] is pattern
    # block 0 has no MLP: resid_post == resid_mid == resid_pre + attn_out
    torch.testing.assert_close(cache["resid_post", 0], cache["resid_mid", 0])
    torch.testing.assert_close(cache["resid_mid", 0], cache["resid_pre", 0] + cache["attn_out", 0])
    torch.testing.assert_close(cache["resid_pre", 1], cache["resid_post", 0])
    torch.testing.assert_close(cache["resid_post", 1][:, -1] @ model64.W_U, logits[:, -1])
    torch.testing.assert_close(cache["attn_out", 1], cache["result", 1].sum(2))
    scores = cache["attn_scores", 0]
    q, k = cache["q", 0], cache["k", 0]
    expected = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(128)
    mask = torch.tril(torch.ones(L, L, dtype=torch.bool))
    torch.testing.assert_close(scores[..., mask], expected[..., mask])


def test_activation_cache_stacking_helpers(model64):
    tokens = tokens_for(4)
    _, cache = model64.run_with_cache(tokens)
    acc, labels = cache.accumulated_resid(return_labels=True)
    assert labels == ["0_pre", "1_pre", "final_post"]
    assert acc.shape == (3, 4, L, 128)
    torch.testing.assert_close(acc[-1], cache["resid_post", 1])
    acc_mid, labels_mid = cache.accumulated_resid(incl_mid=True, return_labels=True)
    assert labels_mid == ["0_pre", "0_mid", "1_pre", "1_mid", "final_post"]

    parts, part_labels = cache.decompose_resid(return_labels=True)
    assert part_labels == ["embed", "pos_embed", "0_attn_out", "1_attn_out", "1_mlp_out"]
    torch.testing.assert_close(parts.sum(0), cache["resid_post", 1])
    mlp_in = cache.decompose_resid(layer=1, mlp_input=True)
    torch.testing.assert_close(mlp_in.sum(0), cache["resid_mid", 1])
    torch.testing.assert_close(cache.decompose_resid(layer=1).sum(0), cache["resid_pre", 1])

    assert cache.stack_activation("pattern").shape == (2, 4, 1, L, L)
    heads, head_labels = cache.stack_head_results(return_labels=True)
    assert head_labels == ["L0H0", "L1H0"] and heads.shape == (2, 4, L, 128)
    torch.testing.assert_close(heads[1], cache["attn_out", 1])
    neurons = cache.get_neuron_results(1, pos_slice=-1)
    torch.testing.assert_close(neurons.sum(-2), cache["mlp_out", 1][:, -1])
    labels = torch.arange(4)
    attrs = cache.logit_attrs(parts[:, :, -1], tokens=labels)
    logits = cache["resid_post", 1][:, -1] @ model64.W_U
    torch.testing.assert_close(attrs.sum(0), logits[torch.arange(4), labels])


def test_run_with_cache_options(model):
    tokens = tokens_for(1)
    _, cache = model.run_with_cache(tokens, remove_batch_dim=True)
    assert cache["pattern", 1].shape == (1, L, L)
    assert cache.accumulated_resid().shape == (3, L, 128)
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: "pattern" in name)
    assert list(cache.keys()) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    loss, cache = model.run_with_cache(
        tokens,
        torch.tensor([3]),
        return_type="loss",
        incl_bwd=True,
        names_filter="blocks.0.hook_resid_post",
    )
    model.zero_grad(set_to_none=True)
    assert loss.ndim == 0 and cache["blocks.0.hook_resid_post_grad"].shape == (1, L, 128)
    assert not model.has_active_hooks()


def test_run_with_hooks_can_ablate(model):
    tokens = tokens_for(8)
    clean = model(tokens)

    def zero(act, hook):
        return torch.zeros_like(act)

    ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_pattern", zero)])
    assert not torch.allclose(ablated, clean)
    # with layer-2 attention zeroed the logits depend on the last token's stream only
    _, cache = model.run_with_cache(tokens)
    mid = cache["resid_post", 0][:, -1]
    mlp = model.blocks[1].mlp
    with torch.no_grad():
        expected = (mid + F.relu(mid @ mlp.W_in) @ mlp.W_out) @ model.W_U
    torch.testing.assert_close(ablated[:, -1], expected)
    torch.testing.assert_close(model(tokens), clean)  # hooks were removed


def test_fast_path_refuses_attached_hooks(model):
    tokens = tokens_for(2)
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda a, hook: a)]):
        with pytest.raises(RuntimeError, match="hooks"):
            model.forward_fast(tokens)
    model.forward_fast(tokens)


def test_causal_masking(model64):
    tokens = tokens_for(3, seed=1)
    _, before = model64.run_with_cache(tokens)
    for j in (3, 9, L - 1):
        changed = tokens.clone()
        changed[:, j] = (changed[:, j] + 1 + torch.arange(3)) % V
        _, after = model64.run_with_cache(changed)
        for name, act in before.items():
            if name == "hook_pos_embed":
                continue
            query_dim = 2 if name.endswith(("hook_pattern", "hook_attn_scores")) else 1
            early = act.narrow(query_dim, 0, j)
            torch.testing.assert_close(
                after[name].narrow(query_dim, 0, j), early, rtol=1e-12, atol=1e-12
            )
        assert not torch.allclose(after["resid_post", 1][:, j], before["resid_post", 1][:, j])


# -- fast path ----------------------------------------------------------------------------------


def test_fast_path_matches_full_float32(model):
    tokens = tokens_for(64)
    full = model(tokens)[:, -1]
    torch.testing.assert_close(model.forward_fast(tokens), full, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model(tokens, fast=True), full, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model.forward_fast(tokens.int()), model.forward_fast(tokens))


@pytest.mark.parametrize("length", [L, 5, 1])
def test_fast_path_matches_full_float64_logits_and_gradients(model64, length):
    tokens = tokens_for(32, length, seed=2)
    labels = torch.randint(0, P, (32,), generator=torch.Generator().manual_seed(3))
    weights = torch.randn(32, P, generator=torch.Generator().manual_seed(4), dtype=torch.float64)

    def grads(forward):
        model64.zero_grad(set_to_none=True)
        logits = forward(tokens)
        (F.cross_entropy(logits, labels) + (weights * logits).sum() / 32).backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model64.named_parameters()}

    full_logits, full = grads(lambda t: model64(t, last_only=True))
    fast_logits, fast = grads(model64.forward_fast)
    model64.zero_grad(set_to_none=True)
    torch.testing.assert_close(fast_logits, full_logits, rtol=1e-12, atol=1e-12)
    assert fast.keys() == full.keys()
    for name in full:
        if length < L and name == "pos_embed.W_pos":
            assert torch.all(full[name][length:] == 0) and torch.all(fast[name][length:] == 0)
        torch.testing.assert_close(fast[name], full[name], rtol=1e-10, atol=1e-12, msg=name)


def test_fast_path_with_narrow_head():
    cfg = ModelConfig.for_task(11, 3, 8, d_model=32, d_head=8, d_mlp=64, dtype="float64")
    model = AssignAddTransformer(cfg, seed=5)
    assert model.W_Q.shape == (2, 1, 32, 8) and cfg.attn_scale == math.sqrt(8)
    tokens = tokens_for(16, 8, vocab=cfg.d_vocab)
    torch.testing.assert_close(
        model.forward_fast(tokens), model(tokens)[:, -1], rtol=1e-12, atol=1e-12
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fast_and_full_agree():
    model = AssignAddTransformer(ModelConfig.for_task(P, K, L), seed=0, device="cuda")
    tokens = tokens_for(64).cuda()
    assert model.device.type == "cuda"
    torch.testing.assert_close(
        model.forward_fast(tokens), model(tokens)[:, -1], rtol=1e-3, atol=1e-4
    )
    _, cache = model.run_with_cache(tokens)
    assert cache["pattern", 1].device.type == "cuda"
    assert model.cfg.device.type == "cuda"
    cpu = AssignAddTransformer(ModelConfig.for_task(P, K, L), seed=0)
    torch.testing.assert_close(model(tokens).cpu(), cpu(tokens.cpu()), rtol=1e-3, atol=1e-4)
    assert model.to_tokens("c=1, b=17, a=42, b+19=?").device.type == "cuda"


# -- init and determinism -----------------------------------------------------------------------


def test_init_is_deterministic_per_seed():
    cfg = ModelConfig.for_task(P, K, L)
    a, b, c = (AssignAddTransformer(cfg, seed=s) for s in (0, 0, 1))
    params = zip(a.named_parameters(), b.parameters(), c.parameters(), strict=True)
    for (name, pa), pb, pc in params:
        assert torch.equal(pa, pb), name
        assert not torch.equal(pa, pc), name
    g = AssignAddTransformer(cfg, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), g.parameters(), strict=True))
    torch.manual_seed(7)
    h1 = AssignAddTransformer(cfg)
    torch.manual_seed(7)
    h2 = AssignAddTransformer(cfg)
    assert all(torch.equal(x, y) for x, y in zip(h1.parameters(), h2.parameters(), strict=True))
    # same seed, float64: the same draws, cast
    d = AssignAddTransformer(ModelConfig.for_task(P, K, L, dtype="float64"), seed=0)
    assert all(x.dtype == torch.float64 for x in d.parameters())
    pairs = zip(a.parameters(), d.parameters(), strict=True)
    assert all(torch.equal(x.double(), y) for x, y in pairs)


def test_init_std():
    model = AssignAddTransformer(ModelConfig.for_task(P, K, L), seed=0)
    assert model.cfg.init_std_ == pytest.approx(0.8 / math.sqrt(128))
    assert model.W_in.std().item() == pytest.approx(0.8 / math.sqrt(128), rel=0.02)
    small = AssignAddTransformer(ModelConfig.for_task(P, K, L, init_std=0.02), seed=0)
    assert small.W_in.std().item() == pytest.approx(0.02, rel=0.02)
    assert small.W_E.std().item() == pytest.approx(0.02, rel=0.05)


# -- config -------------------------------------------------------------------------------------


def test_config_for_task_and_defaults():
    cfg = ModelConfig.for_task(97, 5, 16)
    assert (cfg.d_vocab, cfg.d_vocab_out, cfg.n_ctx) == (105, 97, 16)
    assert (cfg.d_model, cfg.d_head_, cfg.d_mlp, cfg.dtype) == (128, 128, 512, "float32")
    assert (cfg.n_layers, cfg.n_heads, cfg.attn_only, cfg.normalization_type) == (
        2,
        1,
        False,
        None,
    )
    assert ModelConfig(d_model=64).with_task(97, 5, 16).d_head_ == 64
    assert from_dict(ModelConfig, to_dict(cfg)) == cfg
    assert ModelConfig.for_task(97, 5, 16).with_task(97, 5, 16) == cfg


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"d_model": 0}, "d_model"),
        ({"d_mlp": -3}, "d_mlp"),
        ({"d_head": 2.5}, "d_head"),
        ({"d_vocab": True}, "d_vocab"),
        ({"init_std": -1.0}, "init_std"),
        ({"init_std": float("nan")}, "init_std"),
        ({"dtype": "float16"}, "dtype"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        ModelConfig(**kwargs)


def test_config_from_dict_errors_and_incomplete_config():
    with pytest.raises(ConfigError, match="d_mlp"):
        from_dict(ModelConfig, {"d_mlp": "wide"})
    with pytest.raises(ConfigError, match="n_layers"):
        from_dict(ModelConfig, {"n_layers": 5})  # depth is a field: 2..4
    with pytest.raises(ConfigError, match="d_vocab"):
        AssignAddTransformer(ModelConfig())
    with pytest.raises(ConfigError, match="n_ctx"):
        ModelConfig(n_ctx=12).with_task(97, 5, 16)
    with pytest.raises(ConfigError, match="p"):
        ModelConfig.for_task(0, 5, 16)


# -- the TransformerLens user's interface -------------------------------------------------------

PROMPT = "c=1, b=17, a=42, b+19=?"  # answer 17 + 19 = 36
CORRUPTED = "c=1, b=20, a=42, b+19=?"  # answer 39; differs at position 3 only


def test_cfg_has_the_fields_transformer_lens_reads(model):
    cfg = model.cfg
    assert isinstance(cfg.d_head, int) and cfg.d_head == 128
    assert cfg.device == model.device == torch.device("cpu")
    assert cfg.n_key_value_heads is None and cfg.n_heads == 1 and cfg.n_layers == 2
    assert ModelConfig.for_task(P, K, L).d_head == 128  # with_task fills it
    assert ModelConfig.for_task(P, K, L, d_model=64).d_head == 64
    assert ModelConfig.for_task(P, K, L, d_head=16).d_head == 16
    assert "device" not in to_dict(cfg)  # an attribute, never saved


def test_cfg_device_follows_the_model():
    cfg = ModelConfig.for_task(11, 3, 8, d_model=16, d_mlp=16)
    model = AssignAddTransformer(cfg, seed=0)
    assert model.cfg is not cfg and cfg.d_head is not None
    model.to("meta")
    assert model.cfg.device == torch.device("meta") == model.device
    assert cfg.device == torch.device("cpu")  # the caller's config is not the model's
    model.to_empty(device="cpu")
    assert model.cfg.device == torch.device("cpu")


def test_to_tokens_and_to_str_tokens(model):
    tokens = model.to_tokens(PROMPT)
    assert tokens.shape == (1, L) and tokens.dtype == torch.long
    assert tokens.device == model.device
    names = model.to_str_tokens(tokens)
    assert names[:6] == ["c", "1", "b", "17", "a", "42"]
    assert names[-4:] == ["+", "b", "19", "="] and set(names[6:-4]) == {"pad"}
    assert model.to_str_tokens(PROMPT) == names == model.to_str_tokens(tokens[0])
    assert model.vocab.decode(tokens[0]) == "c=1,b=17,a=42,b+19=?"
    assert model.vocab.label(tokens[0]) == 36
    both = model.to_tokens([PROMPT, CORRUPTED])
    assert both.shape == (2, L) and torch.equal(both[0], tokens[0])
    assert (both[0] != both[1]).nonzero().flatten().tolist() == [3]
    assert model.to_str_tokens([PROMPT, CORRUPTED])[1][3] == "20"
    assert model.to_str_tokens(both)[1] == model.to_str_tokens(CORRUPTED)
    token_form = " ".join(names)
    assert torch.equal(model.to_tokens(token_form), tokens)
    torch.testing.assert_close(model(PROMPT), model(tokens))  # forward takes text too
    with pytest.raises(ValueError, match="BOS"):
        model.to_tokens(PROMPT, prepend_bos=True)
    with pytest.raises(ValueError, match="never assigned"):
        model.to_tokens("c=1, d+2=?")
    assert model.to_tokens("c=1, d+2=?", check=False).shape == (1, L)
    with pytest.raises(TypeError):
        model.to_tokens(3)
    vocab = model.vocab
    assert (vocab.p, vocab.K, vocab.L) == (P, K, L)


def test_transformer_lens_patching_runs_unmodified(model64):
    from transformer_lens import patching

    model64.eval()
    clean = model64.to_tokens(PROMPT)
    corrupted = model64.to_tokens(CORRUPTED)
    _, clean_cache = model64.run_with_cache(clean)

    def logit_diff(logits):  # TransformerLens's metric contract: logits [batch, pos, d_vocab]
        return (logits[:, -1, 36] - logits[:, -1, 39]).mean()

    with torch.no_grad():
        clean_diff = float(logit_diff(model64(clean)))
        corrupted_diff = float(logit_diff(model64(corrupted)))
    assert clean_diff != pytest.approx(corrupted_diff)

    resid = patching.get_act_patch_resid_pre(model64, corrupted, clean_cache, logit_diff)
    assert resid.shape == (2, L)  # [layer, pos]
    # layer 0's input differs only at position 3: patching it there is the clean run
    # (TransformerLens stores the metric in float32)
    assert float(resid[0, 3]) == pytest.approx(clean_diff, rel=1e-6)
    others = [t for t in range(L) if t != 3]
    torch.testing.assert_close(resid[0, others], torch.full((L - 1,), corrupted_diff))
    heads = patching.get_act_patch_attn_head_out_by_pos(model64, corrupted, clean_cache, logit_diff)
    assert heads.shape == (2, L, 1)  # [layer, pos, head]
    # causal: before position 3 both runs' heads output the same
    torch.testing.assert_close(heads[:, :3, 0], torch.full((2, 3), corrupted_diff))


def _hooked_transformer_available() -> bool:
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(
    _hooked_transformer_available(), reason="TransformerLens 3's patching does not check the mode"
)
def test_transformer_lens_refuses_training_mode(model):
    from transformer_lens import patching

    fresh = AssignAddTransformer(ModelConfig.for_task(P, K, L), seed=0)
    assert fresh.training
    tokens = fresh.to_tokens(PROMPT)
    _, cache = fresh.run_with_cache(tokens)
    with pytest.raises(ValueError, match="eval"):
        patching.get_act_patch_resid_pre(fresh, tokens, cache, lambda x: x[0, -1, 0])


@pytest.mark.skipif(
    not _hooked_transformer_available(), reason="needs TransformerLens 3.x (HookedTransformer)"
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_export_to_hooked_transformer_gives_the_same_logits(dtype):
    from transformer_lens import HookedTransformer

    from empirical.model.export import to_hooked_transformer

    cfg = ModelConfig.for_task(P, K, L, d_model=64, d_head=32, d_mlp=96, dtype=dtype)
    model = AssignAddTransformer(cfg, seed=3).eval()
    ht = to_hooked_transformer(model)
    assert isinstance(ht, HookedTransformer) and not ht.training
    tokens = tokens_for(16)
    with torch.no_grad():
        ours, theirs = model(tokens), ht(tokens)
    assert theirs.shape == ours.shape == (16, L, P)
    torch.testing.assert_close(theirs, ours, rtol=1e-6, atol=1e-6)
    _, cache = ht.run_with_cache(tokens)
    _, our_cache = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["pattern", 1], our_cache["pattern", 1], rtol=1e-6, atol=1e-6)
    assert float(cache["mlp_out", 0].abs().max()) == 0.0  # block 0's MLP is absent: zeros


@pytest.mark.skipif(_hooked_transformer_available(), reason="TransformerLens 3 is installed")
def test_export_explains_that_it_needs_transformer_lens_3(model):
    from empirical.model.export import to_hooked_transformer

    with pytest.raises(ImportError, match="TransformerLens 3"):
        to_hooked_transformer(model)
