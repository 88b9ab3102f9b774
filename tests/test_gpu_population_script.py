"""scripts/gpu_population.sh rehearsed on the CPU with tiny sizes (QUICK=1: 2 members per
population, 40 steps of the authors' model): the benchmark, the paper's step-1 weights, both
populations trained and counted by `claims`, packed, so the one GPU call cannot fail for a
silly reason. In a clone (the script imports the step-1 weights into the working tree's
runs/authors). Slow (a few minutes): `pytest -m slow`."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from test_gpu_session_script import rehearse

from empirical.config.paths import authors_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_population_rehearsal_on_the_cpu(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    step1 = authors_dir() / "checkpoints"
    has_step1 = (step1 / "checkpoint_step_1.pth").is_file()
    extra = {"AUTHORS_STEP1": str(step1)} if has_step1 else {"AUTHORS_STEP1": str(tmp_path)}
    proc, out = rehearse("gpu_population.sh", clone, tmp_path, 900, **extra)
    assert "benchmark: rc 0" in proc.stdout and "claims: rc 0" in proc.stdout, proc.stdout[-3000:]
    bench = json.loads((out / "bench_population.json").read_text())
    assert bench["n"] == 2 and bench["member_steps_per_s"] > 0
    assert "member-steps/s" in (out / "bench_population.md").read_text()
    names = tarfile.open(out / "results.tar.gz").getnames()
    assert any(n.endswith("claims/ours/claims.json") for n in names)
    assert any(n.endswith("claims/ours/survival.png") for n in names)
    assert any(n.endswith("timings.json") for n in names)
    assert not any(n.endswith(".pt") for n in names)
    if has_step1:  # both populations and their comparison
        assert any(n.endswith("claims/paper_init/claims.md") for n in names)
        assert any(n.endswith("claims/comparison/comparison.json") for n in names)
        assert any(n.endswith("claims/comparison/survival.png") for n in names)
        assert (clone / "runs" / "authors" / "snapshots" / "step_000001.pt").is_file()
    else:
        assert "population paper_init left out" in proc.stdout
    assert "4 members: 4 finished" in proc.stdout or "2 members: 2 finished" in proc.stdout
    assert os.path.getsize(out / "progress.md") > 0
