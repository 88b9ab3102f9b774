"""`sweep --summarize --at-step N`: the sweep's curve and thresholds at an earlier evaluation,
members still training (or stopped by a wall-clock guard) included, beside the final summary;
member directories copied without their evaluation sets keep their intervals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from empirical.cli.sweep import main as sweep_main
from empirical.cli.sweep import run as sweep_cli
from empirical.config.options import parse_options
from empirical.experiments.sweep.options import SweepOptions
from empirical.experiments.sweep.param_sweep import run_sweep
from empirical.experiments.sweep.spec import SweepSpec, load_sweep_config
from empirical.runs.metrics_log import read_metrics
from empirical.runs.rundir import SweepDir

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TINY = ["task.eval_size=200", "train.steps=40", "train.snapshot_every=0", "train.eval_every=20"]
PARAM = "pair_fraction=1.0,0.5"


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def trained(tmp_path_factory) -> Path:
    """A two-value sweep, seed 0 finished (40 steps), seed 1 stopped after step 20."""
    out = tmp_path_factory.mktemp("sweep")
    base, _ = load_sweep_config(SMOKE, TINY)
    spec = SweepSpec(param="pair_fraction", values=[1.0, 0.5], seeds=[0])
    run_sweep(base, spec, out, progress=False, log=None, member_figures=False)
    spec1 = SweepSpec(param="pair_fraction", values=[1.0, 0.5], seeds=[1])
    run_sweep(base, spec1, out, progress=False, log=None, stop_at=20, member_figures=False)
    return out


def summarize_at(out: Path, step: int, *extra: str) -> int:
    argv = ["--config", str(SMOKE), "--param", PARAM, "--out", str(out), "--summarize"]
    words = [*argv, "--seeds", "0", "1", "--at-step", str(step), *extra, *TINY]
    return sweep_cli(parse_options(SweepOptions, words))  # an error raises (no exit status)


def test_at_step_summarizes_every_member_that_reached_the_step(trained, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(trained, out)
    final_before = (out / "results.json").read_text()
    assert summarize_at(out, 20) == 0
    sweep = SweepDir(out)
    results = json.loads(sweep.results_json_at(20).read_text())
    assert results["at_step"] == 20
    members = {r["member"]: r for r in results["members"]}
    assert set(members) == {f"pair_fraction={v}_seed{s}" for v in ("1.0", "0.5") for s in (0, 1)}
    for name, row in members.items():  # each value is that member's own evaluation at step 20
        record = next(r for r in read_metrics(out / "members" / name / "metrics.jsonl")
                      if r["step"] == 20)  # fmt: skip
        assert row["final_step"] == 20 and row["final_acc"] == record["acc"]
    assert results["threshold"]["n_seeds"] == 2
    assert (out / "results.json").read_text() == final_before  # the final summary is kept
    assert sweep.summary_md_at(20).read_text().count("evaluation at step 20") == 1
    assert (out / "smoke_step_000020.png").exists()
    # at step 40 only the finished seed-0 members have an evaluation
    assert summarize_at(out, 40) == 0
    at40 = json.loads(sweep.results_json_at(40).read_text())
    assert {r["seed"] for r in at40["members"]} == {0}
    assert sorted(at40["missing_members"]) == ["pair_fraction=0.5_seed1", "pair_fraction=1.0_seed1"]


def test_members_copied_without_evaluation_sets_keep_their_intervals(trained, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(trained, out)
    for sets in out.glob("members/*_seed0/eval_sets.pt"):
        sets.unlink()  # what a GPU call brings back: small files only
    assert summarize_at(out, 40) == 0
    at40 = json.loads(SweepDir(out).results_json_at(40).read_text())
    assert all(r["final_ci"] for r in at40["members"])  # sizes from summary.json


def test_at_step_needs_summarize_and_a_step_of_the_run(trained, capsys):
    argv = ["--config", str(SMOKE), "--param", PARAM, "--out", str(trained)]
    assert sweep_main([*argv, "--at-step", "20", *TINY]) == 2
    assert "--at-step 20 summarizes an earlier evaluation: use it with --summarize" in (
        capsys.readouterr().err
    )
    assert sweep_main([*argv, "--summarize", "--at-step", "41", *TINY]) == 2
    assert "--at-step 41: allowed 0..train.steps = 40" in capsys.readouterr().err
