"""kill -9, then --resume: the metrics (every field but elapsed_s) and the final weights equal
those of an uninterrupted run, wherever the kill fell, a checkpoint write included.

The killed process is a real `python -m empirical train|sweep` subprocess that gets SIGKILL,
either from itself at an exact moment (tests/kill_launcher.py wraps os.replace and the
metrics append from outside the library) or from this process when a file appears.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics, scan_metrics
from empirical.train.loop import train_run
from empirical.train.state import load_training_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TRAIN = ["train", "--no-progress", "--no-figures"]  # the tests' runs: no figure drawn
LAUNCHER = ROOT / "tests" / "kill_launcher.py"
# an evaluation window (50) that straddles checkpoints (20): the kill lands mid-window
CADENCE = [
    "task.eval_size=200",
    "train.steps=100",
    "train.eval_every=50",
    "train.checkpoint_every=20",
    "train.snapshot_every=0",
]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def launch(moment: str, n: int, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(LAUNCHER), moment, str(n), "empirical", *map(str, argv)],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


def train_argv(run_dir: Path, *extra: str) -> list[str]:
    return [*TRAIN, "--config", SMOKE, *CADENCE, *extra, "--run-dir", run_dir]


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def whole(tmp_path_factory) -> Path:
    """The uninterrupted run, trained in-process (the same numbers as the subprocess: one
    torch thread, the CPU)."""
    path = tmp_path_factory.mktemp("whole") / "run"
    train_run(load_run_config(SMOKE, CADENCE), path, progress=False, figures=False)
    return path


def assert_same_run(a: Path, b: Path) -> None:
    ra, rb = read_metrics(a / "metrics.jsonl"), read_metrics(b / "metrics.jsonl")
    assert [r["step"] for r in ra] == [0, 50, 100]
    assert strip_time(ra) == strip_time(rb)
    wa = load_training_state(a / "checkpoints" / "last.pt")["model_state"]
    wb = load_training_state(b / "checkpoints" / "last.pt")["model_state"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not list(b.rglob(".*.tmp"))


@pytest.mark.slow  # a real SIGKILL of a training subprocess, then its resume (6 s)
def test_kill_during_a_checkpoint_write_then_resume(tmp_path, whole):
    run = tmp_path / "run"
    killed = launch("checkpoint-write", 3, *train_argv(run), cwd=tmp_path)  # the one at step 60
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tmps = list((run / "checkpoints").glob(".last.pt.*.tmp"))
    assert len(tmps) == 1  # killed between the write and the rename
    assert load_training_state(run / "checkpoints" / "last.pt")["step"] == 40  # intact
    train_run(load_run_config(SMOKE, CADENCE), run, resume=True, progress=False, figures=False)
    assert_same_run(whole, run)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("moment", "n"),
    [
        ("checkpoint-write", 1),  # before any checkpoint: the resume starts over
        ("after-checkpoint", 2),  # step 40, before the evaluation at 50
        ("after-checkpoint", 3),  # step 60, after the evaluation at 50
        ("metrics-append", 2),  # half of the step-50 line written: a torn last line
        ("checkpoint-write", 5),  # the final checkpoint at step 100
    ],
)
def test_kill_at_several_moments_then_resume_from_the_command_line(tmp_path, whole, moment, n):
    run = tmp_path / "run"
    killed = launch(moment, n, *train_argv(run), cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if moment == "metrics-append":
        assert scan_metrics(run / "metrics.jsonl").torn == 2
    resumed = launch("none", 0, *TRAIN, "--resume", run, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert_same_run(whole, run)


@pytest.mark.slow
def test_sigkill_from_outside_when_the_checkpoint_temporary_appears(tmp_path, whole):
    """The parent watches for `.last.pt.*.tmp` and sends SIGKILL when it sees one (the
    window is short: the kill may land a little later, which is fine too)."""
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "empirical", *map(str, train_argv(run, "train.steps=400"))]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=ENV, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    ckpts = run / "checkpoints"
    while proc.poll() is None and time.monotonic() < deadline:
        if ckpts.is_dir() and any(p.name.startswith(".last.pt.") for p in os.scandir(ckpts)):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    proc.stderr.close()
    if proc.returncode != -signal.SIGKILL:
        pytest.skip("the run finished before a checkpoint temporary was seen")
    resumed = launch("none", 0, *TRAIN, "--resume", run, "train.steps=100",
                     cwd=tmp_path)  # fmt: skip
    if resumed.returncode == 2 and "already" in resumed.stderr:
        pytest.skip("killed after step 100: nothing to compare at 100 steps")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_run(whole, run)


def sweep_argv(out: Path) -> list[str]:
    return ["sweep", *CADENCE, "--no-progress", "--config", SMOKE, "--param",
            "train.lr=0.001,0.002", "--seeds", "0", "--out", out]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 6])
def test_kill_a_sweep_during_a_checkpoint_write_then_run_it_again(tmp_path, n):
    """Members write their checkpoints one after the other: the 5th write is the first
    member's at step 60 (both members resume from 40, in one batch again: bit for bit), the
    6th the second member's (the members resume from 60 and 40, each in a batch of its own:
    the same updates in another float summation order, compared as tests/test_sweep.py)."""
    from empirical.__main__ import main

    assert main([*map(str, sweep_argv(tmp_path / "whole"))]) == 0
    killed = launch("checkpoint-write", n, *sweep_argv(tmp_path / "split"), cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    again = launch("none", 0, *sweep_argv(tmp_path / "split"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    for member in ("lr=0.001_seed0", "lr=0.002_seed0"):
        a, b = tmp_path / "whole" / "members" / member, tmp_path / "split" / "members" / member
        ra, rb = read_metrics(a / "metrics.jsonl"), read_metrics(b / "metrics.jsonl")
        wa = load_training_state(a / "checkpoints" / "last.pt")["model_state"]
        wb = load_training_state(b / "checkpoints" / "last.pt")["model_state"]
        assert [r["step"] for r in ra] == [r["step"] for r in rb] == [0, 50, 100]
        if n == 5:
            assert strip_time(ra) == strip_time(rb)
            assert all(torch.equal(wa[k], wb[k]) for k in wa)
            continue
        for x, y in zip(ra, rb, strict=True):
            assert x["acc"] == pytest.approx(y["acc"], abs=0.006)  # <= 1 sequence of 200
            assert x["loss"] == pytest.approx(y["loss"], rel=1e-4)
            assert (x["train_loss"] is None) == (y["train_loss"] is None)
            if x["train_loss"] is not None:
                assert x["train_loss"] == pytest.approx(y["train_loss"], rel=1e-5)
        for k in wa:
            torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-6)


def test_a_stop_that_arrives_during_the_checkpoints_waits_for_all_of_them():
    """SIGTERM sent while a batch writes its members' checkpoints is delivered after the
    block (a guard stopped a sweep between two members' checkpoints: the batch then resumed
    as two batches at different steps, and the second never trained)."""
    import threading

    from empirical.train.session import signals_held

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    seen: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: seen.append("SIGTERM"))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            seen.append("block done")
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == ["block done", "SIGTERM"]
