"""Sweeps and grids on many machines: one job per batch of members, through submitit
(docs/sweep.md, "Many machines"; the options: `options.ExecutorOptions`, the submitit executor
they make: `make_executor`).

    python -m empirical sweep --config C --executor slurm --slurm-partition gpu
    python -m empirical sweep --config C --summarize        # when the jobs have finished

The submitter plans what `run_members` would and submits one job per batch (`train_job`,
module-level so that submitit pickles it by reference); a job writes only its members'
directories, under their writer locks, and claims them with `running.json` so that a new
submission skips members a live job may still train (unless `force`).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from disentangled.errors import UsageError
from empirical.experiments.sweep.metrics import MetricWeights, metric_value
from empirical.experiments.sweep.options import ExecutorOptions, check_slurm, require_submitit
from empirical.experiments.sweep.runner import RunOutcome, run_members
from empirical.experiments.sweep.spec import Member
from empirical.report.files import atomic_write_bytes
from empirical.runs.lock import writer_locks
from empirical.runs.rundir import RunDir, SweepDir

LOWEST_SET = "lowest set"  # the grid's progress metric: the lowest accuracy of any set


# ------------------------------------------------------------------------------ claims
def _job_id() -> str:
    for var in ("SLURM_ARRAY_JOB_ID", "SLURM_JOB_ID"):
        if os.environ.get(var):
            task = os.environ.get("SLURM_ARRAY_TASK_ID")
            array = var == "SLURM_ARRAY_JOB_ID" and task
            return f"{os.environ[var]}_{task}" if array else os.environ[var]
    return f"local-{os.getpid()}"


def claim(run: RunDir, job_id: str) -> dict:
    """Write the member's running.json for this job (atomically); returns what it holds."""
    info = {
        "job_id": job_id,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(run.running, json.dumps(info, indent=2).encode())
    return info


def release(run: RunDir, info: dict) -> None:
    """Remove the member's running.json if it is still this job's claim."""
    current = read_claim(run)
    same_pid = current is not None and current.get("pid") == info["pid"]
    if same_pid and current.get("host") == info["host"]:
        run.running.unlink(missing_ok=True)


def read_claim(run: RunDir) -> dict | None:
    if not run.running.exists():
        return None
    try:
        return json.loads(run.running.read_text())
    except (OSError, ValueError):
        return {"job_id": "?", "unreadable": True}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _slurm_job_running(job_id: str) -> bool | None:
    """Whether SLURM still lists the job (None: cannot tell, no squeue)."""
    if not shutil.which("squeue"):
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:  # an unknown (long finished) job id is an error for squeue
        return False
    return bool(out.stdout.strip())


def live_claim(run: RunDir) -> dict | None:
    """The member's claim if its job may still be running (None: no claim, or a stale one)."""
    info = read_claim(run)
    if info is None:
        return None
    if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int):
        return info if _pid_alive(info["pid"]) else None
    if info.get("slurm_job_id"):
        running = _slurm_job_running(info["slurm_job_id"])
        if running is False:
            return None
    return info


# ------------------------------------------------------------------------------ the job
def _job_metric(name: str | None) -> Callable[[Member, dict], float] | None:
    if name is None:
        return None
    if name == LOWEST_SET:
        return lambda _m, acc: min(acc.values())
    weights: dict[str, MetricWeights] = {}

    def value(m: Member, acc: dict) -> float:
        if m.dirname not in weights:
            weights[m.dirname] = MetricWeights(m.cfg)
        return metric_value(name, acc, weights[m.dirname])

    return value


def train_job(
    sweep_dir: str, members: list[Member], metric: str | None = None, figures: bool = True
) -> dict:
    """What one job runs: train these members (one batch of the plan) in their directories
    under sweep_dir, nothing else (figures=False: no training_curves.png); returns what it
    did. It holds each member's writer lock, taken before it writes anything; a member another
    process writes is left to it (`busy`)."""
    out = SweepDir(sweep_dir)
    job_id = _job_id()
    with writer_locks([out.member(m.dirname) for m in members], skip_busy=True) as elsewhere:
        busy = [m.dirname for m in members if out.member(m.dirname).path in elsewhere]
        for name in busy:
            print(f"{name}: not trained by this job: {elsewhere[out.member(name).path]}")
        mine = [m for m in members if m.dirname not in busy]
        claims = [(out.member(m.dirname), claim(out.member(m.dirname), job_id)) for m in mine]
        try:
            ran = run_members(mine, out, max_batch=len(mine), progress=False,
                              log=lambda text: print(text, flush=True),
                              metric=_job_metric(metric), metric_name=metric or "",
                              figures=figures)  # fmt: skip
        finally:
            for run, info in claims:
                release(run, info)
    return {
        "job_id": job_id, "host": socket.gethostname(), "members": [m.dirname for m in members],
        "busy": busy, "skipped": ran.skipped, "resumed": ran.resumed, "fresh": ran.fresh,
        "stopped": ran.stopped, "timings": ran.timings, "stopped_early": ran.stopped_early,
    }  # fmt: skip


