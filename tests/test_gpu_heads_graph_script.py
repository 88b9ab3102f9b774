"""scripts/gpu_heads_graph.sh rehearsed on the CPU with tiny sizes (QUICK=1: 2 members of
softmax and linear, 1 of HYLA, every graph rung and both seed-size runs for a few steps), so
the one GPU call cannot fail for a silly reason: everything trains, the packing holds every
member's metrics and every graph run's scores and no checkpoint; and with a budget too short
for the trainings (far more steps than fit), the guard stops them and still packs. Slow:
`pytest -m slow`."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from test_gpu_session_script import rehearse

from empirical.studies.graph.options import LADDER

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_heads_graph_rehearsal_on_the_cpu(tmp_path):
    proc, out = rehearse("gpu_heads_graph.sh", ROOT, tmp_path, 400)
    names = tarfile.open(out / "results.tar.gz").getnames()
    for v in ("softmax", "linear", "hyla"):
        assert any(f"heads_attention_authors_{v}/members/{v}_seed0/metrics.jsonl" in n
                   for n in names), v  # fmt: skip
    for rung in LADDER:
        assert any(n.endswith(f"{rung}/seed0/graph_scores.json") for n in names), rung
    assert any(n.endswith("graph_seed_sizes_gpu/rec/runs/rec/seed0/summary.json") for n in names)
    assert not any(n.endswith(".pt") for n in names)
    assert (out / "graph_full_seed0.tar.gz").is_file()
    assert "the guard" not in proc.stdout


@pytest.mark.slow
def test_the_guard_stops_and_packs(tmp_path):
    # far more steps than fit in the budget, on any machine: the guard stops every training
    proc, out = rehearse("gpu_heads_graph.sh", ROOT, tmp_path, 70, QUICK_STEPS="1000000")
    assert "the guard: stopping" in proc.stdout, proc.stdout[-2000:]
    assert (out / "results.tar.gz").is_file() and (out / "progress.md").is_file()
