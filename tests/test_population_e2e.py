"""A tiny population end to end on the CPU (configs/population_smoke.toml: 4 members, 800
steps): trained by `grid` as the lead trains the authors' population, then `claims` on that
directory: nothing retrained, every member analysed (analysis.json; compare-qk across the
first spike where a member has one), claims.json / claims.md / figures written; a second
call keeps every analysis and gives the same claims. Slow (a minute or two)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "population_smoke.toml"


@pytest.mark.slow
def test_smoke_population_trained_by_grid_then_claims(tmp_path, capsys):
    from empirical.cli import claims, grid

    out = tmp_path / "population_smoke"
    assert grid.main(["--config", str(CONFIG), "--out", str(out), "--no-progress"]) == 0
    members = sorted((out / "members").iterdir())
    assert [m.name for m in members] == [f"ours_seed{s}" for s in range(4)]
    last = {m.name: (m / "checkpoints" / "last.pt").stat().st_mtime_ns for m in members}
    capsys.readouterr()

    argv = ["--config", str(CONFIG), "--out", str(out), "--no-progress", "--jobs", "2",
            "--final-window", "200"]  # fmt: skip
    assert claims.main(argv) == 0
    err = capsys.readouterr().err
    assert "4 done or stopped, 0 batch(es) to train" in err
    assert {m.name: (m / "checkpoints" / "last.pt").stat().st_mtime_ns for m in members} == last

    c = json.loads((out / "claims" / "ours" / "claims.json").read_text())
    assert c["members"] == 4 and c["config"] == "population_smoke.ours"
    assert len(c["jumps"]["first"]) == 4 and len(c["final"]["1var/var"]) == 4
    assert c["final_window"] == 200 and c["final_stats"]["1var/var"]["n_evals"] == [8] * 4
    by_claim = {x["claim"]: x for x in c["claims"]}
    assert by_claim["isolated OV-MLP adds all pairs"]["of"] == 4  # analysed: every member
    assert c["not_analysed"] == {}
    for m in members:
        assert (m / "analysis" / "analysis.json").exists()
    with_spike = [m for m, step in zip(members, c["jumps"]["first"], strict=True) if step]
    for m in with_spike:
        assert (m / "compare_qk_spike1" / "compare_qk.json").exists()
    measured = sum(v is not None for v in c["theory"]["cos_whole"])
    assert measured == len(with_spike)
    theory = by_claim[c["theory_claims"][0]]
    assert theory["of"] == measured
    for name in ("claims.md", "jumps.png", "survival.png", "final.png", "theory.png"):
        assert (out / "claims" / "ours" / name).stat().st_size > 0

    analysed = {m.name: (m / "analysis" / "analysis.json").stat().st_mtime_ns for m in members}
    assert claims.main([*argv, "--summarize"]) == 0
    again = json.loads((out / "claims" / "ours" / "claims.json").read_text())
    assert again == c
    assert {m.name: (m / "analysis" / "analysis.json").stat().st_mtime_ns
            for m in members} == analysed  # fmt: skip
