"""scripts/gpu_graph_relative.sh rehearsed on the CPU with tiny sizes (QUICK=1: the full rung
on three seeds and with a 4-layer block on one, a few steps each, with OVERRIDES and SET), so
the one GPU call cannot fail for a silly reason: every run trains and is scored, the packing
holds their scores and no checkpoint. Slow: `pytest -m slow`."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from test_gpu_session_script import rehearse

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_graph_relative_rehearsal_on_the_cpu(tmp_path):
    proc, out = rehearse("gpu_graph_relative.sh", ROOT, tmp_path, 400,
                         OVERRIDES="model.relative_gain=16", SET="gain")
    names = tarfile.open(out / "results.tar.gz").getnames()
    for seed in (0, 1, 2):
        want = f"gain/full_seed{seed}/runs/rec_sup_discrete_corrupt/seed{seed}/graph_scores.json"
        assert any(n.endswith(want) for n in names), want
    seed0 = "full_seed0/runs/rec_sup_discrete_corrupt/seed0/config.toml"
    config = tarfile.open(out / "results.tar.gz").extractfile(
        next(n for n in names if n.endswith(seed0)))
    assert "relative_gain = 16" in config.read().decode()  # the overrides reached the runs
    want = "full4_seed0/runs/rec_sup_discrete_corrupt/seed0/graph_scores.json"
    assert any(n.endswith(want) for n in names)
    assert not any(n.endswith(".pt") for n in names)
    assert "the guard" not in proc.stdout
