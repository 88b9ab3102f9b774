"""The one-command reproduction, end to end on the smoke config (theory stages skipped: they
have their own tests under theory/), and where its stages run (empirical.experiments.scheduling)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from empirical.experiments.paper_checks import paper_check_rows
from empirical.experiments.reproduce import reproduce
from empirical.runs.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # the main job end to end on the smoke config (17 s; CI runs it)
def test_reproduce_smoke_writes_report_linking_figures_and_both_runs(tmp_path, monkeypatch):
    """One reproduce of the smoke config, its independent stages in the second process (the
    paper's run asked for from a folder that is not there: skipped, with a note); the report
    with the paper's run beside ours; a second call, as on a 16-core machine (each
    independent stage its own process), resumes."""
    from empirical.experiments.reproduce_report import render_report
    from empirical.runs.rundir import RunDir

    cfg = load_run_config(ROOT / "configs" / "smoke.toml", ["task.eval_size=200", "train.steps=40"])
    report = reproduce(
        cfg, tmp_path, skip_theory=True, progress=False, authors=tmp_path / "absent", parallel=True
    )
    text = report.read_text()
    assert report == tmp_path / "smoke" / "report.md"
    row = next(line for line in text.splitlines() if "the paper's run: import" in line)
    assert "skipped" in row and "no checkpoints folder" in row  # from the second process
    assert "| train | ok |" in text and "| analyze | ok |" in text
    assert "| compare-qk | ok |" in text  # following the snapshots from the second process
    assert "seed0/training_curves.png" in text
    # the run placed in its published population (none is published for the smoke config)
    assert "## This run in its population" in text
    linked = [
        line.split("](")[1].rstrip(")") for line in text.splitlines() if line.startswith("- [")
    ]
    assert linked and all((report.parent / link).is_file() for link in linked)

    # the paper's run beside this run: here the same run twice, so both columns agree
    run = RunDir(tmp_path / "smoke" / "seed0")
    text = render_report(cfg, tmp_path / "smoke", run.path, [], paper_run=run)
    header = next(line for line in text.splitlines() if line.startswith("| claim |"))
    assert header.count("holds") == 2 and "the paper's run" in header
    row = next(line for line in text.splitlines() if line.startswith("| > 99% on every 0var"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == cells[4] and cells[3] == cells[5]
    alone = render_report(cfg, tmp_path / "smoke", run.path, [])
    assert "the paper's run" not in alone

    # a second call resumes instead of retraining; with 16 cores, 4 background processes
    monkeypatch.setattr("empirical.experiments.reproduce.os.cpu_count", lambda: 16)
    again = reproduce(
        cfg, tmp_path, skip_theory=True, progress=False, authors=tmp_path / "absent"
    ).read_text()
    assert "(resumed)" in again
    row = next(line for line in again.splitlines() if "the paper's run: import" in line)
    assert "skipped" in row and "no checkpoints folder" in row


class _RecordingSubmit:
    """A stand-in for BackgroundProcesses.submit: records what is submitted, runs nothing."""

    def __init__(self):
        self.submitted = []

    def __call__(self, fn, *args):
        self.submitted.append(fn.__name__)

        class Done:
            def get(self_inner):
                return [] if fn.__name__ != "_independent_stages" else ([], [])

            def ready(self_inner):
                return True

        return Done()


@pytest.mark.parametrize(
    "cores, workers, tasks",
    [
        (1, 1, ["_independent_stages"]),
        (2, 1, ["_independent_stages"]),
        (3, 2, ["_independent_stages"]),
        (4, 2, ["_independent_stages"]),
        (16, 4, ["theory_tests_stage", "theory_report_stage", "paper_run_stages"]),
    ],
)
def test_background_processes_by_core_count(tmp_path, cores, workers, tasks):
    """On 2-3 cores the theory and the paper's run are one background task; from 5 cores on
    (a GPU machine has 16) each is its own, so the theory's two stages run side by side."""
    from empirical.experiments.reproduce import _start_independent
    from empirical.experiments.scheduling import background_workers, worker_threads

    assert background_workers(cores) == workers
    assert worker_threads(cores) == (3 if cores == 16 else 1)
    submit = _RecordingSubmit()
    wait, done = _start_independent(submit, workers, tmp_path, False, None)
    assert submit.submitted == tasks
    assert wait() == ([], []) and done()


