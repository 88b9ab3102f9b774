"""`python -m empirical grid`: named variants x seeds, batched, tabulated, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from empirical.cli.grid import main as grid_main
from empirical.config.io import ConfigError
from empirical.experiments.sweep.spec import GridSpec, expand_grid, load_grid_config
from empirical.train.summary import first_step_all_above

ROOT = Path(__file__).resolve().parents[1]
SMOKE = (ROOT / "configs" / "smoke.toml").read_text()
TINY = ["task.eval_size=200", "train.steps=20", "train.eval_every=10", "train.snapshot_every=0"]


def grid_file(tmp_path: Path, variants: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(SMOKE + "\n[grid]\nseeds = [0]\n\n[grid.variants]\n" + variants)
    return path


def test_grid_trains_every_variant_in_one_batch_and_tabulates(tmp_path, capsys):
    path = grid_file(
        tmp_path,
        'base = []\nwd01 = ["train.weight_decay=0.1"]\nratio2 = ["task.ratio_2var_to_0var=2.0"]\n',
    )
    out = tmp_path / "out"
    assert grid_main(["--config", str(path), "--out", str(out), "--no-progress",
                      "--no-member-figures", *TINY]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "1 batch(es) to train" in err  # lr / weight decay / task data share a batch
    results = json.loads((out / "grid.json").read_text())
    assert [v["variant"] for v in results["variants"]] == ["base", "wd01", "ratio2"]
    assert all(r["finished"] and r["step"] == 20 for r in results["members"])
    assert results["sets"][0] == "0var/ind" and "2var/var" in results["sets"]
    cfg = (out / "members" / "wd01_seed0" / "config.toml").read_text()
    assert "weight_decay = 0.1" in cfg
    table = (out / "grid.md").read_text()
    assert "| wd01 | 20 |" in table and "`ratio2`: task.ratio_2var_to_0var=2.0" in table
    # the first step at >= 90% per set: from each member's metrics, as set_timeline finds it
    from empirical.runs.rundir import RunDir
    from empirical.runs.set_timeline import set_timeline

    member = next(r for r in results["members"] if r["member"] == "wd01_seed0")
    records = RunDir(out / "members" / "wd01_seed0").read_metrics()
    assert member["first_90"] == {n: t["first_90"] for n, t in set_timeline(records).items()}
    assert "## First evaluated step at >= 90% per set" in table
    assert (out / "grid.png").stat().st_size > 10_000
    assert not list((out / "members").glob("*/training_curves.*"))  # --no-member-figures
    # a second call trains nothing; --only narrows the grid
    assert grid_main(["--config", str(path), "--out", str(out), "--only", "base", *TINY]) == 0
    assert "1 done or stopped, 0 batch(es)" in capsys.readouterr().err


def test_bad_grids_are_one_error_line(tmp_path, capsys):
    ok = grid_file(tmp_path, "base = []\n")
    assert grid_main(["--config", str(ok), "--only", "nope"]) == 2
    bad = grid_file(tmp_path, 'base = ["train.weight_decay=-1"]\n')
    assert grid_main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "error: --only: unknown variant(s) nope; the config has base"
    assert err[1].startswith("error: grid.variants.base:") and "weight_decay" in err[1]
    with pytest.raises(ConfigError, match="name 'a b'"):
        GridSpec(variants={"a b": []})
    with pytest.raises(ConfigError, match="list of override strings"):
        GridSpec(variants={"a": "train.lr=1"})
    with pytest.raises(ConfigError, match="no \\[grid\\] table"):
        load_grid_config(ROOT / "configs" / "smoke.toml")
    base, spec = load_grid_config(ok, TINY)
    assert [m.dirname for m in expand_grid(base, GridSpec({"x": []}, seeds=[0, 3]))] == [
        "x_seed0",
        "x_seed3",
    ]


def test_first_step_all_above():
    recs = [
        {"step": 0, "acc": {"a": 0.1, "b": 0.2}},
        {"step": 10, "acc": {"a": 0.995, "b": 0.98}},
        {"step": 20, "acc": {"a": 0.995, "b": 0.991}},
    ]
    assert first_step_all_above(recs, 0.99) == 20
    assert first_step_all_above(recs, 0.999) is None


def test_seed_placeholder_gives_each_member_its_own_value(tmp_path):
    """`{seed}` in a variant's override is the member's seed: a curriculum's second grid
    starts each seed from the first grid's model of the same seed."""
    path = grid_file(tmp_path, 'x = ["train.init_from=stage1/h1_seed{seed}/last.pt"]\n')
    base, _ = load_grid_config(path, TINY)
    spec = GridSpec({"x": ["train.init_from=s/h1_seed{seed}.pt"]}, seeds=[0, 2])
    members = expand_grid(base, spec)
    assert [m.cfg.train.init_from for m in members] == ["s/h1_seed0.pt", "s/h1_seed2.pt"]
    assert [m.cfg.seed for m in members] == [0, 2]
