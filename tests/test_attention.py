"""One attention computation (empirical.model.attention): its causal pattern, the split
forward at layer 2's input (empirical.model.partial) with several heads against the hooked
forward, and model.attention's variants (docs/heads.md): each against seed 003's definition
written out here, linear attention through the kernel and the split forward, HYLA through
every position (the tables refuse it), the option's checks and how it is saved. The softmax
default's bits: tests/test_forward_bits.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from empirical.config.io import ConfigError, config_to_toml, from_dict, to_dict
from empirical.model import attention, partial
from empirical.model.batched import BatchedModel
from empirical.model.config import ModelConfig
from empirical.model.export import to_hooked_transformer
from empirical.model.fast import fast_forward, member_weights
from empirical.model.forward import forward
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import RunConfig, config_fingerprint


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


def _reference_layer(x, W_Q, W_K, W_V, W_O, kind):
    """Seed 003's attention layer written out from its definition (docs/heads.md; the authors'
    DotProductAttention and target networks), independent of empirical.model.attention."""
    L, e = x.shape[1], W_Q.shape[-1]
    q = torch.einsum("bpd,hde->bphe", x, W_Q) / e**0.5
    k = torch.einsum("bpd,hde->bphe", x, W_K)
    v = torch.einsum("bpd,hde->bphe", x, W_V)
    s = torch.einsum("bqhe,bkhe->bhqk", q, k)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    if kind == "softmax":
        a = torch.softmax(torch.where(keep, s, torch.finfo(s.dtype).min), dim=-1)
    else:
        s = torch.where(keep, s, 0.0)
        a = s * torch.rsqrt((s * s).mean(dim=1, keepdim=True) + 1e-6)
    if kind == "hyla":
        u = torch.relu(torch.einsum("bhqk,bkhe->bqke", a, v))
        z = torch.einsum("bhqk,bqke->bqhe", a, u)
    else:
        z = torch.einsum("bhqk,bkhe->bqhe", a, v)
    return torch.einsum("bqhe,hed->bqd", z, W_O)


def _reference_logits(model, tokens):
    kind, w = model.cfg.attention, model
    resid = w.W_E[tokens] + w.W_pos[: tokens.shape[1]]
    for layer in range(model.cfg.n_layers):
        a = model.blocks[layer].attn
        resid = resid + _reference_layer(resid, a.W_Q, a.W_K, a.W_V, a.W_O, kind)
    resid = resid + torch.relu(resid @ w.W_in) @ w.W_out
    return resid @ w.W_U


@pytest.mark.parametrize("kind", ["softmax", "linear", "hyla"])
def test_each_attention_is_seed_003_s_definition(kind):
    model = _model(4, n_layers=2) if kind == "softmax" else _kind_model(kind)
    tokens = _tokens(model)
    torch.testing.assert_close(model(tokens), _reference_logits(model, tokens), rtol=0,
                               atol=1e-12)  # fmt: skip
    _, cache = model.run_with_cache(tokens)
    pattern = cache["pattern", 0]  # [B, h, L, L]
    future = torch.ones(8, 8, dtype=torch.bool).triu(1)
    if kind == "softmax":
        torch.testing.assert_close(pattern.sum(-1), torch.ones(24, 4, 8, dtype=torch.float64))
    else:  # the code: zero on the future; mean square over the heads ms / (ms + eps)
        assert torch.equal(pattern[..., future], torch.zeros_like(pattern[..., future]))
        ms = cache["attn_scores", 0].square().mean(1)
        torch.testing.assert_close(pattern.square().mean(1), ms / (ms + attention.RMS_EPS))
        assert float(pattern.min()) < 0  # signed: not a distribution over the keys


def _kind_model(kind: str, n_layers: int = 2, seed: int = 0):
    cfg = ModelConfig.for_task(7, 3, 8, d_model=16, n_heads=4, d_mlp=20, n_layers=n_layers,
                               dtype="float64", attention=kind)  # fmt: skip
    return AssignAddTransformer(cfg, seed=seed)


@pytest.mark.parametrize("n_layers", [2, 3])
def test_linear_attention_trains_through_the_kernel_with_the_hooked_gradients(n_layers):
    model = _kind_model("linear", n_layers)
    tokens = _tokens(model)
    labels = torch.randint(0, model.cfg.d_vocab_out, (len(tokens),))
    torch.testing.assert_close(model.forward_fast(tokens), model(tokens)[:, -1], rtol=0,
                               atol=1e-12)  # fmt: skip
    grads = []
    for fast in (False, True):
        model.zero_grad()
        model(tokens, labels, return_type="loss", fast=fast).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=0, atol=1e-12, msg=name)
    # the split forward takes it too (its own float operations: the same numbers)
    w = partial.Weights.of(model) if n_layers == 2 else None
    if w is not None:
        l1 = partial.layer1(w, tokens)
        torch.testing.assert_close(partial.layer2(w, l1.resid1)[0], model(tokens)[:, -1],
                                   rtol=0, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("n_layers", [2, 3])
def test_hyla_trains_through_every_position_and_the_tables_refuse_it(n_layers):
    model = _kind_model("hyla", n_layers)
    tokens = _tokens(model)
    labels = torch.randint(0, model.cfg.d_vocab_out, (len(tokens),))
    weights = member_weights(model)
    got = forward(weights, tokens[None], model.cfg, positions="answer")[0]
    torch.testing.assert_close(got, model(tokens, last_only=True), rtol=0, atol=1e-12)
    model.zero_grad()
    model(tokens, labels, return_type="loss", fast=True).backward()  # the training path
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    with pytest.raises(ValueError, match="linear in the values"):
        fast_forward(weights, tokens[None], model.cfg.attn_scale, attention="hyla")
    with pytest.raises(ConfigError, match="model.attention = 'hyla' .*hooked model"):
        partial.Weights.of(_kind_model("hyla"))
    with pytest.raises(ValueError, match="W_O only"):
        attention.attend(torch.ones(1, 4, 2, 2), torch.ones(1, 4, 2, 3), None, None, kind="hyla")


def test_batched_hyla_members_equal_each_model():
    cfg = _kind_model("hyla").cfg
    batched = BatchedModel(cfg, [0, 1])
    tokens = torch.stack([_tokens(batched, seed=s) for s in (1, 2)])
    logits = batched.forward_fast(tokens)
    for m, seed in enumerate((0, 1)):
        alone = AssignAddTransformer(cfg, seed=seed)
        torch.testing.assert_close(logits[m], alone(tokens[m])[:, -1], rtol=0, atol=1e-12)


def test_the_attention_option_is_checked_and_saved_only_when_not_the_default():
    with pytest.raises(ConfigError, match=r"model.attention: 'rms' is not one of \['softmax', "
                       r"'linear', 'hyla'\]"):  # fmt: skip
        ModelConfig(attention="rms", n_heads=4)
    with pytest.raises(ConfigError, match="model.attention = 'linear' .*model.n_heads = 1"):
        ModelConfig(attention="linear")
    run = RunConfig()
    assert "attention" not in to_dict(run)["model"]  # config.toml as before the field
    assert "attention" not in config_to_toml(run)
    hyla = dataclasses.replace(run, model=ModelConfig(n_heads=4, attention="hyla"))
    assert to_dict(hyla)["model"]["attention"] == "hyla"
    assert from_dict(RunConfig, to_dict(hyla)) == hyla
    assert from_dict(RunConfig, to_dict(run)).model.attention == "softmax"
    assert config_fingerprint(hyla) != config_fingerprint(
        dataclasses.replace(hyla, model=ModelConfig(n_heads=4))
    )
    explicit = dataclasses.replace(run, model=ModelConfig(attention="softmax"))
    assert config_fingerprint(explicit) == config_fingerprint(run)  # the default: unchanged
    with pytest.raises(ConfigError, match="TransformerLens's attention is softmax"):
        to_hooked_transformer(_kind_model("linear"))
