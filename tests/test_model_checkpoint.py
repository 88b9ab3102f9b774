"""save_model / load_model: round trips, training-checkpoint compatibility, every bad case."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from empirical.model.checkpoint import (
    CheckpointError,
    checkpoint_dict,
    load_checkpoint,
    load_model,
    save_model,
)
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer

P, K, L = 13, 3, 10


def small_cfg(**kw) -> ModelConfig:
    return ModelConfig.for_task(P, K, L, d_model=32, d_mlp=64, **kw)


def tokens(batch: int = 8) -> torch.Tensor:
    return torch.randint(0, P + K + 3, (batch, L), generator=torch.Generator().manual_seed(0))


def write(path, obj) -> None:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    path.write_bytes(buffer.getvalue())


def test_round_trip_gives_identical_logits(tmp_path):
    model = AssignAddTransformer(small_cfg(d_head=16, init_std=0.05), seed=3)
    path = tmp_path / "sub" / "model.pt"
    save_model(model, path)
    loaded = load_model(path)
    assert loaded.cfg == model.cfg
    assert torch.equal(loaded(tokens()), model(tokens()))
    assert torch.equal(loaded.forward_fast(tokens()), model.forward_fast(tokens()))
    assert [p.name for p in tmp_path.joinpath("sub").iterdir()] == ["model.pt"]  # no temp files


def test_round_trip_keeps_float64_even_after_to(tmp_path):
    model = AssignAddTransformer(small_cfg(), seed=1).to(torch.float64)
    save_model(model, tmp_path / "m.pt")
    loaded = load_model(tmp_path / "m.pt", device="cpu")
    assert loaded.cfg.dtype == "float64" and loaded.W_E.dtype == torch.float64
    assert torch.equal(loaded(tokens()), model(tokens()))


def test_training_checkpoint_with_extra_entries_loads(tmp_path):
    model = AssignAddTransformer(small_cfg(), seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.forward_fast(tokens(), torch.zeros(8, dtype=torch.long), "loss").backward()
    opt.step()
    extra = {
        "optimizer": opt.state_dict(),
        "step": 1,
        "torch_rng": torch.get_rng_state(),
        "run_config": {"seed": 0, "train": {"lr": 1e-3}},
    }
    save_model(model, tmp_path / "step1.pt", extra=extra)
    ckpt = load_checkpoint(tmp_path / "step1.pt")
    assert ckpt["step"] == 1 and ckpt["run_config"]["train"]["lr"] == 1e-3
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt2.load_state_dict(ckpt["optimizer"])
    assert torch.equal(load_model(tmp_path / "step1.pt")(tokens()), model(tokens()))
    with pytest.raises(ValueError, match="reserved"):
        save_model(model, tmp_path / "x.pt", extra={"model_state": {}})


def test_missing_file(tmp_path):
    path = tmp_path / "nope.pt"
    with pytest.raises(CheckpointError, match="does not exist") as info:
        load_model(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("keep", [0, 10, 0.5, -1])
def test_truncated_or_corrupt_file(tmp_path, keep):
    good = tmp_path / "good.pt"
    save_model(AssignAddTransformer(small_cfg(), seed=0), good)
    data = good.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(data[:n] if keep != -1 else b"not a checkpoint at all" * 10)
    with pytest.raises(CheckpointError, match="cannot be read") as info:
        load_model(bad)
    assert str(bad) in str(info.value)


def test_missing_config(tmp_path):
    model = AssignAddTransformer(small_cfg(), seed=0)
    path = tmp_path / "noconfig.pt"
    write(path, {"model_state": model.state_dict()})
    with pytest.raises(CheckpointError, match="model_config") as info:
        load_model(path)
    assert str(path) in str(info.value)
    write(path, model.state_dict())  # a bare state dict
    with pytest.raises(CheckpointError, match="model_config"):
        load_model(path)
    write(path, [1, 2, 3])
    with pytest.raises(CheckpointError, match="expected a dict"):
        load_model(path)


def test_config_that_does_not_match_the_weights(tmp_path):
    ckpt = checkpoint_dict(AssignAddTransformer(small_cfg(), seed=0))
    ckpt["model_config"]["d_mlp"] = 96
    path = tmp_path / "mismatch.pt"
    write(path, ckpt)
    with pytest.raises(CheckpointError, match=r"blocks\.1\.mlp\.W_in has shape") as info:
        load_model(path)
    assert str(path) in str(info.value)

    ckpt = checkpoint_dict(AssignAddTransformer(small_cfg(), seed=0))
    del ckpt["model_state"]["unembed.W_U"]
    ckpt["model_state"]["blocks.0.mlp.W_in"] = torch.zeros(32, 64)
    write(path, ckpt)
    with pytest.raises(CheckpointError, match="missing unembed.W_U.*unexpected blocks.0.mlp"):
        load_model(path)


def test_invalid_config_values(tmp_path):
    path = tmp_path / "badcfg.pt"
    for field, value in (("d_model", -1), ("dtype", "int8"), ("n_layers", 5), ("n_ctx", None)):
        ckpt = checkpoint_dict(AssignAddTransformer(small_cfg(), seed=0))
        ckpt["model_config"][field] = value
        write(path, ckpt)
        with pytest.raises(CheckpointError, match=f"bad model_config.*{field}") as info:
            load_model(path)
        assert str(path) in str(info.value)


def test_not_weights_only_loadable(tmp_path):
    ckpt = checkpoint_dict(AssignAddTransformer(small_cfg(), seed=0))
    ckpt["something"] = io.StringIO("arbitrary object")  # not safe to unpickle
    path = tmp_path / "pickle.pt"
    write(path, ckpt)
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_model(path)


# -- eval mode, old configs, load_run, permissions ----------------------------------------------


def test_load_model_returns_eval_mode(tmp_path):
    model = AssignAddTransformer(small_cfg(), seed=0)
    assert model.training
    save_model(model, tmp_path / "m.pt")
    loaded = load_model(tmp_path / "m.pt")
    assert not loaded.training and not any(m.training for m in loaded.modules())


def test_checkpoint_saved_with_d_head_none_still_loads(tmp_path):
    model = AssignAddTransformer(small_cfg(), seed=2)
    ckpt = checkpoint_dict(model)
    assert ckpt["model_config"]["d_head"] == 32  # new checkpoints carry an int
    ckpt["model_config"]["d_head"] = None  # as written before d_head was filled
    write(tmp_path / "old.pt", ckpt)
    loaded = load_model(tmp_path / "old.pt")
    assert loaded.cfg.d_head == 32
    assert torch.equal(loaded(tokens()), model(tokens()))


SMOKE = Path(__file__).resolve().parents[1] / "configs" / "smoke.toml"


def _fake_run(tmp_path, steps=(0, 20)):
    """A run directory as the trainer leaves it: config.toml, snapshots, checkpoints/last.pt."""
    from empirical.config.io import save_config
    from empirical.runs.config import load_run_config
    from empirical.runs.rundir import RunDir

    cfg = load_run_config(SMOKE)
    run = RunDir(tmp_path / "run")
    save_config(cfg, run.config)
    models = {}
    for step in steps:
        models[step] = AssignAddTransformer(cfg.built_model_config(), seed=step)
        save_model(models[step], run.snapshot(step), {"step": step})
    save_model(models[steps[-1]], run.last_checkpoint, {"step": steps[-1]})
    return run, cfg.task, models


def test_load_run_latest_and_snapshot(tmp_path):
    from empirical.runs.load import load_run
    from empirical.runs.rundir import RunDirError
    from empirical.task.vocab import Vocabulary

    run, task, models = _fake_run(tmp_path)
    x = torch.randint(0, task.p + task.K + 3, (8, task.L), generator=torch.Generator())
    model, vocab = load_run(run.path)
    assert isinstance(vocab, Vocabulary) and (vocab.p, vocab.K, vocab.L) == (task.p, task.K, task.L)
    assert not model.training and model.vocab.names == vocab.names
    assert torch.equal(model(x), models[20](x))
    first, _ = load_run(run.path, step=0, device="cpu")
    assert torch.equal(first(x), models[0](x))
    with pytest.raises(RunDirError, match="snapshots at: 0, 20"):
        load_run(run.path, step=5)
    with pytest.raises(RunDirError, match="not a run directory|no such directory"):
        load_run(tmp_path / "nothing")


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(tmp_path, umask, mode):
    import os

    from empirical.config.io import save_config
    from empirical.report.files import atomic_write_bytes

    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "a.bin", b"data")
        save_model(AssignAddTransformer(small_cfg(), seed=0), tmp_path / "m.pt")
        save_config(small_cfg(), tmp_path / "c.toml")
        atomic_write_bytes(tmp_path / "a.bin", b"replaced")  # replacing keeps the rule
    finally:
        os.umask(old)
    for name in ("a.bin", "m.pt", "c.toml"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name
    assert (tmp_path / "a.bin").read_bytes() == b"replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "c.toml", "m.pt"]
