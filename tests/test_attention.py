"""One attention computation (empirical.model.attention): its causal pattern, the split
forward at layer 2's input (empirical.model.partial) with several heads against the hooked
forward, and a value mix that is not linear (LINEAR_MIX False) taken up by every path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from empirical.model import attention, partial
from empirical.model.config import ModelConfig
from empirical.model.fast import fast_forward, member_weights
from empirical.model.forward import forward
from empirical.model.transformer import AssignAddTransformer


def _model(n_heads: int, n_layers: int = 2, seed: int = 0):
    cfg = ModelConfig.for_task(
        7, 3, 8, d_model=16, n_heads=n_heads, d_mlp=20, n_layers=n_layers, dtype="float64"
    )
    return AssignAddTransformer(cfg, seed=seed)


def _tokens(model, batch: int = 24, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.d_vocab, (batch, model.cfg.n_ctx), generator=gen)


def test_the_pattern_is_the_causal_softmax_for_the_last_queries():
    scores = torch.randn(3, 2, 6, 6, dtype=torch.float64)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    want = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    assert torch.equal(attention.pattern(scores), want)
    assert torch.equal(attention.pattern(scores[:, :, 4:]), want[:, :, 4:])  # the last two
    assert torch.equal(attention.pattern(scores[:, :, 5:]), torch.softmax(scores[:, :, 5:], -1))
    heads = [torch.randn(4, 5), torch.randn(4, 5)]
    assert attention.stack_heads(heads[:1], -2).shape == (4, 1, 5)  # a view: [4, 1 head, 5]
    assert attention.stack_heads(heads).shape == (2, 4, 5)  # third from the end of the output
    for per_head in (heads[:1], heads):
        again = attention.unstack_heads(attention.stack_heads(per_head, -2), -2)
        assert all(map(torch.equal, again, per_head))


@pytest.mark.parametrize("n_heads", [2, 4])
def test_the_split_forward_takes_heads(n_heads):
    model = _model(n_heads)
    tokens = _tokens(model)
    labels = torch.randint(0, model.cfg.d_vocab_out, (len(tokens),))
    w = partial.Weights.of(model)
    assert w.W_Q2.shape == (n_heads, 16, 16 // n_heads) and w.W_OV1.shape == (n_heads, 16, 16)
    l1 = partial.layer1(w, tokens)
    W_Q2 = w.W_Q2.clone().requires_grad_(True)
    logits, pattern2 = partial.layer2(w, l1.resid1, W_Q2=W_Q2)
    ref, cache = model.run_with_cache(tokens)
    atol = dict(rtol=0, atol=1e-12)
    torch.testing.assert_close(l1.pattern1, cache["pattern", 0], **atol)
    torch.testing.assert_close(l1.resid1, cache["resid_post", 0], **atol)
    torch.testing.assert_close(logits, ref[:, -1], **atol)
    torch.testing.assert_close(pattern2, cache["pattern", 1][:, :, -1], **atol)
    # layer 2's key-query factors by autograd, as compare-qk takes them: the hooked model's
    (grad,) = torch.autograd.grad(F.cross_entropy(logits, labels), W_Q2)
    model.zero_grad()
    F.cross_entropy(model(tokens)[:, -1], labels).backward()
    torch.testing.assert_close(grad, model.blocks[1].attn.W_Q.grad, **atol)
    # the pattern, the query row or P = 0 given: the same numbers
    query = torch.einsum("bd,hde,hfe->bhf", l1.resid1[:, -1], w.W_Q2, w.W_K2)
    P = torch.zeros(n_heads, 16, 16, dtype=torch.float64)
    for given in (dict(pattern=pattern2), dict(query=query), dict(P=P)):
        again, pattern = partial.layer2(w, l1.resid1, **given)
        torch.testing.assert_close(again, logits.detach(), **atol)
        torch.testing.assert_close(pattern, pattern2, **atol)
    # layer 1's pattern set: as a hook on blocks.0.attn.hook_pattern
    uniform = torch.ones(8, 8, dtype=torch.float64).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(len(tokens), n_heads, 8, 8)
    hooked = model.run_with_hooks(
        tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda p, hook: uniform)]
    )
    set_l1 = partial.layer1(w, tokens, uniform)
    torch.testing.assert_close(partial.layer2(w, set_l1.resid1)[0], hooked[:, -1], **atol)


def test_a_value_mix_that_is_not_linear_is_taken_up_by_every_path(monkeypatch):
    model = _model(2, n_layers=3)
    tokens = _tokens(model)
    weights = member_weights(model)
    want = fast_forward(weights, tokens[None], model.cfg.attn_scale).logits
    monkeypatch.setattr(attention, "LINEAR_MIX", False)
    # the answer-only forward through every position (here: the same numbers)
    got = forward(weights, tokens[None], model.cfg, positions="answer")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="linear in the values"):
        fast_forward(weights, tokens[None], model.cfg.attn_scale)
    with pytest.raises(ValueError, match="linear in the values"):
        partial.layer1(partial.Weights.of(_model(1)), tokens)
