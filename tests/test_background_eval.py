"""Evaluations, snapshots and checkpoints in a thread beside the training steps
(empirical.train.background, run_training(background=True)): the writer runs its jobs in
order and stops at the first failure; a run, a resumed run and a batch of members write the
same files as without the thread; on_eval sees every evaluation, in order; a failure in the
thread ends the session where the same failure ends it without the thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from empirical.metrics_log import read_metrics
from empirical.run_config import load_run_config
from empirical.sweep import train_batch
from empirical.train.background import BackgroundWriter
from empirical.train.loop import train_run
from empirical.train.state import load_training_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
CADENCE = (
    "task.eval_size=200",
    "train.steps=60",
    "train.eval_every=10",
    "train.eval_subsample=50",
    "train.full_eval_every=30",
    "train.checkpoint_every=20",
    "train.snapshot_every=15",  # some snapshots without an evaluation at their step
)


def smoke(*overrides: str):
    return load_run_config(SMOKE, [*CADENCE, *overrides])


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def same_tensors(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_same_files(a: Path, b: Path) -> None:
    assert strip_time(read_metrics(a / "metrics.jsonl")) == strip_time(
        read_metrics(b / "metrics.jsonl")
    )
    snaps = sorted(p.name for p in (a / "snapshots").iterdir())
    assert snaps == sorted(p.name for p in (b / "snapshots").iterdir()) and snaps
    for name in snaps:
        sa = torch.load(a / "snapshots" / name, weights_only=True)
        sb = torch.load(b / "snapshots" / name, weights_only=True)
        assert sa["step"] == sb["step"] and same_tensors(sa["model_state"], sb["model_state"])
    ca = load_training_state(a / "checkpoints" / "last.pt")
    cb = load_training_state(b / "checkpoints" / "last.pt")
    assert ca.keys() == cb.keys()
    for key in ca:
        if key != "elapsed_s":
            assert same_tensors(ca[key], cb[key]), key


@pytest.fixture(scope="module")
def inline_run(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("inline") / "run"
    train_run(smoke(), path, progress=False)
    return path


# -- the writer -----------------------------------------------------------------------------


def test_writer_runs_jobs_in_order_in_its_own_thread():
    writer = BackgroundWriter(max_pending=2)
    seen = []

    def job(i):
        def run():
            time.sleep(0.002 * (5 - i))  # earlier jobs slower: order must still hold
            seen.append((i, threading.current_thread() is threading.main_thread()))
            return i

        return run

    for i in range(5):
        writer.submit(job(i))
    results = writer.collect() + writer.drain()
    writer.close()
    assert results == [0, 1, 2, 3, 4]
    assert seen == [(i, False) for i in range(5)]
    assert writer.pending() == 0 and writer.busy_s > 0


def test_writer_skips_the_jobs_after_a_failure_and_raises_it_once():
    writer = BackgroundWriter()
    ran = []
    writer.submit(lambda: ran.append(1) or 1)
    writer.submit(lambda: 1 / 0)
    writer.submit(lambda: ran.append(3))
    with pytest.raises(ZeroDivisionError):
        writer.drain()
    assert ran == [1]  # the job after the failure did not run
    with pytest.raises(RuntimeError, match="earlier job .* failed"):
        writer.submit(lambda: None)
    writer.close()


def test_writer_refuses_a_queue_of_no_jobs():
    with pytest.raises(ValueError, match="max_pending must be >= 1, got 0"):
        BackgroundWriter(max_pending=0)


# -- a training session ---------------------------------------------------------------------


def test_a_run_in_background_writes_the_same_files(inline_run, tmp_path):
    seen = []
    train_run(
        smoke(), tmp_path / "run", progress=False, background=True,
        on_eval=lambda step, records: seen.append(step),
    )  # fmt: skip
    assert_same_files(inline_run, tmp_path / "run")
    assert seen == list(range(0, 61, 10))
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert '"background_thread_s"' in summary


def test_a_background_run_stopped_and_resumed_writes_the_same_files(inline_run, tmp_path):
    run = tmp_path / "run"
    train_run(smoke(), run, progress=False, background=True, stop_at=30)
    assert load_training_state(run / "checkpoints" / "last.pt")["step"] == 20
    assert read_metrics(run / "metrics.jsonl")[-1]["step"] == 30
    train_run(smoke(), run, resume=True, progress=False, background=True)
    assert_same_files(inline_run, run)


def test_batched_members_in_background_write_the_same_files(tmp_path):
    cfgs = [smoke(f"seed={s}", "train.steps=40") for s in (0, 1)]
    train_batch([(c, tmp_path / f"inline{i}") for i, c in enumerate(cfgs)], progress=False)
    train_batch(
        [(c, tmp_path / f"thread{i}") for i, c in enumerate(cfgs)], progress=False,
        background=True,
    )  # fmt: skip
    for i in range(2):
        assert_same_files(tmp_path / f"inline{i}", tmp_path / f"thread{i}")


@pytest.mark.parametrize("background", [False, True])
def test_a_failed_write_ends_the_session_at_the_same_point(tmp_path, monkeypatch, background):
    import empirical.train.session as session

    real = session.save_model

    def failing(model, path, extra=None):
        if extra and extra.get("step") == 45:
            raise OSError("disk full (test)")
        return real(model, path, extra)

    monkeypatch.setattr(session, "save_model", failing)
    run = tmp_path / "run"
    with pytest.raises(OSError, match="disk full"):
        train_run(smoke(), run, progress=False, background=background)
    assert load_training_state(run / "checkpoints" / "last.pt")["step"] == 40
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [0, 10, 20, 30, 40]
