"""Evaluations on a fixed subsample between full ones (train.eval_subsample,
train.full_eval_every): which records are full, what a subsampled record holds, that its
numbers are the model's on exactly those rows, that a resume keeps them, and bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from empirical.config.io import ConfigError
from empirical.model.checkpoint import load_model
from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics
from empirical.runs.rundir import RunDir
from empirical.train.evaluate import SetEvaluator, evaluate_sets, subsample_rows
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
SUBSAMPLED = (
    "task.eval_size=200",
    "train.steps=80",
    "train.eval_every=10",
    "train.eval_subsample=50",
    "train.full_eval_every=40",
    "train.checkpoint_every=20",
    "train.snapshot_every=10",
)


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def subsampled_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("subsample") / "run"
    cfg = load_run_config(SMOKE, list(SUBSAMPLED))
    train_run(cfg, out, progress=False, figures=False)
    return cfg, RunDir(out)


def test_full_evaluations_at_zero_the_multiples_and_the_end(subsampled_run):
    cfg, run = subsampled_run
    sizes = {name: len(batch) for name, batch in run.read_eval_sets(cfg).items()}
    records = read_metrics(run.metrics)
    full = [r["step"] for r in records if "eval_n" not in r]
    assert [r["step"] for r in records] == list(range(0, 81, 10))
    assert full == [0, 40, 80]
    for r in records:
        if "eval_n" in r:
            assert r["eval_n"] == {name: min(50, size) for name, size in sizes.items()}


def test_a_subsampled_record_is_the_model_on_exactly_those_rows(subsampled_run):
    cfg, run = subsampled_run
    sets = run.read_eval_sets(cfg)
    record = next(r for r in read_metrics(run.metrics) if r["step"] == 30)
    model = load_model(run.snapshot(30))
    picked = {}
    for name, batch in sets.items():
        rows = subsample_rows(len(batch), 50, cfg.seed, name)
        picked[name] = batch[rows] if hasattr(batch, "__getitem__") else None
    acc, _ = evaluate_sets(model, picked)
    assert acc == pytest.approx(record["acc"], abs=1e-12)
    # the full evaluation reads every sequence
    _, _, n = SetEvaluator(sets).evaluate(model)
    assert n == {name: len(batch) for name, batch in sets.items()}


def test_subsample_rows_are_fixed_distinct_and_cover_small_sets():
    a = subsample_rows(1000, 100, 0, "1var/ind")
    assert a.tolist() == subsample_rows(1000, 100, 0, "1var/ind").tolist()
    assert len(set(a.tolist())) == 100 and a.tolist() == sorted(a.tolist())
    assert a.tolist() != subsample_rows(1000, 100, 1, "1var/ind").tolist()
    assert subsample_rows(30, 100, 0, "x").tolist() == list(range(30))


def test_a_resumed_subsampled_run_writes_the_same_metrics(subsampled_run, tmp_path):
    cfg, run = subsampled_run
    train_run(cfg, tmp_path / "split", progress=False, stop_at=20)
    train_run(cfg, tmp_path / "split", resume=True, progress=False, figures=False)
    assert strip_time(read_metrics(tmp_path / "split" / "metrics.jsonl")) == strip_time(
        read_metrics(run.metrics)
    )


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["train.eval_subsample=-1"], "train.eval_subsample = -1"),
        (["train.eval_subsample=10", "train.full_eval_every=30"], "train.full_eval_every = 30"),
        (["train.eval_subsample=10", "train.full_eval_every=0"], "train.full_eval_every = 0"),
    ],
)
def test_bad_subsample_settings_name_the_value(overrides, needle):
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_run_config(SMOKE, overrides)
