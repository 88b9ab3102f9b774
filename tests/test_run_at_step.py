"""`python -m empirical at-step` (empirical.experiments.population.at_step): a constant-rate
run cut at step S is the run of S steps (its
summary from the evaluations up to S, train.steps = S in its config); a schedule that depends
on train.steps, a step without a full evaluation and an existing output are refused, and a
failed cut leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from empirical.__main__ import main
from empirical.config.io import ConfigError
from empirical.experiments.population.at_step import run_at_step
from empirical.runs.config import load_run_config
from empirical.runs.rundir import RunDir
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
TINY = ["train.steps=40", "train.eval_every=10", "train.full_eval_every=20", "task.eval_size=100",
        "train.snapshot_every=0", "train.checkpoint_every=20"]


@pytest.fixture(scope="module")
def run40(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("at_step") / "run"
    train_run(load_run_config(ROOT / "configs" / "smoke.toml", TINY), out, progress=False,
              figures=False)
    return out


def test_cut_is_the_shorter_run(run40, tmp_path):
    summary = run_at_step(run40, tmp_path / "cut", 20)
    cut = RunDir(tmp_path / "cut")
    assert summary["final_step"] == 20 and cut.read_config().train.steps == 20
    records = cut.read_metrics()  # the fingerprint still matches: train.steps is not in it
    assert [r["step"] for r in records] == [r["step"] for r in RunDir(run40).read_metrics()
                                            if r["step"] <= 20]
    assert summary["final_acc"] == records[-1]["acc"]
    assert json.loads(cut.summary.read_text())["final_step"] == 20


def test_refusals(run40, tmp_path):
    with pytest.raises(ConfigError, match="no full evaluation at step 15"):
        run_at_step(run40, tmp_path / "a", 15)  # no evaluation at step 15
    with pytest.raises(ConfigError, match="after the run's train.steps"):
        run_at_step(run40, tmp_path / "b", 60)
    (tmp_path / "c").mkdir()
    with pytest.raises(ConfigError, match="exists"):
        run_at_step(run40, tmp_path / "c", 20)
    assert not (tmp_path / "a").exists() and not (tmp_path / "a.part").exists()


def test_cosine_schedule_refused(run40, tmp_path):
    cosine = tmp_path / "cosine"
    cosine.mkdir()
    text = (run40 / "config.toml").read_text().replace('lr_schedule = "constant"',
                                                       'lr_schedule = "cosine"')
    (cosine / "config.toml").write_text(text)
    assert main(["at-step", str(cosine), "--step", "20", "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
