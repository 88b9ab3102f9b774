"""Figure 3 at the paper's size: the paper's grids as configs on the authors' configuration,
the exact training-pair counts, metrics that name any evaluation set, ordered pair weights,
and every threshold and accuracy with its uncertainty."""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path

import pytest

from empirical.config.io import ConfigError
from empirical.experiments.sweep.metrics import (
    MetricWeights,
    check_metric,
    metric_value,
    pair_weight,
    with_metric_sets,
)
from empirical.experiments.sweep.param_sweep import run_sweep
from empirical.experiments.sweep.results import results_report, summarize
from empirical.experiments.sweep.spec import SweepSpec, expand_members, load_sweep_config
from empirical.experiments.sweep.summary_md import uncertainty_sentence
from empirical.report.writer import write_report
from empirical.runs.config import load_run_config
from empirical.task.config import task_config
from empirical.task.pairs import held_out_pairs

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
TV_GRID = [0.01 + i * (0.99 - 0.01) / 19 for i in range(20)]
PF_GRID = [0.06157894736842105 + i * (0.99 - 0.06157894736842105) / 19 for i in range(20)]


def test_paper_configs_are_the_authors_config_with_the_papers_grids():
    authors = tomllib.loads((CONFIGS / "authors.toml").read_text())
    for name, param, grid, metric in [
        ("fig3_two_var_frequency_paper", "task.two_var_frequency", TV_GRID, "fig3/2var_union"),
        ("fig3_pair_fraction_paper", "pair_fraction", PF_GRID, "fig3/0var_held_out"),
    ]:
        data = tomllib.loads((CONFIGS / f"{name}.toml").read_text())
        sweep = data.pop("sweep")
        assert sweep["param"] == param and sweep["values"] == grid  # exactly, bit for bit
        assert sweep["metric"] == metric and sweep["seeds"] == [0, 1, 2]
        assert data["name"] == name and metric in data["task"]["extra_eval_sets"]
        # everything else is configs/authors.toml, but for these (Figure 3) lines and the
        # main job's evaluation subsample (the sweeps evaluate every sequence every time)
        changed = {"steps", "eval_every", "checkpoint_every", "snapshot_every", "sample_chunk"}
        changed |= {"eval_subsample", "full_eval_every"}
        assert data["train"]["steps"] == 30000
        for section in ("task", "model", "train"):
            for key, value in authors[section].items():
                if key not in changed:
                    assert data[section][key] == value, (name, section, key)
        base, spec = load_sweep_config(CONFIGS / f"{name}.toml")
        assert len(expand_members(base, spec)) == 60


@pytest.mark.parametrize("name", ["fig3_two_var_frequency_cpu", "fig3_pair_fraction_cpu"])
def test_cpu_configs_load(name):
    base, spec = load_sweep_config(CONFIGS / f"{name}.toml")
    assert spec.metric in base.task.extra_eval_sets
    assert expand_members(base, spec)


def test_pair_fraction_trains_exactly_floor_f_p_p_pairs_for_every_paper_value():
    base, _ = load_sweep_config(CONFIGS / "fig3_pair_fraction_paper.toml")
    members = expand_members(base, SweepSpec(param="pair_fraction", values=PF_GRID, seeds=[0]))
    for f, m in zip(PF_GRID, members, strict=True):
        assert m.cfg.task.train_pair_fraction == f
        assert m.cfg.task.n_train_ordered == math.floor(f * 59 * 59)
        assert m.cfg.task.n_held_out == 59 * 59 - math.floor(f * 59 * 59)
    # the held-out table itself, at both ends of the grid
    for m, f in ((members[0], PF_GRID[0]), (members[-1], PF_GRID[-1])):
        assert held_out_pairs(m.cfg.task, 0).shape[0] == 3481 - math.floor(f * 3481)


def test_train_pair_fraction_does_not_round_trip_through_held_out_fraction():
    # the authors count floor(f * p * p) in floating point; going through
    # held_out_fraction = 1 - f and back gives one pair more or fewer for some f
    cfg = task_config(p=10, K=4, held_out_form="ordered", pair_split="python_random")
    for f, theirs, round_trip in [(0.07, 7, 6), (0.57, 56, 57)]:
        assert math.floor(f * 10 * 10) == theirs
        assert math.floor((1 - round(1 - f, 12)) * 10 * 10) == round_trip
        got = dataclasses.replace(cfg, train_pair_fraction=f)
        assert got.n_train_ordered == theirs and got.held_out_fraction == round(1 - f, 12)
        assert held_out_pairs(got, 0).shape[0] == 100 - theirs
    with pytest.raises(ConfigError, match="train_pair_fraction = 0.0 must be a number in"):
        dataclasses.replace(cfg, train_pair_fraction=0.0)
    with pytest.raises(ConfigError, match="the file decides"):
        dataclasses.replace(cfg, train_pair_fraction=0.5, train_pairs_file="x.json")


def test_a_sweep_of_a_field_another_field_sets_is_an_error():
    base = load_run_config(CONFIGS / "smoke.toml", ["task.train_pair_fraction=0.5"])
    spec = SweepSpec(param="task.held_out_fraction", values=[0.1, 0.2])
    with pytest.raises(ConfigError, match="becomes 0.5 in the run config"):
        expand_members(base, spec)


