"""benchmarks/bench_engine.py, bench_fast_forward.py and bench_threads.py print their rows on a
CPU (no timings are checked: they are benchmarks). bench_engine.py: the default
`--cuda-graph on` is timed as the graph-off step with a line saying why, and the authors'
HookedTransformer reference either runs or says why it does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a benchmark subprocess importing torch (5 s)
def test_a_cpu_run_prints_its_rows_and_the_reference():
    argv = ["--config", "configs/smoke.toml", "--device", "cpu", "--steps", "2", "--warmup", "1"]
    argv += ["--reference-steps", "2", "--reference-warmup", "1"]
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_engine.py"), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "config configs/smoke.toml," in text  # named relative to the repository
    assert "CUDA graph rows need CUDA" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1 | none | none |")]
    assert len(rows) == 1 and "| off |" in rows[0]
    assert "not run:" in text or "| authors' HookedTransformer |" in text


@pytest.mark.slow  # a benchmark subprocess importing torch (5 s)
def test_fast_forward_benchmark_compares_with_a_revision_and_refuses_a_bad_one():
    """benchmarks/bench_fast_forward.py against HEAD (the same fast forward unless the tree
    changed it bit for bit) prints its verdict and both rows; a revision git does not know
    is refused, naming it."""
    script = str(ROOT / "benchmarks" / "bench_fast_forward.py")
    argv = ["--config", "configs/smoke.toml", "--repeats", "1", "--batches", "1"]
    out = subprocess.run(
        [sys.executable, script, "--against", "HEAD", *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "logits and gradients equal bit for bit" in out.stdout
    assert "| forward (no grad) |" in out.stdout and "| forward + backward |" in out.stdout
    bad = subprocess.run(
        [sys.executable, script, "--against", "no-such-revision", *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert bad.returncode != 0 and "--against no-such-revision" in bad.stderr


@pytest.mark.slow  # a benchmark subprocess importing torch (5 s)
def test_threads_benchmark_prints_a_row_per_count_and_the_bit_check():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_threads.py"), "--config",
         "configs/smoke.toml", "--threads", "1", "2", "--repeats", "1", "--steps", "2"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2
    assert "equal bit for bit on 1, 2 threads" in out.stdout
