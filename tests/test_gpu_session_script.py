"""scripts/gpu_session.sh rehearsed on the CPU with tiny sizes (QUICK=1): every stage runs and
the packed results come back, so the one GPU call of a session cannot fail for a silly
reason. Slow (about 3 minutes): `pytest -m slow`."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def rehearse(script: str, cwd: Path, tmp_path: Path, budget: int, **extra: str):
    """Run scripts/SCRIPT in `cwd` with tiny sizes on the CPU (`extra`: more environment
    variables): (completed process, $OUT)."""
    out, work = tmp_path / "out", tmp_path / "work"
    env = {
        **os.environ,
        "QUICK": "1",
        "DEVICE": "cpu",
        "WHEELS": "0",
        "BUDGET": str(budget),
        "OUT": str(out),
        "WORK": str(work),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        **extra,
    }
    proc = subprocess.run(["bash", f"scripts/{script}"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, out


@pytest.mark.slow
def test_gpu_session_rehearsal_on_the_cpu(tmp_path):
    proc, out = rehearse("gpu_session.sh", ROOT, tmp_path, 500)
    assert "default run: rc 0" in proc.stdout
    names = tarfile.open(out / "results.tar.gz").getnames()
    assert any(n.endswith("default_run/summary.json") for n in names)
    assert any(n.endswith("test_cuda_graph.log") for n in names)
    assert any(n.endswith("fig3/progress.md") for n in names)
    assert (out / "bench_engine.md").read_text().count("| off |") == 3  # no graph on a CPU


@pytest.mark.slow
def test_gpu_session_chain_rehearsal_on_the_cpu(tmp_path):
    """scripts/gpu_session_chain.sh with tiny sizes on the CPU, in a clone (its grids write the
    working tree's runs/, and the curriculum's stage 2 starts from stage 1's models there):
    the main job, Figure 3's seeds 1-2, the depth grid and both curriculum stages, packed."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    proc, out = rehearse("gpu_session_chain.sh", clone, tmp_path, 600)
    assert "main job: rc 0" in proc.stdout
    names = tarfile.open(out / "results.tar.gz").getnames()
    assert any(n.endswith("reproduce/authors/report.md") for n in names)
    assert any(n.endswith("fig3_seeds12/progress.md") for n in names)
    assert any(n.endswith("chain_depth_gpu/grid.md") for n in names)
    assert any(n.endswith("chain_curriculum_stage1/grid.md") for n in names)
    # stage 2 started each seed from its own stage-1 model
    config = clone / "runs" / "chain_curriculum" / "members" / "h1_then_h2_seed2" / "config.toml"
    assert "h1_seed2/checkpoints/last.pt" in config.read_text()
    assert not any(n.endswith(".pt") for n in names)


@pytest.mark.slow
def test_gpu_session_fig3_main_rehearsal_on_the_cpu(tmp_path):
    """scripts/gpu_session_fig3_main.sh with tiny sizes on the CPU: Figure 3's seeds 1-2 alone,
    then the main job alone, packed."""
    proc, out = rehearse("gpu_session_fig3_main.sh", ROOT, tmp_path, 400)
    assert "main job: rc 0" in proc.stdout and "Figure 3 seeds 1 2: rc 0" in proc.stdout
    names = tarfile.open(out / "results.tar.gz").getnames()
    assert any(n.endswith("reproduce/authors/report.md") for n in names)
    assert any(n.endswith("fig3_seeds12/progress.md") for n in names)
    assert not any(n.endswith(".pt") for n in names)


@pytest.mark.slow
def test_gpu_session_main_job_alone_rehearsal_on_the_cpu(tmp_path):
    """SKIP_FIG3=1: the same script runs the main job alone (a session whose Figure 3 seeds are
    done already), and says that it skipped Figure 3."""
    proc, out = rehearse("gpu_session_fig3_main.sh", ROOT, tmp_path, 300, SKIP_FIG3="1")
    assert "main job: rc 0" in proc.stdout and "Figure 3 seeds 1 2: skipped" in proc.stdout
    names = tarfile.open(out / "results.tar.gz").getnames()
    assert any(n.endswith("reproduce/authors/report.md") for n in names)
    assert not any("fig3_seeds12" in n for n in names)
