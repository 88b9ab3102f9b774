"""model.n_heads with TransformerLens's head conventions: the hooked forward, the fast kernel
and batched members agree for n_heads = 2 (logits and gradients, depths 2 and 3), the shapes
are TransformerLens's, n_heads = 2 equals a TransformerLens 3 HookedTransformer with the same
weights (skipped without TransformerLens 3), and the one-head analyses refuse a multi-head
model with a clear error."""

from __future__ import annotations

import pytest
import torch

from empirical.config.io import ConfigError
from empirical.model.batched import BatchedModel
from empirical.model.config import ModelConfig
from empirical.model.fast import fast_forward, member_weights
from empirical.model.transformer import AssignAddTransformer


def _model(n_layers: int = 2, n_heads: int = 2, dtype: str = "float64", seed: int = 0):
    cfg = ModelConfig.for_task(
        7, 3, 8, d_model=12, n_heads=n_heads, d_mlp=20, n_layers=n_layers, dtype=dtype
    )
    return AssignAddTransformer(cfg, seed=seed)


def _tokens(model, batch: int = 16, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.d_vocab, (batch, model.cfg.n_ctx), generator=gen)


def test_head_width_defaults_to_d_model_over_n_heads_and_must_divide():
    assert ModelConfig.for_task(7, 3, 8, d_model=12, n_heads=3).d_head == 4
    assert ModelConfig.for_task(7, 3, 8, d_model=12).d_head == 12  # one head: as before
    assert ModelConfig.for_task(7, 3, 8, d_model=12, n_heads=5, d_head=4).d_head == 4
    with pytest.raises(ConfigError, match="model.n_heads: 5 heads do not divide d_model = 12"):
        ModelConfig(d_model=12, n_heads=5)
    with pytest.raises(ConfigError, match="model.n_heads: must be a positive integer, got 0"):
        ModelConfig(n_heads=0)


def test_shapes_are_transformer_lens_s():
    model = _model()
    _, cache = model.run_with_cache(_tokens(model, 4))
    e = model.cfg.d_head
    assert e == 6 and model.W_Q.shape == (2, 2, 12, 6) and model.W_O.shape == (2, 2, 6, 12)
    assert cache["q", 0].shape == (4, 8, 2, e) and cache["z", 1].shape == (4, 8, 2, e)
    assert cache["pattern", 1].shape == (4, 2, 8, 8)
    assert cache["result", 0].shape == (4, 8, 2, 12)
    assert model.QK.AB.shape == (2, 2, 12, 12)


@pytest.mark.parametrize("n_layers", [2, 3])
def test_fast_kernel_equals_the_hooked_forward_with_two_heads(n_layers):
    model = _model(n_layers)
    tokens = _tokens(model)
    labels = torch.randint(0, model.cfg.d_vocab_out, (16,))
    hooked = model(tokens)[:, -1]
    fast = model.forward_fast(tokens)
    torch.testing.assert_close(fast, hooked, rtol=0, atol=1e-12)
    grads = []
    for path in ("hooked", "fast"):
        model.zero_grad()
        model(tokens, labels, return_type="loss", fast=path == "fast").backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=0, atol=1e-12, msg=name)
    # the heads matter: the second head alone changes the logits
    with torch.no_grad():
        model.blocks[0].attn.W_O[1].zero_()
    assert not torch.allclose(model.forward_fast(tokens), fast, atol=1e-6)


def test_batched_members_with_two_heads_equal_each_model():
    cfg = _model().cfg
    batched = BatchedModel(cfg, [0, 1])
    tokens = torch.stack([_tokens(batched, seed=s) for s in (1, 2)])
    logits = batched.forward_fast(tokens)
    for m, seed in enumerate((0, 1)):
        alone = AssignAddTransformer(cfg, seed=seed).forward_fast(tokens[m])
        assert torch.equal(logits[m], alone)


def test_one_head_analyses_refuse_two_heads():
    from empirical.bridge.compare_qk.observe import Weights

    model = _model()
    one_head = "single attention head per block; this model has model.n_heads = 2"
    with pytest.raises(ConfigError, match=one_head):
        Weights.of(model)
    with pytest.raises(ValueError, match="one-head model; this one has 2 heads"):
        fast_forward(member_weights(model), _tokens(model)[None], 1.0, internals=True)


def _has_hooked_transformer() -> bool:
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(
    not _has_hooked_transformer(), reason="needs TransformerLens 3.x (HookedTransformer)"
)
@pytest.mark.parametrize("n_layers", [2, 3])
def test_two_heads_equal_a_transformer_lens_hooked_transformer(n_layers):
    from empirical.model.export import to_hooked_transformer

    model = _model(n_layers)
    ht = to_hooked_transformer(model)
    assert ht.cfg.n_heads == 2 and ht.cfg.d_head == 6
    tokens = _tokens(model)
    with torch.no_grad():
        ours, cache = model.run_with_cache(tokens)
        theirs, their_cache = ht.run_with_cache(tokens)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    for name in ("pattern", "q", "z", "attn_out", "resid_post"):
        for layer in range(n_layers):
            torch.testing.assert_close(
                cache[name, layer], their_cache[name, layer], rtol=0, atol=1e-12
            )
    torch.testing.assert_close(model.forward_fast(tokens), theirs[:, -1], rtol=0, atol=1e-12)
