"""The faults whose right outcome is a result (CORRECT_RESULTS of tests/test_bad_inputs.py):
a full disk, a torn metrics line, repairs, rebuilt evaluation sets, fingerprints (and run
directories from before them), recovery overrides, read-only inputs, output directories
that do not exist yet."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from empirical.__main__ import main
from empirical.report.files import append_text, atomic_write_bytes
from empirical.runs.config import config_fingerprint, load_run_config
from empirical.runs.metrics_log import read_metrics, scan_metrics
from empirical.runs.rundir import RunDir
from empirical.task.eval_sets import load_eval_sets, task_fingerprint
from empirical.train.loop import train_run
from empirical.train.state import load_training_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TRAIN = ["train", "--no-progress", "--no-figures"]  # the tests' runs: no figure drawn
CADENCE = ["task.eval_size=200", "train.steps=100", "train.eval_every=50",
           "train.checkpoint_every=20", "train.snapshot_every=20"]  # fmt: skip


def smoke(*overrides: str):
    return load_run_config(SMOKE, [*CADENCE, *overrides])


def strip_time(records, also=()):
    return [{k: v for k, v in r.items() if k != "elapsed_s" and k not in also} for r in records]


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def whole(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("whole") / "run"
    train_run(smoke(), path, progress=False, figures=False)
    return path


def assert_same_run(a: Path, b: Path, also=()) -> None:
    assert strip_time(read_metrics(a / "metrics.jsonl"), also) == strip_time(
        read_metrics(b / "metrics.jsonl"), also
    )
    wa = load_training_state(a / "checkpoints" / "last.pt")["model_state"]
    wb = load_training_state(b / "checkpoints" / "last.pt")["model_state"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err
    return errors[0]


# -- a full disk ---------------------------------------------------------------------------


def no_space_on(name: str, nth: int, monkeypatch):
    """os.fsync raises ENOSPC on the nth fsync of a file whose name contains `name` (the
    temporary of an atomic write, or an appended log)."""
    real, seen = os.fsync, {"n": 0}

    def fsync(fd):
        if name in os.readlink(f"/proc/self/fd/{fd}"):
            seen["n"] += 1
            if seen["n"] == nth:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
@pytest.mark.parametrize(
    ("name", "nth"),
    [
        (".last.pt.", 3),  # the checkpoint at step 60
        ("metrics.jsonl", 2),  # the record of step 50
        (".step_000040.pt.", 1),  # the snapshot at step 40
    ],
)
def test_full_disk_is_one_error_line_and_the_resume_matches(
    tmp_path, whole, monkeypatch, capsys, name, nth
):
    run = tmp_path / "run"
    no_space_on(name, nth, monkeypatch)
    argv = [*TRAIN, "--config", str(SMOKE), *CADENCE, "--run-dir", str(run)]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "No space left on device" in line and "free some space" in line
    assert name.strip(".") in line  # names the file
    monkeypatch.undo()
    scan = scan_metrics(run / "metrics.jsonl")
    assert not scan.bad and scan.torn is None  # the log is intact: no torn line
    assert not list(run.rglob(".*.tmp"))
    assert load_training_state(run / "checkpoints" / "last.pt")["step"] in (20, 40)
    assert main([*TRAIN, "--resume", str(run)]) == 0
    assert_same_run(whole, run)


def test_append_and_atomic_write_name_the_file_and_leave_it_intact(tmp_path, monkeypatch):
    log, data = tmp_path / "log.jsonl", tmp_path / "data.bin"
    append_text(log, "one\n")
    atomic_write_bytes(data, b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as info:
        append_text(log, "two\n")
    assert info.value.filename == str(log) and info.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as info:
        atomic_write_bytes(data, b"new")
    assert info.value.filename == str(data)
    monkeypatch.undo()
    assert log.read_text() == "one\n" and data.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin", "log.jsonl"]


@pytest.mark.slow
def test_full_disk_for_real_on_a_small_tmpfs(tmp_path, whole):
    """A 400 KiB tmpfs (root only): the run stops with one error line naming the file; once
    the file system is larger, the resume gives the uninterrupted run."""
    import subprocess
    import sys

    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        pytest.skip("needs root and mount to make a small file system")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "empirical", *TRAIN, "--config", str(SMOKE),
             *CADENCE, "--run-dir", str(mnt / "run")],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=300,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        line = one_error_line(proc.stderr)
        assert "No space left on device" in line and str(mnt) in line
        scan = scan_metrics(mnt / "run" / "metrics.jsonl")
        assert not scan.bad and scan.torn is None
        subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], check=True)
        train_run(smoke(), mnt / "run", resume=True, progress=False, figures=False)
        assert_same_run(whole, mnt / "run")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


# -- a torn metrics line, stale files ------------------------------------------------------


def test_a_torn_last_metrics_line_is_dropped_with_a_note(tmp_path, whole, capsys):
    run = tmp_path / "run"
    train_run(smoke(), run, progress=False, stop_at=60)
    record = json.dumps({"step": 100, "acc": {}})
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write(record[:20])  # a crash during the append
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [0, 50]
    assert "line 3 is incomplete" in capsys.readouterr().err
    train_run(smoke(), run, resume=True, progress=False, figures=False)
    assert_same_run(whole, run)


def test_a_bad_line_that_is_not_the_last_is_an_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "acc": {}}\n{"step": 5, "ac\n{"step": 10, "acc": {}}\n')
    from empirical.runs.metrics_log import MetricsError

    with pytest.raises(MetricsError, match="line 2 is not JSON"):
        read_metrics(path)
    path.write_text('{"step": 0, "acc": {}}\n{"step": 5, "acc": {}}\n')  # complete, no torn
    assert len(read_metrics(path)) == 2


# -- repair --------------------------------------------------------------------------------


def test_repair_keeps_every_valid_line_and_says_what_it_dropped(tmp_path, capsys):
    run = tmp_path / "run"
    train_run(smoke("train.steps=60", "train.eval_every=20"), run, progress=False, figures=False)
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    broken = [lines[0], "garbage\n", lines[1], lines[1], lines[2], lines[3][:30]]
    path.write_text("".join(broken))
    original = path.read_bytes()
    assert main(["repair", str(run)]) == 0
    out = capsys.readouterr().out
    assert "kept 3 valid records, dropped 3 line(s)" in out
    assert "dropped line 2" in out and "dropped line 4" in out and "dropped line 6" in out
    assert [r["step"] for r in read_metrics(path)] == [0, 20, 40]  # step 60 was torn
    assert RunDir(run).metrics_backup.read_bytes() == original  # nothing lost
    assert main(["repair", str(run)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_repair_rebuilds_a_missing_log_and_the_resume_goes_on(tmp_path, capsys):
    run = tmp_path / "run"
    train_run(smoke(), run, progress=False, stop_at=60)
    (run / "metrics.jsonl").unlink()
    assert main([*TRAIN, "--resume", str(run)]) == 2
    assert "repair" in one_error_line(capsys.readouterr().err)
    assert main(["repair", str(run)]) == 0
    records = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 20, 40, 60]  # the snapshots (and checkpoint)
    assert all(r["rebuilt"] and r["train_loss"] is None for r in records)
    assert main([*TRAIN, "--resume", str(run)]) == 0
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [0, 20, 40, 60, 100]


# -- evaluation sets -----------------------------------------------------------------------


def test_eval_sets_of_another_seed_are_refused_then_rebuilt(tmp_path, whole, capsys):
    run, other = tmp_path / "run", tmp_path / "other"
    train_run(smoke(), run, progress=False, stop_at=40)
    train_run(smoke("seed=1"), other, progress=False, stop_at=20)
    shutil.copy2(other / "eval_sets.pt", run / "eval_sets.pt")
    assert main(["evaluate", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "seed 1" in line and "--rebuild-eval-sets" in line
    assert main([*TRAIN, "--resume", str(run), "--rebuild-eval-sets"]) == 0
    sets = load_eval_sets(run / "eval_sets.pt")
    assert sets.seed == 0 and sets.fingerprint == task_fingerprint(smoke().task, 0)
    assert_same_run(whole, run)


def test_repair_rebuilds_garbage_eval_sets(tmp_path, capsys):
    run = tmp_path / "run"
    train_run(smoke("train.steps=20"), run, progress=False, figures=False)
    before = (run / "eval_sets.pt").read_bytes()
    (run / "eval_sets.pt").write_bytes(b"garbage")
    assert main(["evaluate", str(run)]) == 2
    assert "--rebuild-eval-sets" in capsys.readouterr().err
    assert main(["repair", str(run), "--rebuild-eval-sets"]) == 0
    assert main(["evaluate", str(run)]) == 0
    sets_a, sets_b = load_eval_sets(run / "eval_sets.pt"), None
    (run / "eval_sets.pt").write_bytes(before)
    sets_b = load_eval_sets(run / "eval_sets.pt")
    assert all(torch.equal(sets_a[k].tokens, sets_b[k].tokens) for k in sets_b)


# -- fingerprints --------------------------------------------------------------------------


def test_fingerprints_ignore_what_a_resume_may_change():
    base = smoke()
    assert config_fingerprint(base) == config_fingerprint(
        smoke("train.steps=500", "train.lr=0.01", "train.device=cpu", "train.warmup_steps=5")
    )
    assert config_fingerprint(base) == config_fingerprint(smoke("train.sample_chunk=4"))
    assert config_fingerprint(base) != config_fingerprint(smoke("seed=1"))
    assert config_fingerprint(base) != config_fingerprint(smoke("task.p=13"))
    assert config_fingerprint(base) != config_fingerprint(smoke("train.batch_size=32"))
    assert task_fingerprint(base.task, 0) == task_fingerprint(smoke("model.d_model=64").task, 0)
    assert task_fingerprint(base.task, 0) != task_fingerprint(base.task, 1)


def test_every_file_of_a_run_carries_its_fingerprint(whole):
    cfg = RunDir(whole).read_config()
    fp = config_fingerprint(cfg)
    assert load_training_state(whole / "checkpoints" / "last.pt")["config_fingerprint"] == fp
    snap = torch.load(whole / "snapshots" / "step_000020.pt", weights_only=True)
    assert snap["config_fingerprint"] == fp
    assert all(r["fingerprint"] == fp for r in read_metrics(whole / "metrics.jsonl"))
    assert load_eval_sets(whole / "eval_sets.pt").fingerprint == task_fingerprint(cfg.task, 0)


def strip_fingerprints(run: Path) -> None:
    """Make `run` look like a run directory written before fingerprints existed."""
    for path in [run / "checkpoints" / "last.pt", *(run / "snapshots").glob("*.pt")]:
        ckpt = torch.load(path, weights_only=True)
        ckpt.pop("config_fingerprint")
        torch.save(ckpt, path)
    sets = torch.load(run / "eval_sets.pt", weights_only=True)
    sets.pop("fingerprint")
    torch.save(sets, run / "eval_sets.pt")
    records = read_metrics(run / "metrics.jsonl")
    for r in records:
        r.pop("fingerprint")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_run_from_before_fingerprints_is_accepted(tmp_path, whole, capsys):
    run = tmp_path / "run"
    train_run(smoke(), run, progress=False, stop_at=60)
    strip_fingerprints(run)
    assert main(["evaluate", str(run), "--step", "20"]) == 0
    assert main([*TRAIN, "--resume", str(run)]) == 0
    assert_same_run(whole, run, also=("fingerprint",))
    records = read_metrics(run / "metrics.jsonl")
    assert "fingerprint" not in records[0] and "fingerprint" in records[-1]


# -- resume settings and leftovers ---------------------------------------------------------


def test_resume_from_the_command_line_may_change_the_recovery_settings(tmp_path, capsys):
    run = tmp_path / "run"
    train_run(smoke("train.steps=40"), run, progress=False, stop_at=20)
    recovery = ["train.lr=0.0005", "train.grad_clip=1.0", "train.warmup_steps=5",
                "train.divergence_factor=20"]  # fmt: skip
    argv = [*TRAIN, "--resume", str(run), *recovery]
    assert main(argv) == 0
    history = [json.loads(x) for x in (run / "config_history.jsonl").read_text().splitlines()]
    assert history[-1]["changes"]["train.lr"] == [0.001, 0.0005]
    assert history[-1]["changes"]["train.grad_clip"] == [None, 1.0]


def test_garbage_summary_and_stopped_files_do_not_stop_a_resume(tmp_path, whole):
    run = tmp_path / "run"
    train_run(smoke(), run, progress=False, stop_at=60)
    (run / "summary.json").write_bytes(b"\x00{garbage")
    (run / "stopped.json").write_bytes(b"not json")
    assert "unreadable" in RunDir(run).read_stopped()["reason"]
    assert main([*TRAIN, "--resume", str(run)]) == 0
    assert not (run / "stopped.json").exists()
    assert RunDir(run).read_summary()["final_step"] == 100
    assert_same_run(whole, run)


def test_sweep_rewrites_a_finished_members_garbage_summary(tmp_path, capsys):
    out = tmp_path / "sw"
    argv = ["sweep", "task.eval_size=200", "train.steps=20", "--no-progress", "--config",
            str(SMOKE), "--param", "train.lr=0.001", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    member = RunDir(out / "members" / "lr=0.001_seed0")
    member.summary.write_bytes(b"{garbage")
    member.stopped.write_bytes(b"")  # and a garbage stopped.json: not trained again
    assert main(argv) == 0
    assert "not trained" in capsys.readouterr().err
    member.stopped.unlink()
    assert main(argv) == 0
    assert member.read_summary()["final_step"] == 20


# -- read-only inputs, outputs that do not exist yet ---------------------------------------


def test_evaluate_a_read_only_run_without_eval_sets(tmp_path, capsys):
    from test_bad_inputs import _read_only, _undo_read_only

    ro = tmp_path / "ro"
    train_run(smoke("train.steps=20"), ro / "run", progress=False, figures=False)
    (ro / "run" / "eval_sets.pt").unlink()
    if not _read_only(ro):
        pytest.skip("no way to make a read-only directory here")
    try:
        assert main(["evaluate", str(ro / "run")]) == 0
        captured = capsys.readouterr()
        assert "note: evaluation sets not saved" in captured.err
        assert json.loads(captured.out)["step"] == 20
    finally:
        _undo_read_only(ro)


def test_theory_report_creates_a_missing_directory(tmp_path, monkeypatch, capsys):
    import theory.report
    from theory.__main__ import main as theory_main

    monkeypatch.setattr(theory.report, "build_report", lambda points, quick: "# report\n")
    out = tmp_path / "a" / "b" / "report.md"
    assert theory_main(["report", "--quick", "--out", str(out)]) == 0
    assert out.read_text() == "# report\n"


def test_disentangled_creates_a_missing_output_directory(tmp_path):
    from disentangled.__main__ import main as dis_main

    out = tmp_path / "new" / "dir"
    assert dis_main(["dynamics", "--steps", "1", "--out", str(out)]) == 0
    assert (out / "dynamics.json").is_file() and (out / "dynamics.png").is_file()


def test_device_names():
    assert smoke("train.device=cuda:1").train.device == "cuda:1"
    assert smoke("train.device=cuda").train.device == "cuda"
    for bad in ("cuda:abc", "cuda:", "cuda:-1", "gpu", "cpu:0 "):
        with pytest.raises(Exception, match="train.device"):
            smoke(f"train.device={bad}")


def test_every_device_name_goes_through_one_check():
    # train.device, evaluate's and sample's --device: one resolve_device, the source named
    from disentangled.errors import UsageError
    from empirical.model.device import resolve_device

    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None) == resolve_device("auto")
    with pytest.raises(UsageError, match=r"--device = 'gpu' is not a device; allowed 'auto'"):
        resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"train.device = 'cuda:0' but CUDA is not available"):
            resolve_device("cuda:0", "train.device", ValueError)


def test_a_cpu_run_records_the_cpu_kind():
    # float32 training rounds differently on different CPU kinds: summary.json names which
    import torch

    from empirical.model.device import cpu_model
    from empirical.train.summary import _device_name

    name = _device_name("cpu")
    assert name == f"CPU ({cpu_model()}, {torch.get_num_threads()} threads)"
    assert cpu_model() and cpu_model() != "CPU"
