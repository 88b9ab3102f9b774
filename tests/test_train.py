"""The trainer: a short real run, bit-for-bit resume, refusals, divergence, atomic checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from empirical.config.io import ConfigError
from empirical.model.checkpoint import load_model
from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics
from empirical.train.loop import TrainingError, train_run
from empirical.train.state import load_training_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"


def smoke(*overrides: str):
    return load_run_config(SMOKE, ["task.eval_size=200", "train.steps=40", *overrides])


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def test_short_run_writes_everything(tmp_path):
    result = train_run(smoke(), tmp_path, progress=False)
    assert result.step == 40
    for name in ("config.toml", "eval_sets.pt", "metrics.jsonl", "summary.json"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "training_curves.png").stat().st_size > 10_000
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 20, 40]
    assert all(0.0 <= a <= 1.0 for r in records for a in r["acc"].values())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final_step"] == 40 and "phases" in summary
    first = summary["first_step_all_sets_at_least_99"]
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert first == next((r["step"] for r in records if min(r["acc"].values()) >= 0.99), None)
    # the training checkpoint is a model checkpoint too
    model = load_model(tmp_path / "checkpoints" / "last.pt")
    assert model.cfg.d_model == 32
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == [
        "step_000000.pt",
        "step_000020.pt",
        "step_000040.pt",
    ]


def test_interrupted_and_resumed_run_matches_bit_for_bit(tmp_path, capsys):
    """Stopped after step 20 (`train --stop-at 20`), then resumed (`train --resume`): the same
    numbers and weights as one whole run."""
    from empirical.cli.train import main as train_main
    from empirical.cli.train import resume_point

    cfg = smoke()
    train_run(cfg, tmp_path / "whole", progress=False, figures=False)
    split = str(tmp_path / "split")
    argv = ["--config", str(SMOKE), "task.eval_size=200", "train.steps=40", "--no-progress"]
    assert train_main([*argv, "--run-dir", split, "--stop-at", "20"]) == 0
    said = capsys.readouterr().out
    every = load_run_config(tmp_path / "split" / "config.toml").train.checkpoint_every
    assert f"stopped after step 20 ({resume_point(20, every)})" in said
    assert read_metrics(tmp_path / "split" / "metrics.jsonl")[-1]["step"] == 20
    assert train_main(["--resume", split, "--no-progress"]) == 0
    whole = strip_time(read_metrics(tmp_path / "whole" / "metrics.jsonl"))
    split = strip_time(read_metrics(tmp_path / "split" / "metrics.jsonl"))
    assert whole == split
    a = load_training_state(tmp_path / "whole" / "checkpoints" / "last.pt")["model_state"]
    b = load_training_state(tmp_path / "split" / "checkpoints" / "last.pt")["model_state"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_same_config_and_seed_give_same_numbers(tmp_path):
    train_run(smoke(), tmp_path / "a", progress=False, figures=False)
    train_run(smoke(), tmp_path / "b", progress=False, figures=False)
    ra = strip_time(read_metrics(tmp_path / "a" / "metrics.jsonl"))
    rb = strip_time(read_metrics(tmp_path / "b" / "metrics.jsonl"))
    assert ra == rb
    # figures=False: the summary without its figure (the tests' runs skip drawing it)
    assert (tmp_path / "a" / "summary.json").is_file()
    assert not list((tmp_path / "a").glob("training_curves.*"))
    train_run(smoke("seed=1"), tmp_path / "c", progress=False, figures=False)
    rc = strip_time(read_metrics(tmp_path / "c" / "metrics.jsonl"))
    assert rc != ra


def test_run_dir_with_other_config_is_not_overwritten(tmp_path):
    train_run(smoke(), tmp_path, progress=False, figures=False)
    before = (tmp_path / "config.toml").read_text()
    with pytest.raises(TrainingError, match="different config"):
        train_run(smoke("train.lr=0.002"), tmp_path, progress=False, figures=False)
    with pytest.raises(TrainingError, match="--resume"):
        train_run(smoke(), tmp_path, progress=False, figures=False)
    assert (tmp_path / "config.toml").read_text() == before
    with pytest.raises(TrainingError, match="no config.toml"):
        train_run(smoke(), tmp_path / "empty", resume=True, progress=False, figures=False)


def test_resume_may_extend_the_run(tmp_path):
    train_run(smoke(), tmp_path, progress=False, figures=False)
    result = train_run(
        smoke("train.steps=60"), tmp_path, resume=True, progress=False, figures=False,
    )
    assert result.step == 60
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0, 20, 40, 60]


def test_diverging_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    from empirical.model.transformer import AssignAddTransformer

    cfg = smoke()
    train_run(cfg, tmp_path, progress=False, stop_at=20)
    good = load_training_state(tmp_path / "checkpoints" / "last.pt")
    real = AssignAddTransformer.forward_fast
    calls = {"n": 0}

    def poisoned(self, tokens):
        calls["n"] += 1
        out = real(self, tokens)
        return out * float("nan") if calls["n"] > 5 else out

    monkeypatch.setattr(AssignAddTransformer, "forward_fast", poisoned)
    with pytest.raises(TrainingError, match=r"loss became nan at step 2[0-9].*last good"):
        train_run(cfg, tmp_path, resume=True, progress=False, figures=False)
    kept = load_training_state(tmp_path / "checkpoints" / "last.pt")
    assert kept["step"] == good["step"] == 20
    assert all(
        torch.equal(kept["model_state"][k], good["model_state"][k]) for k in kept["model_state"]
    )


def test_killed_checkpoint_write_leaves_previous_checkpoint(tmp_path, monkeypatch):
    cfg = smoke()
    train_run(cfg, tmp_path, progress=False, stop_at=20)
    path = tmp_path / "checkpoints" / "last.pt"
    before = path.read_bytes()

    def killed(src, dst):
        raise KeyboardInterrupt("killed during checkpoint write")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        train_run(cfg, tmp_path, resume=True, progress=False, figures=False)
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name != "last.pt"]  # no temp files left
    monkeypatch.undo()
    assert train_run(cfg, tmp_path, resume=True, progress=False, figures=False).step == 40


def test_config_file_and_overrides():
    cfg = load_run_config(ROOT / "configs" / "paper.toml", ["train.steps=123", "seed=4"])
    assert cfg.train.steps == 123 and cfg.seed == 4 and cfg.task.p == 97
    assert cfg.built_model_config().d_vocab == 97 + 5 + 3
    for bad, field in [
        ("train.lr=-1", "train.lr"),
        ("train.steps=0", "train.steps"),
        ("train.betas=[0.9]", "train.betas"),
        ("train.device=tpu", "train.device"),
        ("task.p=1", "task.p"),
        ("train.nope=1", "nope"),
        ("model.d_vocab=7", "model.d_vocab"),
    ]:
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            load_run_config(ROOT / "configs" / "paper.toml", [bad])


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    from empirical.cli.train import main

    assert main(["--config", str(SMOKE), "train.lr=abc", "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.lr" in err[0]
    assert main(["--resume", str(tmp_path / "missing")]) == 2
    assert "no config.toml" in capsys.readouterr().err


def test_breakdown_by_operand_variable_counts_every_sequence(tmp_path):
    from empirical.task.eval_sets import load_eval_sets
    from empirical.train.breakdown import accuracy_by_operand_variable

    train_run(smoke(), tmp_path, progress=False, figures=False)
    model = load_model(tmp_path / "checkpoints" / "last.pt")
    batch = load_eval_sets(tmp_path / "eval_sets.pt")["1var/var"]
    cells = accuracy_by_operand_variable(model, batch, L=16)
    assert sum(c["n"] for c in cells.values()) == len(batch)  # 1-var: one variable each
    overall = sum(c["acc"] * c["n"] for c in cells.values()) / len(batch)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert abs(overall - summary["final_acc"]["1var/var"]) < 1e-9
    assert set(cells) <= {"c@13", "b@14"}  # smoke: R1 = {c}, R2 = {b}


def test_accuracy_by_assignment_count_splits_by_distractors():
    from empirical.task.config import task_config
    from empirical.task.eval_sets import build_eval_set
    from empirical.train.breakdown import accuracy_by_assignment_count

    cfg = task_config(p=11, K=4, max_assignments=4, r1=("c",), r2=("b",), eval_size=400)
    batch, _ = build_eval_set(cfg, 0, "2var/ind")
    n_assigned = ((batch.tokens >= 11) & (batch.tokens < 15))[:, :13].sum(1)

    class AnswersWithTwoAssignments:  # right exactly when the sequence assigns 2 variables
        def forward_fast(self, tokens):
            rows = torch.arange(len(tokens))
            idx = torch.nonzero((batch.tokens[:, None, :] == tokens[None]).all(-1))[:, 0]
            labels = torch.where(
                n_assigned[idx] == 2, batch.labels[idx], (batch.labels[idx] + 1) % 11
            )
            logits = torch.zeros(len(tokens), 11)
            logits[rows, labels] = 1.0
            return logits

    got = accuracy_by_assignment_count(AnswersWithTwoAssignments(), batch, 11, 4, batch_size=64)
    assert got[2]["acc"] == 1.0 and all(v["acc"] == 0.0 for c, v in got.items() if c != 2)
    assert sum(v["n"] for v in got.values()) == len(batch)
    distinct = accuracy_by_assignment_count(
        AnswersWithTwoAssignments(), batch, 11, 4, distinct_operands=True
    )
    same = int((batch.operand_vars[:, 0] == batch.operand_vars[:, 1]).sum())
    assert sum(v["n"] for v in distinct.values()) == len(batch) - same


def test_a_stop_between_checkpoints_says_where_resume_picks_up():
    from empirical.cli.train import resume_point

    assert resume_point(3000, 1000) == "--resume continues from it"
    assert resume_point(1600, 1000).startswith("no checkpoint there: --resume continues from "
                                               "step 1000")  # fmt: skip
    assert "train.checkpoint_every = 1000 divides" in resume_point(1600, 1000)
    assert "continues from the start" in resume_point(20, 100)


def test_progress_bar_reads_a_set_every_family_has():
    """A family without the paper's 0var/ind set shows its last (largest) set, not nan."""
    from empirical.train.session import progress_accuracy

    assert progress_accuracy({"0var/ind": 0.5, "1var/ind": 0.2}) == 0.5
    assert progress_accuracy({"graph/n12": 0.9, "graph/n48": 0.4}) == 0.4
    assert progress_accuracy({}) != progress_accuracy({})  # nan
