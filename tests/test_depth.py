"""Depth as a config field (model.n_layers = 2..4): validation, the 2-layer model unchanged
bit for bit, the fast forward against the hooked one at every depth, TransformerLens tools,
the batched model, training / resume / load_run / checkpoints of a 3-layer run, and the
analyses' refusal of a deeper run."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
import torch

from empirical.config.io import ConfigError, from_dict
from empirical.model import AssignAddTransformer, CheckpointError, ModelConfig, load_model
from empirical.model.batched import BatchedModel
from empirical.model.checkpoint import checkpoint_dict, model_from_checkpoint
from empirical.model.device import cpu_model
from empirical.model.fast import PARAM_NAMES, fast_forward, member_weights, param_names
from empirical.runs.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TINY = [  # the learners' tiny config of the recorded 2-layer losses below
    "task.p=11", "task.K=3", "task.L=8", "task.max_assignments=2", 'task.r1=["c"]',
    'task.r2=["b"]', "model.d_model=16", "model.d_mlp=32", "train.lr=0.01",
    "train.batch_size=32", "train.lr_schedule=constant", "train.device=cpu",
]  # fmt: skip

# fmt: off
# Training losses of the code BEFORE model.n_layers became a field (2-layer model), as float.hex:
# 30 steps of SingleLearner and of a 2-member BatchLearner on fixed random batches (see
# tests/test_depth.py::_tiny_losses). Recorded once, on RECORDED_CPU (torch 2.13.0 CPU); a
# change of the 2-layer arithmetic fails. Bit-identity holds on one CPU kind only (another BLAS
# kernel rounds float32 products differently): elsewhere the test allows float32 rounding.
RECORDED_CPU = "Intel(R) Xeon(R) Processor"
SINGLE_LOSSES = [
    "0x1.331b4a0000000p+1", "0x1.39af460000000p+1", "0x1.36c6a40000000p+1",
    "0x1.3b29860000000p+1", "0x1.3b9ebc0000000p+1", "0x1.348e500000000p+1",
    "0x1.3ca9920000000p+1", "0x1.3b91440000000p+1", "0x1.3577940000000p+1",
    "0x1.30772c0000000p+1", "0x1.344d700000000p+1", "0x1.3608c00000000p+1",
    "0x1.352b940000000p+1", "0x1.3a514a0000000p+1", "0x1.3651740000000p+1",
    "0x1.323ab20000000p+1", "0x1.325fa20000000p+1", "0x1.36b7940000000p+1",
    "0x1.3757b80000000p+1", "0x1.37c0580000000p+1", "0x1.3b51020000000p+1",
    "0x1.2fdba20000000p+1", "0x1.2d88a60000000p+1", "0x1.32d2c80000000p+1",
    "0x1.3117b20000000p+1", "0x1.349afc0000000p+1", "0x1.305dfe0000000p+1",
    "0x1.33ed6e0000000p+1", "0x1.2d03fa0000000p+1", "0x1.3488880000000p+1",
]
BATCH_LOSSES = [  # member 0, member 1 of each step
    "0x1.433ee60000000p+1", "0x1.34d5ea0000000p+1",
    "0x1.32d1540000000p+1", "0x1.38a7d00000000p+1",
    "0x1.3511ea0000000p+1", "0x1.31c37a0000000p+1",
    "0x1.3ac4060000000p+1", "0x1.30cace0000000p+1",
    "0x1.41967a0000000p+1", "0x1.2e8a840000000p+1",
    "0x1.3094a00000000p+1", "0x1.3b35fc0000000p+1",
    "0x1.3783700000000p+1", "0x1.2e3a280000000p+1",
    "0x1.3ac0600000000p+1", "0x1.3c4d5e0000000p+1",
    "0x1.3c71580000000p+1", "0x1.30b42e0000000p+1",
    "0x1.3be51c0000000p+1", "0x1.2c44d00000000p+1",
    "0x1.33c4e60000000p+1", "0x1.2e84f80000000p+1",
    "0x1.375f240000000p+1", "0x1.2e8d560000000p+1",
    "0x1.36c2d40000000p+1", "0x1.397b880000000p+1",
    "0x1.36b6280000000p+1", "0x1.36e2900000000p+1",
    "0x1.2e02b60000000p+1", "0x1.3548640000000p+1",
    "0x1.2d3d7e0000000p+1", "0x1.2a7b840000000p+1",
    "0x1.32c43a0000000p+1", "0x1.3da56e0000000p+1",
    "0x1.38d50a0000000p+1", "0x1.432d2a0000000p+1",
    "0x1.3bdd4a0000000p+1", "0x1.3575660000000p+1",
    "0x1.2df1bc0000000p+1", "0x1.368eee0000000p+1",
    "0x1.3243e00000000p+1", "0x1.3c91280000000p+1",
    "0x1.3494600000000p+1", "0x1.33d89e0000000p+1",
    "0x1.33683e0000000p+1", "0x1.32d8080000000p+1",
    "0x1.30efa00000000p+1", "0x1.31c0e00000000p+1",
    "0x1.3604b20000000p+1", "0x1.32a1da0000000p+1",
    "0x1.37aaaa0000000p+1", "0x1.321d080000000p+1",
    "0x1.3926fc0000000p+1", "0x1.3443300000000p+1",
    "0x1.330c840000000p+1", "0x1.39c5020000000p+1",
    "0x1.378f060000000p+1", "0x1.37c1dc0000000p+1",
    "0x1.32b6300000000p+1", "0x1.37693c0000000p+1",
]
# hooked logits (sum, sum of squares) and fast internals of a seed-5 model, float64 sums of
# the float32 tensors, as float.hex
HOOKED_LOGITS = ("0x1.78b079d7c0000p+1", "0x1.6d8ec8af7ccf6p+5")
FAST_INTERNALS = {
    "logits": ("0x1.770c054800000p-1", "0x1.b0b47bb81567ap+1"),
    "pattern1": ("0x1.7ffffff900000p+5", "0x1.051900385e7ccp+4"),
    "pattern2": ("0x1.8000001800000p+2", "0x1.80d2a981f41d3p-1"),
    "resid_mid": ("0x1.20240d0c00000p+2", "0x1.66f66b95142fap+2"),
    "C": ("0x1.2f993d8b40000p+1", "0x1.fb38c928ab8f1p+3"),
    "C_OV": ("-0x1.fa42751800000p-1", "0x1.c1bc8496da712p+2"),
}
# fmt: on


@contextlib.contextmanager
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _batches(model_cfg: ModelConfig, members: int, steps: int):
    g = torch.Generator().manual_seed(1234)
    shape = (members, 32, model_cfg.n_ctx)
    return [
        (
            torch.randint(0, model_cfg.d_vocab, shape, generator=g),
            torch.randint(0, model_cfg.d_vocab_out, (members, 32), generator=g),
        )
        for _ in range(steps)
    ]


def _tiny_losses(*overrides: str, steps: int = 30) -> tuple[list[float], list[float]]:
    """Training losses of 30 steps of SingleLearner (seed 0) and of a BatchLearner of seeds 0
    and 3, on fixed random batches, one thread."""
    from empirical.train.learners import BatchLearner, SingleLearner

    cpu = torch.device("cpu")
    with one_thread():
        cfg = load_run_config(None, [*TINY, *overrides])
        single = SingleLearner(cfg, cpu)
        batches = _batches(cfg.built_model_config(), 1, steps)
        one = [single.train_step(t, y, [True], s)[0].item() for s, (t, y) in enumerate(batches)]
        cfgs = [load_run_config(None, [*TINY, *overrides, f"seed={s}"]) for s in (0, 3)]
        batch = BatchLearner(cfgs, cpu)
        pairs = _batches(cfg.built_model_config(), 2, steps)
        two = [batch.train_step(t, y, [True, True], s).tolist() for s, (t, y) in enumerate(pairs)]
    return one, [x for pair in two for x in pair]


def _sums(t: torch.Tensor) -> tuple[float, float]:
    t = t.detach().double()
    return t.sum().item(), (t**2).sum().item()


# -- the field --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [1, 5, 0, "3", 3.0, True, None])
def test_n_layers_outside_2_to_4_is_one_clear_error(bad):
    with pytest.raises(ConfigError, match=r"model\.n_layers: must be an integer in 2\.\.4"):
        ModelConfig(n_layers=bad)


@pytest.mark.parametrize("bad", ["1", "5", "three", "2.5"])
def test_a_bad_n_layers_override_is_one_clear_error(bad):
    with pytest.raises(ConfigError, match=r"model\.n_layers"):
        load_run_config(SMOKE, [f"model.n_layers={bad}"])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_depth_n_architecture(n):
    cfg = ModelConfig.for_task(7, 3, 6, d_model=8, d_mlp=12, n_layers=n)
    assert from_dict(ModelConfig, {"n_layers": n}).n_layers == n
    assert ModelConfig().n_layers == 2
    model = AssignAddTransformer(cfg, seed=0)
    assert model.cfg.n_layers == n and model.cfg.mlp_layers == (n - 1,)
    assert tuple(name for name, _ in model.named_parameters()) == param_names(n)
    assert [block.mlp is None for block in model.blocks] == [True] * (n - 1) + [False]
    assert model.W_in is model.blocks[n - 1].mlp.W_in and model.W_Q.shape == (n, 1, 8, 8)
    assert f"blocks.{n - 1}.hook_mlp_out" in model.hook_dict
    assert f"blocks.{n - 2}.hook_mlp_out" not in model.hook_dict
    # init draws in parameter order: the parameters before the second block's attention's
    # successor are the 2-layer model's (same seed)
    two = AssignAddTransformer(dataclasses.replace(cfg, n_layers=2), seed=0)
    common = dict(two.named_parameters())
    for name in PARAM_NAMES[:10]:
        assert torch.equal(dict(model.named_parameters())[name], common[name]), name


# -- depth 2 unchanged ------------------------------------------------------------------


def _same(got: list[float], recorded_hex: list[str]) -> None:
    recorded = torch.tensor([float.fromhex(x) for x in recorded_hex], dtype=torch.float64)
    got = torch.tensor(got, dtype=torch.float64)
    if cpu_model() == RECORDED_CPU:
        assert torch.equal(got, recorded), (got - recorded).abs().max()
    else:  # another CPU kind: its own float32 rounding, not another computation
        torch.testing.assert_close(got, recorded, rtol=1e-5, atol=0)


def test_two_layer_training_is_bit_identical_to_the_code_before_depth():
    single, batched = _tiny_losses()
    _same(single, SINGLE_LOSSES)
    _same(batched, BATCH_LOSSES)
    # and a 3-layer model trains other numbers (the comparison can fail)
    deeper, _ = _tiny_losses("model.n_layers=3", steps=2)
    assert deeper[:2] != single[:2]


def test_two_layer_forwards_are_bit_identical_to_the_code_before_depth():
    with one_thread():
        cfg = ModelConfig.for_task(11, 3, 8, d_model=16, d_mlp=32)
        model = AssignAddTransformer(cfg, seed=5)
        tokens = torch.randint(0, cfg.d_vocab, (6, 8), generator=torch.Generator().manual_seed(99))
        _same(list(_sums(model(tokens))), list(HOOKED_LOGITS))
        out = fast_forward(member_weights(model), tokens.unsqueeze(0), model.cfg.attn_scale, True)
    for name, sums in FAST_INTERNALS.items():
        _same(list(_sums(getattr(out, name))), list(sums))


# -- the fast forward at every depth ----------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("length", [7, 3, 1])
def test_fast_forward_matches_hooked_logits_and_gradients(n, length):
    cfg = ModelConfig.for_task(7, 3, 7, d_model=10, d_mlp=14, n_layers=n, dtype="float64")
    model = AssignAddTransformer(cfg, seed=n)
    g = torch.Generator().manual_seed(length)
    tokens = torch.randint(0, cfg.d_vocab, (5, length), generator=g)
    labels = torch.randint(0, cfg.d_vocab_out, (5,), generator=g)
    params = list(model.parameters())
    hooked_loss = model(tokens, labels, return_type="loss")
    hooked = torch.autograd.grad(hooked_loss, params)
    fast_logits, fast_loss = model.forward_fast(tokens, labels, return_type="both")
    fast = torch.autograd.grad(fast_loss, params)
    torch.testing.assert_close(fast_logits, model(tokens)[:, -1], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fast_loss, hooked_loss, rtol=1e-12, atol=1e-12)
    for name, a, b in zip(param_names(n), fast, hooked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)
    # a wrong middle layer would show: perturbing block 1 changes the fast logits
    with torch.no_grad():
        model.blocks[1].attn.W_K.mul_(3.0)
    assert not torch.allclose(model.forward_fast(tokens), fast_logits) or length == 1


def test_fast_forward_internals_are_the_two_layer_models():
    cfg = ModelConfig.for_task(7, 3, 6, d_model=8, d_mlp=12, n_layers=3)
    model = AssignAddTransformer(cfg, seed=0)
    tokens = torch.randint(0, cfg.d_vocab, (1, 2, 6))
    with pytest.raises(ValueError, match="2-layer model; this one has 3 layers"):
        fast_forward(member_weights(model), tokens, model.cfg.attn_scale, internals=True)


def test_hooks_caches_and_patching_at_depth_3():
    from transformer_lens import patching

    cfg = ModelConfig.for_task(7, 3, 6, d_model=8, d_mlp=12, n_layers=3, dtype="float64")
    model = AssignAddTransformer(cfg, seed=1).eval()
    tokens = torch.randint(0, cfg.d_vocab, (3, 6), generator=torch.Generator().manual_seed(0))
    logits, cache = model.run_with_cache(tokens)
    assert cache["pattern", 1].shape == (3, 1, 6, 6) and cache["pattern", -1].shape == (3, 1, 6, 6)
    torch.testing.assert_close(logits, cache["resid_post", 2] @ model.W_U)
    _, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "pos_embed", "0_attn_out", "1_attn_out", "2_attn_out", "2_mlp_out"]
    torch.testing.assert_close(cache.decompose_resid().sum(0), cache["resid_post", 2])
    assert cache.accumulated_resid(incl_mid=True).shape[0] == 7
    assert model.QK[1, 0].AB.shape == (8, 8)

    def flat(pattern, hook):  # the middle layer attends uniformly
        return torch.tril(torch.ones_like(pattern)) / torch.arange(1, 7).view(6, 1)

    ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_pattern", flat)])
    assert not torch.allclose(ablated, logits)
    corrupted = tokens.clone()
    corrupted[:, 2] = (corrupted[:, 2] + 1) % cfg.d_vocab

    def metric(out):
        return out[:, -1, 0].mean()

    patched = patching.get_act_patch_resid_pre(model, corrupted, cache, metric)
    assert patched.shape == (3, 6)  # [layer, pos]
    # layer 0's input differs only at position 2: patching it there is the clean run
    with torch.no_grad():
        clean, dirty = float(metric(logits)), float(metric(model(corrupted)))
    assert clean != pytest.approx(dirty)
    assert float(patched[0, 2]) == pytest.approx(clean, rel=1e-6)
    assert float(patched[0, 0]) == pytest.approx(dirty, rel=1e-6)


def test_batched_model_members_are_single_models_at_depth_3():
    cfg = ModelConfig.for_task(7, 3, 6, d_model=8, d_mlp=12, n_layers=3, dtype="float64")
    batched = BatchedModel(cfg, [0, 4])
    tokens = torch.randint(0, cfg.d_vocab, (2, 5, 6), generator=torch.Generator().manual_seed(1))
    logits = batched.forward_fast(tokens)
    for m, seed in enumerate((0, 4)):
        single = AssignAddTransformer(cfg, seed=seed)
        assert single.state_dict().keys() == batched.member_state(m).keys()
        torch.testing.assert_close(logits[m], single(tokens[m], last_only=True))


# -- training, resume, checkpoints, load_run, the analyses' refusal ----------------------


def _smoke3(*overrides: str):
    return load_run_config(
        SMOKE,
        ["model.n_layers=3", "task.eval_size=100", "train.steps=20", "train.eval_every=10",
         "train.checkpoint_every=10", "train.snapshot_every=10", *overrides],
    )  # fmt: skip


def test_three_layer_run_trains_resumes_and_loads(tmp_path, monkeypatch):
    from empirical import load_run
    from empirical.experiments.sweep.trainer import train_batch
    from empirical.runs.metrics_log import read_metrics
    from empirical.runs.rundir import RunDir
    from empirical.train import summary
    from empirical.train.loop import train_run

    # the training-curve figure is most of a short run's time and not what is tested here
    monkeypatch.setattr(summary, "write_training_curves", lambda *args, **kwargs: None)

    cfg = _smoke3()
    train_run(cfg, tmp_path / "whole", progress=False, figures=False)
    assert train_run(cfg, tmp_path / "split", progress=False, stop_at=10).step == 10
    train_run(cfg, tmp_path / "split", resume=True, progress=False, figures=False)

    def metrics(run):
        return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in read_metrics(run)]

    whole = metrics(tmp_path / "whole" / "metrics.jsonl")
    assert [r["step"] for r in whole] == [0, 10, 20]
    assert whole == metrics(tmp_path / "split" / "metrics.jsonl")
    model, vocab = load_run(tmp_path / "whole")
    assert model.cfg.n_layers == 3 and not model.training and vocab.L == model.cfg.n_ctx
    assert load_run(tmp_path / "whole", step=10)[0].cfg.n_layers == 3
    # a batched member (the sweep's learner) trains the same run's metrics
    train_batch([(cfg, tmp_path / "member")], progress=False, figures=False)
    assert metrics(tmp_path / "member" / "metrics.jsonl") == whole
    # the analyses refuse it before computing anything
    for what in ("analyze", "compare-qk"):
        with pytest.raises(ConfigError, match=f"{what} is written for the paper's 2-layer model"):
            RunDir(tmp_path / "whole").read_two_layer_config(what)
    from empirical.analysis.run_analysis import analyze_run

    with pytest.raises(ConfigError, match="model.n_layers = 3"):
        analyze_run(tmp_path / "whole", out_dir=tmp_path / "analysis")
    assert not (tmp_path / "analysis").exists()
    # weights of another depth than the run's config: a clear error
    config = tmp_path / "whole" / "config.toml"
    config.write_text(config.read_text().replace("n_layers = 3\n", ""))
    with pytest.raises(CheckpointError, match="3-layer model, but this run's config has "):
        load_run(tmp_path / "whole")


def test_a_model_file_of_another_depth_is_a_clear_error(tmp_path):
    from empirical.model import save_model
    from empirical.runs.rundir import RunDir
    from empirical.train.engine import check_resumable, initial_weights

    cfg3 = ModelConfig.for_task(11, 3, 8, d_model=8, d_mlp=12, n_layers=3)
    model = AssignAddTransformer(cfg3, seed=0)
    ckpt = checkpoint_dict(model)
    ckpt["model_config"]["n_layers"] = 2  # weights of 3 layers, config of 2
    with pytest.raises(CheckpointError, match="a 3-layer model's .* n_layers = 2"):
        model_from_checkpoint(ckpt, "x.pt")
    path = tmp_path / "three.pt"
    save_model(model, path)
    assert load_model(path).cfg.n_layers == 3
    run2 = load_run_config(SMOKE, ["task.L=8", "task.max_assignments=2", "model.d_model=8",
                                   "model.d_mlp=12",
                                   f"train.init_from={path}"])  # fmt: skip
    with pytest.raises(CheckpointError, match="3-layer model, but this run's config has "
                       "model.n_layers = 2"):  # fmt: skip
        initial_weights(run2)
    with pytest.raises(CheckpointError, match="3-layer model"):
        check_resumable(run2, RunDir(tmp_path), checkpoint_dict(model))


# -- tied middle layers (model.tied_layers) ---------------------------------------------


def test_tied_middle_layers_share_one_attention_and_train_as_such(tmp_path):
    from empirical.model import save_model
    from empirical.model.fast import unique_param_names
    from empirical.train.learners import BatchLearner, SingleLearner

    with pytest.raises(ConfigError, match="model.tied_layers: must be true or false"):
        ModelConfig(tied_layers="yes")
    cfg = ModelConfig.for_task(7, 3, 7, d_model=8, d_mlp=12, n_layers=4, tied_layers=True)
    model = AssignAddTransformer(cfg.filled(), seed=2)
    names = [n for n, _ in model.named_parameters()]
    assert tuple(names) == unique_param_names(4, True) and "blocks.2.attn.W_Q" not in names
    assert model.blocks[2].attn.W_Q is model.blocks[1].attn.W_Q
    assert "blocks.2.attn.hook_pattern" in model.hook_dict  # own hooks, shared weights
    # fast and hooked agree, gradients of the shared weights summed over both uses
    model64 = AssignAddTransformer(dataclasses.replace(cfg, dtype="float64"), seed=2)
    tokens = torch.randint(0, cfg.d_vocab, (4, 7), generator=torch.Generator().manual_seed(3))
    labels = torch.randint(0, cfg.d_vocab_out, (4,), generator=torch.Generator().manual_seed(4))
    params = list(model64.parameters())
    hooked = torch.autograd.grad(model64(tokens, labels, return_type="loss"), params)
    fast = torch.autograd.grad(model64.forward_fast(tokens, labels, return_type="loss"), params)
    for a, b in zip(fast, hooked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    # saved and loaded: still tied; a file whose copies differ is refused
    save_model(model, tmp_path / "tied.pt")
    loaded = load_model(tmp_path / "tied.pt")
    assert loaded.blocks[2].attn.W_K is loaded.blocks[1].attn.W_K
    ckpt = checkpoint_dict(model)
    ckpt["model_state"]["blocks.2.attn.W_K"] = ckpt["model_state"]["blocks.2.attn.W_K"] + 1
    with pytest.raises(CheckpointError, match="tied_layers = true but blocks.2.attn.W_K differs"):
        model_from_checkpoint(ckpt, "x.pt")
    # the batched learner trains each member as the single learner does
    run = load_run_config(None, [*TINY, "model.n_layers=4", "model.tied_layers=true"])
    cpu = torch.device("cpu")
    single, batch = SingleLearner(run, cpu), BatchLearner([run], cpu)
    for step, (t, y) in enumerate(_batches(run.built_model_config(), 1, 3)):
        torch.testing.assert_close(
            single.train_step(t, y, [True], step), batch.train_step(t, y, [True], step)
        )
    assert len(single.optimizer.param_groups[0]["params"]) == len(names)


def test_the_middle_layer_count_changes_after_training():
    from empirical.model import with_middle_layers

    cfg = ModelConfig.for_task(7, 3, 7, d_model=8, d_mlp=12, n_layers=3, tied_layers=True)
    model = AssignAddTransformer(dataclasses.replace(cfg, dtype="float64"), seed=0).eval()
    tokens = torch.randint(0, cfg.d_vocab, (4, 7), generator=torch.Generator().manual_seed(5))
    assert torch.equal(with_middle_layers(model, 1)(tokens), model(tokens))
    twice = with_middle_layers(model, 2)
    assert twice.cfg.n_layers == 4 and not twice.training
    assert twice.blocks[2].attn.W_V is twice.blocks[1].attn.W_V
    assert torch.equal(twice.blocks[1].attn.W_V, model.blocks[1].attn.W_V)
    assert torch.equal(twice.blocks[3].mlp.W_in, model.blocks[2].mlp.W_in)
    assert not torch.allclose(twice(tokens), model(tokens))  # the middle attention runs twice
    torch.testing.assert_close(twice.forward_fast(tokens), twice(tokens)[:, -1])
    none = with_middle_layers(model, 0)
    assert none.cfg.n_layers == 2 and torch.equal(none.W_out, model.W_out)
    with pytest.raises(ConfigError, match=r"count: an integer in 0\.\.2, got 3"):
        with_middle_layers(model, 3)
    untied = AssignAddTransformer(dataclasses.replace(cfg, tied_layers=False), seed=0)
    with pytest.raises(ConfigError, match="needs a model with model.tied_layers = true"):
        with_middle_layers(untied, 2)
