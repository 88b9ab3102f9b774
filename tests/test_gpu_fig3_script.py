"""scripts/gpu_fig3.py end to end on the CPU with tiny overrides (slow: several processes):
both panels train, the summaries and the small files land in --out; a budget too short
stops the panels at a checkpoint and the same command resumes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "train.eval_every=10",
    "train.checkpoint_every=10",
    "task.eval_size=100",
    "model.d_model=32",
    "model.d_mlp=64",
    "train.batch_size=32",
    "task.p=11",
    "train.sample_chunk=10",  # the configs' 100 does not divide these step counts
]


def script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_fig3.py"), "--values", "2"]
    cmd += ["--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_gpu_script_end_to_end_on_the_cpu(tmp_path):
    done = script(tmp_path, "--budget", "400", "--", "train.steps=20", *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "out"
    for panel, metric in [
        ("two_var_frequency", "fig3/2var_union"),
        ("pair_fraction", "fig3/0var_held_out"),
    ]:
        res = json.loads((out / panel / "results.json").read_text())
        assert res["metric"] == metric and len(res["members"]) == 2
        assert all(r["metric_ci"] for r in res["members"])
        assert len(list((out / panel / "members").glob("*/metrics.jsonl"))) == 2
        assert not list((out / panel).rglob("*.pt"))  # checkpoints stay in --runs
    assert "finished" in (out / "progress.md").read_text()
    assert json.loads((out / "timings.json").read_text())["panels"]


def last_steps(out: Path) -> list[int]:
    rows = (out / "progress.md").read_text().splitlines()[2:]
    return [int(r.split("|")[3]) for r in rows]


@pytest.mark.slow
def test_gpu_script_guard_stops_and_a_second_call_resumes(tmp_path):
    # far more steps than fit: the guard stops both panels at the deadline (SIGTERM); every
    # member keeps its last checkpoint, and the same command continues from there
    args = ["--budget", "100", "--reserve", "40", "--", "train.steps=1000000", *TINY]
    first = script(tmp_path, *args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.count("stopped by the guard") == 2
    assert "unfinished" in (tmp_path / "out" / "progress.md").read_text()
    before = last_steps(tmp_path / "out")
    assert min(before) > 0
    second = script(tmp_path, *args)
    assert second.returncode == 0, second.stdout + second.stderr
    log = (tmp_path / "out" / "pair_fraction.log").read_text()
    assert "0 finished (skipped), 2 resuming, 0 new" in log
    after = last_steps(tmp_path / "out")
    assert all(a > b for a, b in zip(after, before, strict=True)), (
        before,
        after,
        second.stdout[-3000:],
        log[-3000:],
    )