# ------------------------------------------------------------------------------ submitting
def make_executor(opts: ExecutorOptions, folder: Path, name: str = "sweep"):
    """A configured submitit executor writing its files under `folder`."""
    submitit = require_submitit()
    if opts.kind == "local":
        executor = submitit.LocalExecutor(folder=folder)
        gpus = opts.gpus_per_job
        if gpus is None:  # every GPU of this machine
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        # every local job sees GPUs 0..gpus-1 (they share them); 0 hides the GPUs
        executor.update_parameters(timeout_min=opts.time_min, gpus_per_node=gpus)
        return executor
    check_slurm()
    try:
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    except RuntimeError as exc:  # submitit: no srun
        raise UsageError(f"--executor slurm: {exc}") from None
    params: dict[str, Any] = {
        "name": name, "timeout_min": opts.time_min, "nodes": 1, "tasks_per_node": 1,
        "cpus_per_task": opts.cpus_per_job,
        "gpus_per_node": 1 if opts.gpus_per_job is None else opts.gpus_per_job,
    }  # fmt: skip
    if opts.partition:
        params["slurm_partition"] = opts.partition
    if opts.mem_gb:
        params["mem_gb"] = opts.mem_gb
    if opts.slurm_args:
        params["slurm_additional_parameters"] = dict(a.split("=", 1) for a in opts.slurm_args)
    executor.update_parameters(**params)
    return executor


@dataclass
class Submission(RunOutcome):
    """What `submit_members` did: the plan (resumed, fresh: submitted; batches: one per job),
    the jobs and, once waited for, their results."""

    busy: dict[str, str] = field(default_factory=dict)  # claimed by a live job: its id
    jobs: list[str] = field(default_factory=list)  # job ids
    folder: Path | None = None  # submitit's files for this submission
    waited: bool = False
    results: list[dict] = field(default_factory=list)  # train_job's return, per finished job
    failed: dict[str, str] = field(default_factory=dict)  # job id -> error (and its log)


def submit_members(
    members: list[Member], out: SweepDir, max_batch: int, opts: ExecutorOptions, *,
    log: Callable[[str], None] = print, metric: str | None = None, name: str = "sweep",
    figures: bool = True,
) -> Submission:  # fmt: skip
    """Plan the members' batches (at most opts.members_per_job, and max_batch, members
    each), submit one job per batch, and wait for them when opts.waits. figures=False: the
    jobs' members draw no training_curves.png."""
    require_submitit()
    per_job = min((n for n in (opts.members_per_job, max_batch) if n), default=0)
    busy = {} if opts.force else claimed_elsewhere(members, out)
    for dirname, job in busy.items():
        log(f"{dirname}: claimed by job {job}, which may still run "
            f"({out.member(dirname).running}): not submitted; --force submits it anyway")
    todo = [m for m in members if m.dirname not in busy]
    plan = run_members(todo, out, per_job, train=False, log=log)
    sub = Submission(plan.skipped, plan.stopped, plan.resumed, plan.fresh, plan.batches, busy=busy)
    if not plan.batches:
        log("nothing to submit: every member is finished, stopped or claimed")
        sub.waited = opts.waits
        return sub
    by_name = {m.dirname: m for m in todo}
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    sub.folder = out.jobs_dir / f"{stamp}-{os.getpid()}"
    executor = make_executor(opts, sub.folder, name)
    target = str(out.path.resolve())
    with executor.batch():
        jobs = [executor.submit(train_job, target, [by_name[n] for n in batch], metric, figures)
                for batch in plan.batches]
    sub.jobs = [str(j.job_id) for j in jobs]
    for job, batch in zip(jobs, plan.batches, strict=True):
        log(f"job {job.job_id}: {len(batch)} members: {', '.join(batch)}")
    log(f"submitted {len(jobs)} {opts.kind} job(s); their logs: {sub.folder}")
    if opts.waits:
        _wait_for(jobs, sub, log)
    return sub


def failed_jobs(failed: dict[str, str]) -> int:
    """A command's ending when jobs failed: one `error:` line naming them (job id -> error;
    their members stay resumable); the exit status 1."""
    print(f"error: {len(failed)} job(s) failed: {'; '.join(failed.values())}", file=sys.stderr)
    return 1


def claimed_elsewhere(members: list[Member], out: SweepDir) -> dict[str, str]:
    """{member: job id} of the members claimed by a job that may still be running."""
    claims = {m.dirname: live_claim(out.member(m.dirname)) for m in members}
    return {name: str(info.get("job_id")) for name, info in claims.items() if info is not None}


def _wait_for(jobs: list, sub: Submission, log: Callable[[str], None]) -> None:
    """Each job's result (train_job's return) or its failure into `sub`; then `waited`."""
    for job in jobs:
        try:
            result = job.result()
        except Exception as exc:  # a failed job: its members stay resumable
            paths = getattr(job, "paths", None)
            where = f" (log: {paths.stderr})" if paths is not None else ""
            sub.failed[str(job.job_id)] = f"{type(exc).__name__}: {exc}".splitlines()[0] + where
            log(f"job {job.job_id} failed{where}")
            continue
        sub.results.append(result)
        sub.timings += result["timings"]
        for name in result.get("busy", []):
            log(f"job {job.job_id}: {name} was being written by another process: not trained")
    sub.waited = True
