"""`train.tensorboard = true`: every metrics record also as TensorBoard scalars, in event
files beside metrics.jsonl (empirical/train/tensorboard.py); refused with the extra to
install where the tensorboard package is missing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from empirical.__main__ import main
from empirical.runs.rundir import RunDir
from empirical.train import tensorboard

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.toml")
# the smallest smoke run with evaluations at 0, 20 and 40 (and a subsampled one between)
ARGS = ["train.steps=40", "train.eval_subsample=50", "train.full_eval_every=40"]


def test_smoke_run_writes_every_record_as_scalars(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    argv = ["train", "--config", SMOKE, *ARGS, "train.tensorboard=true", "--run-dir", str(run)]
    assert main([*argv, "--no-progress"]) == 0
    tensorboard.close_all()
    records = RunDir(run).read_metrics()
    events = sorted(run.glob("events.out.tfevents.*"))
    assert len(records) == 3 and len(events) == 1  # beside metrics.jsonl, one per session

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    sets = records[0]["acc"]
    assert {f"acc/{s}" for s in sets} | {f"loss/{s}" for s in sets} | {"lr"} <= tags
    for tag in ("acc/0var/ind", "loss/1var/var", "lr"):
        logged = {e.step: e.value for e in acc.Scalars(tag)}
        table, _, name = tag.partition("/")
        wanted = {r["step"]: (r[table][name] if name else r[table]) for r in records}
        assert logged.keys() == wanted.keys()
        assert all(math.isclose(logged[s], wanted[s], rel_tol=1e-6) for s in wanted)
    # step 0 has no training loss yet: it is left out, not written as NaN
    assert [e.step for e in acc.Scalars("train_loss")] == [20, 40]


def test_scalars_of_a_record_skip_missing_and_non_finite_values():
    record = {"step": 5, "train_loss": None, "lr": 0.5, "acc": {"a": 1.0, "b": float("nan")},
              "loss": {"a": 0.25}, "eval_n": {"a": 10}}  # fmt: skip
    assert tensorboard.scalars(record) == {"lr": 0.5, "acc/a": 1.0, "loss/a": 0.25}


def test_without_tensorboard_the_run_is_refused_naming_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tensorboard, "tensorboard_available", lambda: False)
    run = tmp_path / "run"
    argv = ["train", "--config", SMOKE, *ARGS, "train.tensorboard=true", "--run-dir", str(run)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: train.tensorboard = true needs the tensorboard package")
    assert '".[tensorboard]"' in err and err.count("\n") == 1
    assert not run.exists()  # refused before anything is written