def test_pair_weight_ordered_and_unordered():
    ordered = load_run_config(
        CONFIGS / "smoke.toml", ["task.held_out_form=ordered", "task.held_out_fraction=0.3"]
    )
    held = held_out_pairs(ordered.task, ordered.seed)
    assert pair_weight(ordered) == held.shape[0] / ordered.task.p**2
    unordered = load_run_config(CONFIGS / "smoke.toml", ["task.held_out_fraction=0.3"])
    held = held_out_pairs(unordered.task, unordered.seed)
    diag = int((held[:, 0] == held[:, 1]).sum())
    assert pair_weight(unordered) == (2 * held.shape[0] - diag) / unordered.task.p**2


def test_a_metric_can_name_any_evaluation_set():
    for name in ("fig3/2var_union", "fig3/0var_held_out", "curated/held_out_pairs"):
        check_metric(name)
    with pytest.raises(ConfigError, match="fig3/2var_union"):
        check_metric("fig3/nope")
    base = load_run_config(CONFIGS / "smoke.toml")
    added = with_metric_sets(base, "fig3/0var_held_out")
    assert added.task.extra_eval_sets == ("fig3/0var_held_out",)
    assert with_metric_sets(added, "fig3/0var_held_out") is added
    assert with_metric_sets(base, "0var/all") is base
    w = MetricWeights(base)
    assert metric_value("fig3/0var_held_out", {"fig3/0var_held_out": 0.25}, w) == 0.25


def synthetic_rows(seeds=(0, 1, 2), n=200):
    rows = []
    curves = {0: [0.2, 0.995, 1.0, 1.0], 1: [0.1, 0.5, 0.995, 1.0], 2: [0.0, 0.3, 0.6, 1.0]}
    for seed in seeds:
        for x, acc in zip([0.25, 0.5, 0.75, 1.0], curves[seed], strict=True):
            correct = round(acc * n)
            rows.append(
                {
                    "member": f"x{x}_s{seed}",
                    "value": x,
                    "x": x,
                    "seed": seed,
                    "final_step": 10,
                    "metric": correct / n,
                    "aux": {},
                    "final_acc": {},
                    "metric_n": n,
                    "metric_correct": correct,
                    "metric_ci": [0.0, 1.0],
                }
            )
    return rows


def test_thresholds_carry_their_spread_across_seeds_and_binomial_range(tmp_path):
    kw = dict(param="p", x_label="x", metric="fig3/2var_union", missing=[], title="t")
    results = summarize(synthetic_rows(), target=0.99, **kw)
    thr = results["threshold"]
    assert thr["per_seed"] == {"0": 0.5, "1": 0.75, "2": 1.0}
    assert (thr["seed_min"], thr["seed_max"], thr["n_seeds"]) == (0.5, 1.0, 3)
    point = results["points"][-1]
    assert point["n_sequences"] == 600 and point["correct"] == 600
    assert point["ci95"][1] == 1.0 and 0.99 < point["ci95"][0] < 1.0
    assert thr["threshold"] == 1.0 and thr["ci_range"] == [1.0, 1.0]
    assert "range 0.5 - 1" in uncertainty_sentence(results)
    one = summarize(synthetic_rows(seeds=(0,)), target=0.99, **kw)
    assert "1 seed: no spread" in uncertainty_sentence(one)
    assert one["threshold"]["ci_range"][0] == 0.5  # the upper bound at 0.5 reaches 99%
    paths = write_report(results_report(results, "fig"), tmp_path)
    json_path, md_path, fig_path = paths["results.json"], paths["summary.md"], paths["fig"]
    md = md_path.read_text()
    assert "per-seed thresholds (3 seeds)" in md and "95% CI (pooled, binomial)" in md
    assert json.loads(json_path.read_text())["threshold"]["per_seed"]["1"] == 0.75
    assert fig_path.stat().st_size > 10_000


def test_fig3_metric_sweep_end_to_end_with_intervals(tmp_path):
    overrides = [
        "task.held_out_form=ordered",
        "task.pair_split=python_random",
        "task.pair_seed=42",
        "task.eval_size=100",
        "train.steps=10",
        "train.eval_every=10",
        "train.snapshot_every=0",
    ]
    base, _ = load_sweep_config(CONFIGS / "smoke.toml", overrides)
    spec = SweepSpec(
        param="pair_fraction", values=[0.5, 0.9], seeds=[0, 1], metric="fig3/0var_held_out"
    )
    outcome = run_sweep(base, spec, tmp_path, progress=False, log=None, member_figures=False)
    res = outcome.results
    for row in res["members"]:
        held = 11 * 11 - math.floor(row["value"] * 11 * 11)
        assert row["metric_n"] == held == row["final_ci"]["fig3/0var_held_out"]["n"]
        lo, hi = row["metric_ci"]
        assert lo <= row["metric"] <= hi
        assert row["final_ci"]["0var/ind"]["n"] == 100
    assert all("ci95" in p for p in res["points"])
    assert set(res["threshold"]["per_seed"]) == {"0", "1"}
    assert "fig3/0var_held_out" in (tmp_path / "sweep.toml").read_text()
