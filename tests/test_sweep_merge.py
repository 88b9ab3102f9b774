"""`python -m empirical sweep --merge`: seeds of one sweep trained apart, pooled (fast: the
results files are written here, nothing trains)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disentangled.errors import UserError
from empirical.cli.sweep import main as sweep_main
from empirical.experiments.sweep.merge import merge_results


def _results(path: Path, seed: int, accs: dict[float, float], metric="m/x") -> Path:
    rows = [
        {"member": f"v={x}_seed{seed}", "value": x, "x": x, "seed": seed, "final_step": 10,
         "metric": a, "aux": {}, "final_acc": {metric: a}, "metric_n": 100,
         "metric_correct": round(100 * a)}
        for x, a in accs.items()
    ]  # fmt: skip
    data = {"title": "demo: final accuracy (m/x) after 10 steps\nvs v (p = 5, 1 seed)",
            "param": "v", "x_label": "v", "metric": metric, "target": 0.9, "command": "c",
            "threshold": {}, "points": [], "members": rows, "missing_members": [],
            "stopped_members": {}}  # fmt: skip
    path.write_text(json.dumps(data))
    return path


def test_merge_pools_seeds_and_finds_the_threshold_of_the_mean(tmp_path):
    a = _results(tmp_path / "a.json", 0, {0.1: 0.5, 0.5: 0.95, 0.9: 1.0})
    b = _results(tmp_path / "b.json", 1, {0.1: 0.7, 0.5: 0.8, 0.9: 0.96})
    merged = merge_results([a, b])
    assert [p["mean"] for p in merged["points"]] == pytest.approx([0.6, 0.875, 0.98])
    assert merged["points"][1]["n_sequences"] == 200 and merged["points"][1]["correct"] == 175
    assert merged["threshold"]["threshold"] == 0.9  # the mean, not either seed alone
    assert merged["threshold"]["per_seed"] == {"0": 0.5, "1": 0.9}
    assert "2 seeds)" in merged["title"] and merged["merged_from"] == [str(a), str(b)]


def test_merge_refuses_what_is_not_one_sweep(tmp_path):
    a = _results(tmp_path / "a.json", 0, {0.1: 0.5})
    with pytest.raises(UserError, match="metric = 'm/y'"):
        merge_results([a, _results(tmp_path / "b.json", 1, {0.1: 0.5}, metric="m/y")])
    with pytest.raises(UserError, match="also in"):
        merge_results([a, _results(tmp_path / "c.json", 0, {0.1: 0.6})])
    with pytest.raises(UserError, match="at least two"):
        merge_results([a])
    (tmp_path / "d.json").write_text("{not json")
    with pytest.raises(UserError, match="not a JSON file"):
        merge_results([a, tmp_path / "d.json"])


def test_merge_command_writes_the_summary_and_rejects_bad_input(tmp_path, capsys):
    a = _results(tmp_path / "a.json", 0, {0.1: 0.5, 0.9: 1.0})
    b = _results(tmp_path / "b.json", 1, {0.1: 0.7, 0.9: 0.96})
    assert sweep_main(["--merge", str(a), str(b), "--out", str(tmp_path / "m")]) == 0
    assert {p.name for p in (tmp_path / "m").iterdir()} == {
        "results.json",
        "summary.md",
        "demo.png",
    }
    capsys.readouterr()
    absent = tmp_path / "absent.json"
    assert sweep_main(["--merge", str(a), str(absent), "--out", str(tmp_path / "n")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --merge {absent}: no such file (a sweep's results.json)"
    ]
    assert sweep_main(["--merge", str(a), str(b)]) == 2  # no --out
    assert "--merge needs --out" in capsys.readouterr().err
