"""The run writer (empirical.train.writer): a training whose evaluations, snapshots and
checkpoints run in a process beside the step loop writes the very files the inline loop
writes; it resumes as the inline run does; a failing writer process is an error of the
training, with its traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from empirical.metrics_log import read_metrics
from empirical.run_config import load_run_config
from empirical.rundir import RunDir
from empirical.train.loop import train_run
from empirical.train.writer import MemberPoint, Point, ProcessWriter, WriterError, WriterMember

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
SCHEDULE = (
    "task.eval_size=200",
    "train.steps=40",
    "train.eval_every=10",
    "train.eval_subsample=50",
    "train.full_eval_every=20",
    "train.checkpoint_every=20",
    "train.snapshot_every=10",
)


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def flat_tensors(obj, prefix=""):
    """Every tensor of a nested dict / list, by its path."""
    if isinstance(obj, torch.Tensor):
        return {prefix: obj}
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flat_tensors(v, f"{prefix}/{k}"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flat_tensors(v, f"{prefix}/{i}"))
    return out


def same_tensors(a, b) -> bool:
    fa, fb = flat_tensors(a), flat_tensors(b)
    return fa.keys() == fb.keys() and all(torch.equal(fa[k], fb[k]) for k in fa)


@pytest.fixture(scope="module")
def inline_and_process(tmp_path_factory):
    cfg = load_run_config(SMOKE, list(SCHEDULE))
    root = tmp_path_factory.mktemp("writer")
    train_run(cfg, root / "inline", progress=False)
    train_run(cfg, root / "process", progress=False, writer_process=True)
    return cfg, RunDir(root / "inline"), RunDir(root / "process")


def test_the_writer_process_writes_the_inline_loops_files(inline_and_process):
    _, inline, process = inline_and_process
    a, b = read_metrics(inline.metrics), read_metrics(process.metrics)
    assert [r["step"] for r in b] == [0, 10, 20, 30, 40]
    assert strip_time(a) == strip_time(b)  # every accuracy and loss, bit for bit
    snaps = sorted(p.name for p in inline.snapshots_dir.glob("*.pt"))
    assert snaps == sorted(p.name for p in process.snapshots_dir.glob("*.pt")) and snaps
    for name in snaps:
        assert (inline.snapshots_dir / name).read_bytes() == (
            process.snapshots_dir / name
        ).read_bytes()
    ka = torch.load(inline.last_checkpoint, weights_only=True)
    kb = torch.load(process.last_checkpoint, weights_only=True)
    assert ka.keys() == kb.keys()
    for key in ka:  # model, optimiser, RNG states, loss windows: all but the wall-clock time
        if key == "elapsed_s":
            continue
        if flat_tensors(ka[key]):
            assert same_tensors(ka[key], kb[key]), key
        else:
            assert ka[key] == kb[key], key


def test_the_summary_says_where_the_evaluations_ran(inline_and_process):
    _, inline, process = inline_and_process
    a = json.loads(inline.summary.read_text())
    b = json.loads(process.summary.read_text())
    assert a["last_session"]["writer"] == "inline"
    assert b["last_session"]["writer"] == "process"
    assert b["last_session"]["writer_process"]["evaluations_s"] > 0
    assert a["final_acc"] == b["final_acc"]


def test_a_writer_process_run_resumes_as_the_inline_run(inline_and_process, tmp_path):
    cfg, inline, _ = inline_and_process
    train_run(cfg, tmp_path, progress=False, stop_at=20, writer_process=True)
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0, 10, 20]
    assert torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["step"] == 20
    train_run(cfg, tmp_path, resume=True, progress=False, writer_process=True)
    assert strip_time(read_metrics(tmp_path / "metrics.jsonl")) == strip_time(
        read_metrics(inline.metrics)
    )


def test_a_failing_writer_process_is_an_error_with_its_traceback(tmp_path):
    cfg = load_run_config(SMOKE, list(SCHEDULE))
    writer = ProcessWriter([WriterMember(cfg, RunDir(tmp_path / "no_run"))])
    with pytest.raises(WriterError, match=r"writer process failed: .*Traceback"):
        writer.write(Point(0, [MemberPoint(0)]))
        writer.close()
