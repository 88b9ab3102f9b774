"""`python -m empirical evaluate`: accuracy per evaluation set at any step, and --all-steps
(metrics log, summary, Figure 2) for a run without a training log."""

from __future__ import annotations

import json

import pytest
import torch

from disentangled.errors import UsageError
from empirical.__main__ import main as empirical_main
from empirical.config.io import config_to_toml
from empirical.model.checkpoint import save_model
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config
from empirical.runs.rundir import RunDir, RunDirError
from empirical.task.eval_sets import build_eval_sets, load_eval_sets, save_eval_sets
from empirical.train.evaluate import evaluate_sets
from empirical.train.evaluate_run import evaluate_all_steps, evaluate_run, has_training_log

OVERRIDES = [
    "name=tiny",
    "task.p=11",
    "task.K=3",
    "task.max_assignments=3",
    "task.r1=c",
    "task.r2=b",
    "task.eval_size=300",
    "model.d_model=32",
    "model.d_mlp=64",
]
STEPS = (0, 100, 200)


def make_run(path, steps=STEPS) -> RunDir:
    """A run directory with snapshots of random models (no training log, no last.pt)."""
    cfg = load_run_config(None, OVERRIDES)
    run = RunDir(path)
    run.path.mkdir(parents=True)
    run.config.write_text(config_to_toml(cfg))
    for step in steps:
        model = AssignAddTransformer(cfg.built_model_config(), seed=step)
        save_model(model, run.snapshot(step), {"step": step})
    return run


def cli(*args: str) -> int:
    return empirical_main(["evaluate", *args])


def test_final_and_step_match_evaluate_sets(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert cli(str(run), "--step", "100") == 0
    out = json.loads(capsys.readouterr().out)
    cfg = run.read_config()
    sets = build_eval_sets(cfg.task, cfg.seed)
    from empirical.model.checkpoint import load_model

    acc, loss = evaluate_sets(load_model(run.snapshot(100)), sets)
    assert out["step"] == 100 and list(out["accuracy"]) == list(sets)
    assert out["accuracy"] == pytest.approx(acc, abs=1e-12)
    assert out["loss"] == pytest.approx(loss, rel=1e-5)
    assert out["n"] == {name: len(b) for name, b in sets.items()}
    final = evaluate_run(run)  # no --step: the final model (the last snapshot)
    assert final["step"] == 200
    assert final["accuracy"] != out["accuracy"]


def test_table_format(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert cli(str(run), "--format", "table", "--batch-size", "7") == 0
    text = capsys.readouterr().out
    assert text.startswith("step 200\n")
    for name in ("0var/ind", "1var/var", "2var/both", "curated/held_out_pairs"):
        line = next(line for line in text.splitlines() if line.startswith(name + " "))
        assert line.rstrip().endswith("%")


def test_eval_sets_are_built_once_when_absent_and_extra_sets_are_evaluated(tmp_path, monkeypatch):
    run = make_run(tmp_path / "run")
    assert not run.eval_sets.exists()
    evaluate_run(run)
    sets = load_eval_sets(run.eval_sets)  # built and saved
    cfg = run.read_config()
    assert list(sets) == list(build_eval_sets(cfg.task, cfg.seed))
    sets["extra/mine"] = sets["1var/ind"][torch.arange(17)]
    save_eval_sets(sets, run.eval_sets)
    result = evaluate_run(run, step=0)
    assert result["n"]["extra/mine"] == 17 and "extra/mine" in result["accuracy"]

    import empirical.task.eval_sets as eval_sets

    calls = []
    real = eval_sets.load_eval_sets

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(eval_sets, "load_eval_sets", counted)
    records, _ = evaluate_all_steps(run)
    assert len(records) == len(STEPS) and len(calls) == 1


def test_all_steps_writes_metrics_summary_and_figure(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert cli(str(run), "--all-steps", "--no-progress") == 0
    captured = capsys.readouterr()
    final = json.loads(captured.out)
    assert final["step"] == 200 and "phases:" in captured.err
    records = run.read_metrics()
    assert [r["step"] for r in records] == list(STEPS)
    for r in records:
        assert {"step", "train_loss", "lr", "elapsed_s", "acc", "loss"} <= set(r)
        assert r["train_loss"] is None and r["lr"] is None
    assert records[-1]["acc"] == pytest.approx(final["accuracy"])
    assert records[1]["acc"] == pytest.approx(evaluate_run(run, step=100)["accuracy"])
    summary = json.loads(run.summary.read_text())
    assert summary["final_step"] == 200 and "phases" in summary
    assert run.training_curves.is_file()
    # an imported run evaluated again is fine (its log is ours)
    assert not has_training_log(run)
    assert cli(str(run), "--all-steps", "--no-progress") == 0


def test_all_steps_refuses_a_run_with_a_training_log(tmp_path):
    run = make_run(tmp_path / "run")
    run.checkpoints_dir.mkdir()
    run.last_checkpoint.write_bytes(run.snapshot(200).read_bytes())
    with pytest.raises(UsageError, match="--force"):
        evaluate_all_steps(run)
    assert not run.metrics.exists()
    assert cli(str(run), "--all-steps") == 2
    evaluate_all_steps(run, force=True)
    assert len(run.read_metrics()) == len(STEPS)

    other = make_run(tmp_path / "other")
    log = {"step": 0, "train_loss": 2.3, "lr": 1e-3, "elapsed_s": 0.0, "acc": {}, "loss": {}}
    other.metrics.write_text(json.dumps(log) + "\n")
    with pytest.raises(UsageError, match="training log"):
        evaluate_all_steps(other)
    assert other.read_metrics() == [log]


def test_errors(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    with pytest.raises(RunDirError, match=r"no snapshot for step 150.*0, 100, 200"):
        evaluate_run(run, step=150)
    assert cli(str(run), "--step", "150") == 2
    assert "snapshots at: 0, 100, 200" in capsys.readouterr().err
    assert cli(str(tmp_path / "nowhere")) == 2
    assert "not a run directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli(str(tmp_path / "empty")) == 2
    assert cli(str(run), "--batch-size", "0") == 2
    assert "--batch-size 0" in capsys.readouterr().err
    with pytest.raises(UsageError, match="--batch-size"):
        evaluate_run(run, batch_size=0)
    assert cli(str(run), "--step", "100", "--all-steps") == 2
    assert cli(str(run), "--format", "yaml") == 2
    empty = make_run(tmp_path / "nosnap", steps=())
    with pytest.raises(RunDirError, match="no"):
        evaluate_all_steps(empty)


def test_a_forward_returning_every_position_gives_the_same_numbers(tmp_path, monkeypatch):
    run = make_run(tmp_path / "run")
    expected = evaluate_run(run)
    real = AssignAddTransformer.forward_fast

    def every_position(self, tokens, *a, **k):
        logits = real(self, tokens, *a, **k)
        return logits.unsqueeze(1).expand(-1, tokens.shape[1], -1)

    monkeypatch.setattr(AssignAddTransformer, "forward_fast", every_position)
    assert evaluate_run(run)["accuracy"] == expected["accuracy"]
