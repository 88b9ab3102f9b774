"""The shared training skeleton: resume restores every metric for any cadence (batched members:
tests/test_sweep.py::test_mixed_hyperparameter_batch_resumes_bit_for_bit), refusals,
recovery overrides and their history, exploding losses, stale temporaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics
from empirical.runs.rundir import RunDir
from empirical.train.engine import exploding, remove_stale_temporaries
from empirical.train.loop import TrainingError, train_run
from empirical.train.state import load_training_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"


def smoke(*overrides: str):
    return load_run_config(SMOKE, ["task.eval_size=200", "train.steps=100", *overrides])


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


# 50 steps, evaluated every 25, a checkpoint every 10: an evaluation window holds checkpoints
CADENCE = ("train.steps=50", "train.eval_every=25", "train.checkpoint_every=10",
           "train.snapshot_every=0")  # fmt: skip


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("engine") / "whole"
    train_run(smoke(*CADENCE), path, progress=False, figures=False)
    return strip_time(read_metrics(path / "metrics.jsonl"))


@pytest.mark.parametrize("kill_at", [10, 30])
def test_resume_matches_for_a_cadence_whose_windows_straddle_checkpoints(
    tmp_path, kill_at, whole_run
):
    cfg = smoke(*CADENCE)
    train_run(cfg, tmp_path / "split", progress=False, stop_at=kill_at)
    train_run(cfg, tmp_path / "split", resume=True, progress=False, figures=False)
    split = strip_time(read_metrics(tmp_path / "split" / "metrics.jsonl"))
    assert [r["step"] for r in whole_run] == [0, 25, 50]
    assert whole_run == split  # train_loss included: the eval window straddles the kill


def test_resume_to_fewer_steps_than_done_is_refused(tmp_path):
    cfg = smoke("train.lr_schedule=constant", "train.steps=60")
    train_run(cfg, tmp_path, progress=False, figures=False)
    before = (tmp_path / "config.toml").read_text()
    with pytest.raises(TrainingError, match="step 60 already"):
        train_run(smoke("train.lr_schedule=constant", "train.steps=20"), tmp_path, resume=True)
    assert (tmp_path / "config.toml").read_text() == before


def test_recovery_settings_may_change_on_resume_and_are_recorded(tmp_path):
    cfg = smoke("train.lr_schedule=constant", "train.steps=40")
    train_run(cfg, tmp_path, progress=False, stop_at=20)
    changed = smoke(
        "train.lr_schedule=constant", "train.steps=40", "train.lr=0.0005", "train.warmup_steps=10"
    )
    train_run(changed, tmp_path, resume=True, progress=False, figures=False)
    history = [json.loads(x) for x in (tmp_path / "config_history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start", "resume"]
    assert history[1]["step"] == 20
    assert history[1]["changes"]["train.lr"] == [0.001, 0.0005]
    assert history[1]["changes"]["train.warmup_from"] == [0, 20]  # the warm-up restarts there
    lrs = {r["step"]: r["lr"] for r in read_metrics(tmp_path / "metrics.jsonl")}
    assert lrs[20] == pytest.approx(0.001) and lrs[40] == pytest.approx(0.0005)
    saved = load_run_config(tmp_path / "config.toml")
    assert saved.train.lr == 0.0005 and saved.train.warmup_from == 20
    # but not a change of the task or the model
    with pytest.raises(TrainingError, match="different config"):
        train_run(smoke("task.p=13"), tmp_path, resume=True, progress=False, figures=False)


def test_exploding_rule():
    assert exploding(float("nan"), [], 10, 11)
    assert exploding(1e22, [4.0, 3.0, 2.0], 10, 11)
    assert not exploding(1e22, [4.0, 3.0, 2.0], 0, 11)  # factor 0: only non-finite counts
    assert not exploding(2.0, [0.01, 0.01, 0.01], 10, 11)  # below chance (ln 11): a bump
    assert exploding(30.0, [0.01, 0.02, 2.0], 10, 11)
    assert not exploding(30.0, [], 10, 11)  # no history yet: only non-finite counts


def test_exploding_loss_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from empirical.model.transformer import AssignAddTransformer

    cfg = smoke("train.lr_schedule=constant", "train.steps=80")
    train_run(cfg, tmp_path, progress=False, stop_at=40)
    good = load_training_state(tmp_path / "checkpoints" / "last.pt")
    real = AssignAddTransformer.forward_fast

    def huge(self, tokens):  # finite but enormous logits after the resume
        return real(self, tokens) * 1e6

    monkeypatch.setattr(AssignAddTransformer, "forward_fast", huge)
    with pytest.raises(TrainingError, match="exploded.*last good checkpoint"):
        train_run(cfg, tmp_path, resume=True, progress=False, figures=False)
    kept = load_training_state(tmp_path / "checkpoints" / "last.pt")
    assert kept["step"] == good["step"] == 40
    stop = RunDir(tmp_path).read_stopped()
    assert stop is not None and "exploded" in stop["reason"]


def test_stale_temporaries_are_removed_on_the_next_start(tmp_path):
    cfg = smoke("train.steps=40")
    train_run(cfg, tmp_path, progress=False, stop_at=20)
    stale = [tmp_path / ".config.toml.abc.tmp", tmp_path / "checkpoints" / ".last.pt.x.tmp"]
    for path in stale:
        path.write_bytes(b"half")
    assert sorted(remove_stale_temporaries(RunDir(tmp_path))) == sorted(map(str, stale))
    for path in stale:
        path.write_bytes(b"half")
    train_run(cfg, tmp_path, resume=True, progress=False, figures=False)
    assert not any(p.exists() for p in stale)


def test_init_from_replaces_the_seeded_init(tmp_path):
    import torch

    from empirical.config.io import ConfigError
    from empirical.model.checkpoint import CheckpointError, load_model

    source = smoke("train.steps=20", "train.snapshot_every=20")
    train_run(source, tmp_path / "source", progress=False, figures=False)
    weights = tmp_path / "source" / "snapshots" / "step_000020.pt"
    cfg = smoke("train.steps=20", "train.snapshot_every=20", f"train.init_from={weights}")
    train_run(cfg, tmp_path / "init", progress=False, figures=False)
    a, b = load_model(weights), load_model(tmp_path / "init" / "snapshots" / "step_000000.pt")
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)
    with pytest.raises(CheckpointError, match="train.init_from"):
        train_run(
            smoke("train.init_from=/no/such.pt"), tmp_path / "bad", progress=False, figures=False,
        )
    assert not (tmp_path / "bad").exists()
    wider = smoke("model.d_model=48", f"train.init_from={weights}")
    with pytest.raises((CheckpointError, ConfigError), match="do not fit"):
        train_run(wider, tmp_path / "wider", progress=False, figures=False)


def test_init_perturbation_is_rounding_sized_and_seeded(tmp_path):
    """train.init_perturbation: every initial weight w becomes w (1 + s z) from its own seed;
    the data stream (the run's seed) is the same; a batched member starts exactly as the
    single run of its config does."""
    import torch

    from empirical.model.checkpoint import load_model
    from empirical.train.learners import BatchLearner, SingleLearner

    def start(*extra):
        cfg = smoke("train.steps=1", *extra)
        return cfg, SingleLearner(cfg, torch.device("cpu")).model.state_dict()

    _, base = start()
    cfg1, one = start("train.init_perturbation=1e-3", "train.init_perturbation_seed=1")
    _, again = start("train.init_perturbation=1e-3", "train.init_perturbation_seed=1")
    cfg2, two = start("train.init_perturbation=1e-3", "train.init_perturbation_seed=2")
    W = "blocks.0.attn.W_Q"
    rel = ((one[W] - base[W]) / base[W]).double()
    assert 5e-4 < float(rel.std()) < 2e-3  # about 1e-3 of each weight
    assert torch.equal(one[W], again[W]) and not torch.equal(one[W], two[W])
    batch = BatchLearner([cfg1, cfg2], torch.device("cpu")).model
    for m, single in enumerate((one, two)):
        state = batch.member_state(m)
        assert all(torch.equal(state[n], single[n]) for n in state)
    train_run(smoke("train.steps=2", "train.snapshot_every=2", "train.init_perturbation=1e-7"),
              tmp_path / "tiny", progress=False, figures=False)  # fmt: skip
    tiny = load_model(tmp_path / "tiny" / "snapshots" / "step_000000.pt").state_dict()
    changed = sum(int((tiny[n] != base[n]).sum()) for n in base if n in tiny)
    assert 0 < changed < sum(v.numel() for v in base.values())  # rounding-sized: some weights


def test_a_new_config_field_at_its_default_keeps_every_fingerprint():
    import dataclasses

    from empirical.runs.config import TrainConfig, config_fingerprint

    cfg = smoke()
    extended = dataclasses.make_dataclass(
        "Extended", [("new_knob", int, dataclasses.field(default=7))], bases=(TrainConfig,)
    )
    same = dataclasses.replace(cfg, train=extended(**vars(cfg.train)))
    other = dataclasses.replace(cfg, train=extended(**vars(cfg.train), new_knob=8))
    assert config_fingerprint(same) == config_fingerprint(cfg)  # old runs stay readable
    assert config_fingerprint(other) != config_fingerprint(cfg)
    assert config_fingerprint(smoke("train.weight_decay=0.5")) != config_fingerprint(cfg)