def test_training_widens_to_every_core_once_the_background_is_done(monkeypatch):
    """reproduce's training takes every core from the first evaluation after the background
    stages finish, says from which step, and gives the count back after; a 1-core machine or
    no background never widens."""
    import torch

    from empirical.experiments.scheduling import ThreadWidening

    cfg = load_run_config(ROOT / "configs" / "smoke.toml", ["train.device=cpu"])
    monkeypatch.setattr("empirical.experiments.scheduling.os.cpu_count", lambda: 2)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        finished = [False]
        widen = ThreadWidening(cfg, lambda: finished[0])
        widen(100, [])
        assert torch.get_num_threads() == 1 and widen.note() == ""
        finished[0] = True
        widen(200, [])
        widen(300, [])
        assert torch.get_num_threads() == 2 and widen.note() == "; on 2 threads from step 200"
        widen.restore()
        assert torch.get_num_threads() == 1
        never = ThreadWidening(cfg, None)  # no background process
        never(100, [])
        assert torch.get_num_threads() == 1 and never.note() == ""
        monkeypatch.setattr("empirical.experiments.scheduling.os.cpu_count", lambda: 1)
        alone = ThreadWidening(cfg, lambda: True)
        alone(100, [])
        assert torch.get_num_threads() == 1 and alone.note() == ""
    finally:
        torch.set_num_threads(before)


def _thread_counts():
    import torch
    from threadpoolctl import threadpool_info

    blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    return torch.get_num_threads(), blas


def test_a_background_process_runs_on_worker_threads_for_torch_and_the_blas(monkeypatch):
    """in_background_process keeps freed memory (empirical.train.allocator) and limits torch's
    threads and every BLAS's (numpy's and scipy's OpenBLAS start a thread per core otherwise) to
    worker_threads, and gives the BLAS its count back after."""
    import scipy.linalg  # noqa: F401  (its OpenBLAS loaded, as in compare-qk)
    import torch

    from empirical.experiments.scheduling import in_background_process

    monkeypatch.setattr("empirical.experiments.scheduling.os.cpu_count", lambda: 2)
    kept = []  # (this test process's allocator is left alone: tests/test_allocator.py)
    monkeypatch.setattr("empirical.experiments.scheduling.retain_freed_memory",
                        lambda: kept.append(1))
    before_torch, before_blas = _thread_counts()
    assert before_blas  # numpy / scipy bring a BLAS that threadpoolctl sees
    try:
        inside_torch, inside_blas = in_background_process(_thread_counts)
    finally:
        torch.set_num_threads(before_torch)
    assert inside_torch == 1 and set(inside_blas) == {1} and kept == [1]
    assert _thread_counts()[1] == before_blas


def test_training_step_is_the_same_on_any_thread_count():
    """What lets reproduce widen the training's threads at a wall-clock-dependent step: the
    authors' configuration (batch 512, where torch's CPU kernels split work across threads)
    takes the same steps, bit for bit, on 1, 2 and 3 threads."""
    import torch

    from empirical.task.assign_add.draw import TrainingSampler
    from empirical.task.pairs import held_out_pairs, training_generator
    from empirical.train.batches import BatchStream
    from empirical.train.learners import SingleLearner

    cfg = load_run_config(ROOT / "configs" / "authors.toml", ["train.device=cpu"])
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device="cpu")
    stream = BatchStream(sampler, training_generator(0, "cpu"), 512)
    batches = [stream.next() for _ in range(4)]
    before = torch.get_num_threads()
    weights = {}
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            learner = SingleLearner(cfg, torch.device("cpu"))
            for i, b in enumerate(batches):
                learner.train_step(b.tokens[None], b.labels[None], [True], i)
            weights[threads] = {k: v.clone() for k, v in learner.model.state_dict().items()}
    finally:
        torch.set_num_threads(before)
    for threads in (2, 3):
        assert all(torch.equal(weights[1][k], weights[threads][k]) for k in weights[1])


def test_paper_check_rows_judge_measured_values():
    summary = {
        "final_acc": {"0var/ind": 0.995, "0var/pair": 0.991, "1var/ind": 0.5},
        "phases": {"zero_var_learned_step": 1000, "first_spike": None, "second_spike": None},
    }
    rows = {r[0]: r for r in paper_check_rows(summary, {})}
    assert rows["> 99% on every 0var set (Fig. 2)"][3] == "yes"
    assert rows["> 99% on every 1var set (Fig. 2)"][3] == "no"
    assert rows["> 99% on every 2var set (Fig. 2)"][3] == "-"
    assert rows["first spike: variable routing"][2] == "none detected"


