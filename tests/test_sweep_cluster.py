"""Sweeps and grids as jobs (empirical.experiments.sweep.cluster, submitit): two local jobs in two
processes give the in-process sweep's results; claims, re-submission, SLURM parameters, and a
clear error without submitit."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from empirical.cli.sweep import main as sweep_main
from empirical.experiments.sweep.cluster import (
    claim,
    live_claim,
    make_executor,
    release,
    submit_members,
)
from empirical.experiments.sweep.grid import run_grid
from empirical.experiments.sweep.options import ExecutorOptions
from empirical.experiments.sweep.param_sweep import run_sweep
from empirical.experiments.sweep.spec import GridSpec, SweepSpec, expand_members, load_sweep_config
from empirical.runs.metrics_log import read_metrics
from empirical.runs.rundir import RunDir, SweepDir

pytest.importorskip("submitit")

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TINY = ["task.eval_size=100", "train.steps=20", "train.eval_every=10", "train.snapshot_every=0"]
WALL_CLOCK = {"elapsed_s", "batch_timings"}  # the only fields that may differ


def _drop(value, keys):
    if isinstance(value, dict):
        return {k: _drop(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_drop(v, keys) for v in value]
    return value


def without(value, keys=WALL_CLOCK) -> str:
    """value without its wall-clock fields, as JSON (so that NaN equals NaN)."""
    return json.dumps(_drop(value, keys), sort_keys=True)


def member_records(out: Path) -> dict:
    return {
        d.name: without(read_metrics(d / "metrics.jsonl"))
        for d in sorted((out / "members").iterdir())
    }


@pytest.mark.slow  # two processes importing torch (17 s); the claim and error tests stay fast
def test_two_local_jobs_equal_the_in_process_sweep(tmp_path):
    base, _ = load_sweep_config(SMOKE, TINY)
    spec = SweepSpec(param="pair_fraction", values=[1.0, 0.5], seeds=[0])
    here = run_sweep(base, spec, tmp_path / "here", progress=False, log=None)
    jobs = run_sweep(
        base,
        spec,
        tmp_path / "jobs",
        progress=False,
        log=None,
        executor=ExecutorOptions(kind="local", members_per_job=1, gpus_per_job=0, time_min=10),
    )
    sub = jobs.submission
    assert len(sub.jobs) == 2 and sub.waited and not sub.failed
    assert sorted(r["host"] for r in sub.results) == [socket.gethostname()] * 2
    assert len({r["job_id"] for r in sub.results}) == 2  # two processes
    assert without(jobs.results) == without(here.results)
    assert member_records(tmp_path / "jobs") == member_records(tmp_path / "here")
    # no claim is left behind; submitit's files are per job, under jobs/<submission>/
    assert not list((tmp_path / "jobs" / "members").glob("*/running.json"))
    assert sub.folder.parent == SweepDir(tmp_path / "jobs").jobs_dir
    # re-submitting skips the finished members and submits nothing
    again = submit_members(
        expand_members(base, spec),
        SweepDir(tmp_path / "jobs"),
        0,
        ExecutorOptions(kind="local", gpus_per_job=0),
        log=lambda _t: None,
    )
    assert again.skipped == ["pair_fraction=1.0_seed0", "pair_fraction=0.5_seed0"]
    assert not again.jobs


@pytest.mark.slow  # the grid's path through the executor (the sweep's: the test above)
def test_grid_as_one_local_job_equals_the_in_process_grid(tmp_path):
    base, _ = load_sweep_config(SMOKE, TINY)
    spec = GridSpec(variants={"plain": [], "wd": ["train.weight_decay=0.5"]}, seeds=[0])
    here = run_grid(base, spec, tmp_path / "here", progress=False, log=None)
    jobs = run_grid(
        base,
        spec,
        tmp_path / "jobs",
        progress=False,
        log=None,
        executor=ExecutorOptions(kind="local", members_per_job=2, gpus_per_job=0, time_min=10),
    )
    assert without(jobs) == without(here)
    assert member_records(tmp_path / "jobs") == member_records(tmp_path / "here")
    # --summarize rewrites the same tables from the member directories
    assert without(run_grid(base, spec, tmp_path / "jobs", log=None, train=False)) == without(here)


def test_claims_are_skipped_while_their_job_lives(tmp_path):
    base, _ = load_sweep_config(SMOKE, TINY)
    spec = SweepSpec(param="pair_fraction", values=[1.0, 0.5], seeds=[0])
    members = expand_members(base, spec)
    out = SweepDir(tmp_path)
    runs = [out.member(m.dirname) for m in members]
    infos = [claim(run, f"local-test{i}") for i, run in enumerate(runs)]  # this process: alive
    assert live_claim(runs[0]) == infos[0]
    sub = submit_members(
        members, out, 0, ExecutorOptions(kind="local", gpus_per_job=0), log=lambda _t: None
    )
    assert sub.busy == {m.dirname: f"local-test{i}" for i, m in enumerate(members)}
    assert not sub.batches and not sub.jobs  # nothing submitted
    release(runs[1], infos[1])
    assert not runs[1].running.exists()
    # a claim by a process that is gone is stale
    runs[0].running.write_text(json.dumps(dict(infos[0], pid=_dead_pid())))
    assert live_claim(runs[0]) is None
    # another host, no SLURM to ask: treated as live (skipped unless --force)
    runs[0].running.write_text(json.dumps(dict(infos[0], host="elsewhere")))
    assert live_claim(runs[0]) is not None


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_slurm_parameters(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("sbatch", "srun"):
        (fake / name).write_text("#!/bin/sh\necho 'Submitted batch job 42'\n")
        (fake / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    opts = ExecutorOptions(
        kind="slurm",
        members_per_job=20,
        partition="gpu",
        time_min=60,
        cpus_per_job=8,
        slurm_args=["account=fig3"],
    )
    text = make_executor(opts, tmp_path / "jobs", "fig3")._executor._make_submission_file_text(
        "CMD", "uid"
    )
    for line in ("--partition=gpu", "--time=60", "--gpus-per-node=1", "--cpus-per-task=8"):
        assert f"#SBATCH {line}" in text
    assert "#SBATCH --account=fig3" in text and "#SBATCH --job-name=fig3" in text


def test_executor_errors_are_one_line(tmp_path, capsys, monkeypatch):
    common = ["--config", str(SMOKE), "--param", "pair_fraction=1,0.5", "--out", str(tmp_path)]
    assert sweep_main([*common, "--members-per-job", "2", *TINY]) == 2
    assert "only with --executor" in capsys.readouterr().err
    assert sweep_main([*common, "--executor", "local", "--slurm-partition", "p", *TINY]) == 2
    assert "--executor slurm only" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    assert sweep_main([*common, "--executor", "slurm", *TINY]) == 2
    assert "sbatch and srun not found" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "submitit", None)  # not installed
    assert sweep_main([*common, "--executor", "local", *TINY]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[cluster]'" in err and err.count("\n") == 1
    assert not (tmp_path / "members").exists()  # nothing trained or written


def test_run_dir_names_the_claim_file(tmp_path):
    assert RunDir(tmp_path).running == tmp_path / "running.json"
    assert SweepDir(tmp_path).jobs_dir == tmp_path / "jobs"
