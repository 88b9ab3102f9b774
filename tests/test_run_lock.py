"""One writer per run directory (empirical.runs.lock), with real concurrent processes: a second
training or a resume beside a live one is refused with one line naming the holder and writes
nothing, the first run ends as an undisturbed run; readers work beside a writer; `kill -9`
of the holder leaves no stale lock; two local-executor jobs given one member train it once;
`unlock` removes a killed writer's file and refuses while the writer lives; a stale holder
file is never named as the holder; without flock the directory is written unlocked after one
warning; the lock is re-entrant within a process.

The live writer is a real `python -m empirical train` (tests/kill_launcher.py runs it
unchanged and holds it right after its first checkpoint until the test releases it: no
sleeps as synchronisation); lock holders that need no training are forked children
(tests/lock_holder.py).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lock_holder import held_elsewhere

from disentangled.errors import UsageError
from empirical.__main__ import main
from empirical.runs.config import load_run_config
from empirical.runs.load import load_run
from empirical.runs.lock import WriterLockError, writer_lock, writer_locks
from empirical.runs.metrics_log import read_metrics, scan_metrics
from empirical.runs.rundir import RunDir, SweepDir
from empirical.train.evaluate_run import evaluate_run
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TRAIN = ["train", "--no-progress", "--no-figures"]  # the tests' runs: no figure drawn
LAUNCHER = ROOT / "tests" / "kill_launcher.py"
CADENCE = ["task.eval_size=100", "train.steps=40", "train.eval_every=20",
           "train.checkpoint_every=20", "train.snapshot_every=20"]  # fmt: skip
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HOST = socket.gethostname()


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def files_of(root: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def whole(tmp_path_factory) -> Path:
    """The undisturbed run (in-process: the same numbers as the subprocess, one thread)."""
    path = tmp_path_factory.mktemp("whole") / "run"
    train_run(load_run_config(SMOKE, CADENCE), path, progress=False, figures=False)
    return path


def empirical(*argv, cwd: Path) -> subprocess.Popen:
    """`python -m empirical ARGV...`, running."""
    return subprocess.Popen(
        [sys.executable, "-m", "empirical", *map(str, argv)],
        cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


class LiveWriter:
    """`python -m empirical train ... --run-dir RUN`, held alive right after its first
    checkpoint (step 20) until `release()`."""

    def __init__(self, run: Path, tmp: Path):
        self.held, self.release_file = tmp / f"{run.name}.held", tmp / f"{run.name}.release"
        env = {**ENV, "LAUNCHER_HELD": str(self.held), "LAUNCHER_RELEASE": str(self.release_file)}
        argv = [*TRAIN, "--config", SMOKE, *CADENCE, "--run-dir", run]
        self.proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), "hold-after-checkpoint", "1", "empirical",
             *map(str, argv)],
            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def wait_held(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.held.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"the writer ended early: {self.proc.communicate()}")
            assert time.monotonic() < deadline, "the writer never reached its first checkpoint"
            time.sleep(0.05)

    def release(self) -> subprocess.CompletedProcess:
        self.release_file.touch()
        out, err = self.proc.communicate(timeout=120)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)


@pytest.mark.slow  # a live writer subprocess and a second `train` subprocess (12 s); the
# in-process refusals (test_a_refused_writer_touches_nothing, ...) stay in the default suite
def test_second_writer_is_refused_while_readers_read_and_the_run_is_undisturbed(
    tmp_path, whole, capsys
):
    run = tmp_path / "twice"
    writer = LiveWriter(run, tmp_path)
    try:
        writer.wait_held()
        before = files_of(run)
        holder = json.loads(RunDir(run).writer_lock.read_text())
        assert holder["pid"] == writer.proc.pid and holder["host"] == HOST
        # (a) a second `python -m empirical train` of the directory
        second = empirical(*TRAIN, "--config", SMOKE, *CADENCE,
                           "--run-dir", run, cwd=tmp_path)  # fmt: skip
        # (b) a resume (this process: `main` is what `python -m empirical` runs)
        assert main([*TRAIN, "--resume", str(run)]) == 2
        lines = [one_error_line(capsys.readouterr().err)]
        # (g) readers: evaluate (without --all-steps) and load_run
        assert evaluate_run(run)["step"] == 20
        model, _ = load_run(run)
        assert [r["step"] for r in RunDir(run).read_metrics()] == [0, 20]
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2, err
        lines.append(one_error_line(err))
        for line in lines:
            assert f"{run} is being written by PID {writer.proc.pid} on host {HOST}" in line
            assert "empirical train" in line and "wait for it to end or stop it" in line
        assert files_of(run) == before  # the refused writers and the readers wrote nothing
        done = writer.release()
    finally:
        if writer.proc.poll() is None:
            writer.proc.kill()
    assert done.returncode == 0, done.stderr
    assert strip_time(read_metrics(run / "metrics.jsonl")) == strip_time(
        read_metrics(whole / "metrics.jsonl")
    )
    history = RunDir(run).config_history.read_text().splitlines()
    assert [json.loads(line)["event"] for line in history] == ["start"]
    assert not RunDir(run).writer_lock.exists()  # removed on release


@pytest.mark.slow  # a kill -9 of a live writer (6 s)
def test_kill_9_of_the_holder_leaves_no_stale_lock(tmp_path, whole, capsys):
    run = tmp_path / "killed"
    writer = LiveWriter(run, tmp_path)
    writer.wait_held()
    writer.proc.send_signal(signal.SIGKILL)
    writer.proc.communicate(timeout=60)
    assert writer.proc.returncode == -signal.SIGKILL
    assert RunDir(run).writer_lock.exists()  # the file stays; the OS released the lock
    assert main([*TRAIN, "--resume", str(run)]) == 0  # at once
    scan = scan_metrics(run / "metrics.jsonl")
    assert not scan.bad and scan.torn is None  # nothing for `repair` to do
    assert strip_time(scan.records) == strip_time(read_metrics(whole / "metrics.jsonl"))
    assert not RunDir(run).writer_lock.exists()


@pytest.mark.slow  # two submitit processes (~15 s); the in-process job test below is quick
def test_two_local_jobs_given_one_member_train_it_once(tmp_path):
    pytest.importorskip("submitit")
    from empirical.experiments.sweep.cluster import make_executor, train_job
    from empirical.experiments.sweep.options import ExecutorOptions
    from empirical.experiments.sweep.spec import SweepSpec, expand_members, load_sweep_config

    base, _ = load_sweep_config(SMOKE, CADENCE)
    (member,) = expand_members(base, SweepSpec(param="pair_fraction", values=[1.0], seeds=[0]))
    out = SweepDir(tmp_path / "sw")
    executor = make_executor(ExecutorOptions(kind="local", gpus_per_job=0), tmp_path / "jobs")
    with executor.batch():
        jobs = [executor.submit(train_job, str(out.path), [member], None) for _ in range(2)]
    results = [job.result() for job in jobs]
    assert len({r["job_id"] for r in results}) == 2
    trained = [r for r in results if r["fresh"]]
    assert len(trained) == 1  # the other found it being written (busy) or finished (skipped)
    other = next(r for r in results if r is not trained[0])
    assert other["busy"] + other["skipped"] == [member.dirname]
    run = out.member(member.dirname)
    assert [r["step"] for r in run.read_metrics()] == [0, 20, 40]  # one writer: in order
    assert run.read_summary()["last_session"]["steps"] == 40


def test_a_job_leaves_a_member_another_process_writes(tmp_path):
    from empirical.experiments.sweep.cluster import train_job
    from empirical.experiments.sweep.runner import run_members
    from empirical.experiments.sweep.spec import SweepSpec, expand_members, load_sweep_config

    base, _ = load_sweep_config(SMOKE, [*CADENCE, "train.steps=20"])
    members = expand_members(base, SweepSpec(param="pair_fraction", values=[1.0, 0.5], seeds=[0]))
    out = SweepDir(tmp_path / "sw")
    busy = out.member(members[0].dirname)
    with held_elsewhere(busy.path) as holder:
        before = files_of(busy.path)
        result = train_job(str(out.path), members[:1], None)
        assert result["busy"] == [members[0].dirname] and not result["fresh"]
        assert files_of(busy.path) == before  # no claim, nothing written
        # an in-process sweep trains the other member and leaves this one to its writer
        lines: list[str] = []
        ran = run_members(members, out, 0, progress=False, log=lines.append)
        assert ran.busy == [members[0].dirname] and ran.fresh == [members[1].dirname]
        assert any(f"PID {holder.pid}" in line and members[0].dirname in line for line in lines)
        assert files_of(busy.path) == before
    assert out.member(members[1].dirname).summary.exists()


def test_unlock_removes_a_killed_writers_file_and_refuses_a_live_one(tmp_path, capsys):
    run = tmp_path / "run"
    with held_elsewhere(run) as holder:
        before = files_of(run)
        assert main(["unlock", str(run)]) == 2  # its process runs: not removed
        line = one_error_line(capsys.readouterr().err)
        assert f"is being written by PID {holder.pid} on host {HOST}" in line
        assert "nothing to remove" in line and files_of(run) == before
        holder.kill()  # dies holding it: its file stays, naming it
    lock = RunDir(run).writer_lock
    assert json.loads(lock.read_text())["pid"] == holder.pid
    with writer_lock(run):  # the OS released it: taken at once, over the file
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()
    holder_file = {"pid": holder.pid, "host": HOST, "command": "x", "started": "y"}
    lock.write_text(json.dumps(holder_file))  # as the killed writer left it
    assert main(["unlock", str(run)]) == 0 and not lock.exists()
    assert f"removed {lock}" in capsys.readouterr().out
    assert main(["unlock", str(run)]) == 0
    assert "nothing to remove" in capsys.readouterr().out


def test_a_killed_holders_file_is_not_named_as_the_holder(tmp_path):
    """A lock file that names a process gone from this host (a killed holder's, which a new
    holder has not yet overwritten) is stale: the refusal does not name it."""
    run = tmp_path / "run"
    with held_elsewhere(run) as holder:
        lock = RunDir(run).writer_lock
        gone = os.fork()
        if gone == 0:
            os._exit(0)
        os.waitpid(gone, 0)
        lock.write_text(json.dumps({"pid": gone, "host": HOST, "command": "c", "started": "s"}))
        with pytest.raises(WriterLockError, match="has not yet written who it is") as refused:
            with writer_lock(run):
                pass
        assert f"PID {gone}" not in str(refused.value) and f"PID {holder.pid}" not in str(
            refused.value
        )


def test_without_flock_the_directory_is_written_unlocked_with_one_warning(
    tmp_path, monkeypatch, capsys
):
    import empirical.runs.lock as run_lock

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(run_lock.fcntl, "flock", no_flock)
    monkeypatch.setattr(run_lock, "_WARNED", [])
    for name in ("a", "b"):
        with writer_lock(tmp_path / name):
            (tmp_path / name / "written").write_text("x")
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["written"]
    err = capsys.readouterr().err
    assert err.count("warning: flock does not work") == 1 and "without its writer lock" in err
    with writer_lock(tmp_path / "c"):
        pass
    assert not (tmp_path / "c").exists()  # created, then removed empty


def _refusal_in_child(directory: Path) -> str:
    """What another process gets when it asks for the lock (forked: it shares nothing)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with writer_lock(directory):
                os.write(w, b"granted")
        except WriterLockError as exc:
            os.write(w, str(exc).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as fh:
        return fh.read().decode()


def test_reentrant_within_a_process(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with writer_lock(run) as outer:
        info = json.loads(RunDir(run).writer_lock.read_text())
        assert info["pid"] == os.getpid() and info["host"] == HOST
        with writer_lock(tmp_path / "." / "run") as inner:  # another spelling: the same lock
            assert inner is outer and outer.count == 2
            with writer_locks([run, tmp_path / "other"]) as busy:
                assert busy == {} and RunDir(tmp_path / "other").writer_lock.exists()
        assert RunDir(run).writer_lock.exists() and outer.count == 1
        assert "is being written by PID" in _refusal_in_child(run)  # still held
    assert not RunDir(run).writer_lock.exists()
    assert not (tmp_path / "other").exists()  # created by the lock, removed empty
    assert _refusal_in_child(run) == "granted"


def test_a_refused_writer_touches_nothing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with held_elsewhere(run) as holder:
        before = files_of(run)
        with pytest.raises(WriterLockError, match=f"PID {holder.pid}"):
            with writer_lock(run):
                pass
        with writer_locks([tmp_path / "free", run], skip_busy=True) as busy:
            assert list(busy) == [run] and RunDir(tmp_path / "free").writer_lock.exists()
        with pytest.raises(WriterLockError):  # all or nothing
            with writer_locks([tmp_path / "free", run]):
                pass
        assert not (tmp_path / "free").exists() and files_of(run) == before


def test_a_lock_that_cannot_be_created_is_one_clear_line(tmp_path):
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    with pytest.raises(UsageError, match="--run-dir .*afile.txt: is a file"):
        with writer_lock(afile, "--run-dir"):
            pass
    with pytest.raises(UsageError, match="lies under"):
        with writer_lock(afile / "x"):
            pass
    assert [p.name for p in tmp_path.iterdir()] == ["afile.txt"]