def test_paper_check_rows_never_print_none():
    """A run whose 0-var sets never reached 90% (or without phases at all) says so in words."""
    for phases in ({"zero_var_learned_step": None, "first_spike": None}, {}):
        rows = paper_check_rows({"final_acc": {"0var/ind": 0.5}, "phases": phases}, {})
        assert not any("None" in cell for row in rows for cell in row), rows
        learned = {r[0]: r for r in rows}["0-var learned first (Section 6)"]
        assert learned[2:] == ("0-var never reached 90%", "no")


def test_following_runs_on_idle_cpu_time_and_restores_the_policy():
    """Our compare-qk follows the training on idle CPU time only (SCHED_IDLE where Linux has
    it) and the process's scheduling is as before afterwards."""
    import os

    from empirical.experiments.scheduling import idle_priority

    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE here (not Linux): the lowest nice level is used instead")
    before = os.sched_getscheduler(0)
    with idle_priority():
        assert os.sched_getscheduler(0) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == before


# a stage in a background process that makes a tqdm bar (disabled), as the paper's run's import
# and evaluation do: tqdm's lock is a multiprocessing semaphore, registered with the resource
# tracker that the spawned process shares with the command
LEAK_PROBE = """
from empirical.experiments.scheduling import BackgroundProcesses


def stage():
    from tqdm import tqdm

    return sum(tqdm(range(3), disable=True))


if __name__ == "__main__":
    with BackgroundProcesses(1) as background:
        assert background.submit(stage).get() == 3
    print("done")
"""


def test_background_processes_end_without_a_leaked_semaphore(tmp_path):
    """The main job's background processes end cleanly: killed instead (Pool.terminate), a
    process leaves its semaphores to the resource tracker, which ended the main job with
    'There appear to be 1 leaked semaphore objects to clean up at shutdown'."""
    script = tmp_path / "probe.py"
    script.write_text(LEAK_PROBE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    assert "leaked semaphore" not in proc.stderr, proc.stderr


@pytest.mark.slow  # the smoke main job with the paper's run from one of its checkpoints (1-4 min)
def test_the_main_job_ends_without_a_leaked_semaphore(tmp_path):
    """`python -m empirical reproduce` of the smoke config, in a subprocess, with the paper's
    run imported in the background process from one of the authors' checkpoints (the import
    and the evaluation make the semaphore that leaked): no resource-tracker warning at exit."""
    from empirical.config.paths import authors_checkpoints, where_to_point

    source = authors_checkpoints() / "checkpoint_step_1001.pth"
    if not source.is_file():
        pytest.skip(where_to_point(source))
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU core: reproduce starts no background process")
    authors = tmp_path / "authors"
    authors.mkdir()
    (authors / source.name).symlink_to(source)
    argv = ["reproduce", "--config", "configs/smoke.toml", "--runs-root", str(tmp_path / "runs"),
            "--skip-theory", "--authors", str(authors), "--no-progress", "task.eval_size=200",
            "train.steps=40"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "empirical", *argv], cwd=ROOT, env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "more process(es), beside the training" in proc.stderr
    assert "| the paper's run: import + evaluate | ok |" in proc.stdout
    assert "leaked semaphore" not in proc.stderr, proc.stderr


_HOLDER = """
import os, sys, time
from empirical.experiments.scheduling import BackgroundProcesses
if __name__ == "__main__":
    with BackgroundProcesses(1) as background:
        job = background.submit(os.getpid)
        print(job.get(timeout=60), background.manager._process.pid, flush=True)
        background.submit(time.sleep, 600)
        time.sleep(600)
"""


def test_a_killed_reproduce_takes_its_background_processes_with_it(tmp_path):
    """SIGKILL leaves no time to terminate the pool: its workers notice their parent is gone
    (a stage following the training once ran on for 50 minutes after its reproduce was killed)."""
    import signal
    import time

    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        children = [int(pid) for pid in holder.stdout.readline().split()]  # worker, manager
        assert all(_alive(pid) for pid in children)  # alive while their parent is
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in children), f"{children} outlived their parent"
    finally:
        holder.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
