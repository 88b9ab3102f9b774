"""The options `sweep` and `grid` share to run their batches as jobs on many machines
(empirical.experiments.sweep.executors and .cluster, through submitit; docs/sweep.md, "Many
machines")."""

from __future__ import annotations

import argparse
import sys

from empirical.config.command_line import UsageError
from empirical.experiments.sweep.executors import ExecutorOptions, check_slurm, require_submitit


def add_executor_arguments(ap: argparse.ArgumentParser) -> None:
    group = ap.add_argument_group(
        "many machines (submitit: pip install -e '.[cluster]'; docs/sweep.md)"
    )
    group.add_argument(
        "--executor", choices=("slurm", "local"),
        help="train each batch of members as a job: on SLURM, or as processes on this machine "
        "(which waits for them); the summary is gathered afterwards",
    )  # fmt: skip
    group.add_argument(
        "--members-per-job", type=int, metavar="N",
        help="at most N members per job (default: --max-batch, else a whole batch)",
    )  # fmt: skip
    group.add_argument("--slurm-partition", metavar="P", help="SLURM partition")
    group.add_argument("--job-time", type=int, default=240, metavar="MIN",
                       help="time limit per job (240)")  # fmt: skip
    group.add_argument(
        "--gpus-per-job", type=int, metavar="G",
        help="GPUs per job (SLURM default 1; local: every GPU of the machine, shared)",
    )  # fmt: skip
    group.add_argument("--cpus-per-job", type=int, default=2, metavar="C", help="CPUs (2)")
    group.add_argument("--mem-gb", type=float, metavar="GB", help="memory per job (SLURM)")
    group.add_argument(
        "--slurm-arg", action="append", default=[], metavar="KEY=VALUE",
        help="extra sbatch parameter, e.g. account=myproject or qos=short (repeatable)",
    )  # fmt: skip
    group.add_argument("--wait", action="store_true",
                       help="SLURM: wait for the jobs, then summarize")  # fmt: skip
    group.add_argument(
        "--force", action="store_true",
        help="also submit members claimed by a job that may still be running",
    )  # fmt: skip


def failed_jobs(failed: dict[str, str]) -> int:
    """One `error:` line naming the failed jobs (job id -> error); the exit status 1."""
    print(f"error: {len(failed)} job(s) failed: {'; '.join(failed.values())}", file=sys.stderr)
    return 1


def executor_options(args: argparse.Namespace):
    """The ExecutorOptions the arguments ask for (None: train in this process). Checked
    before anything is trained or submitted; needs submitit only when --executor is given."""
    if args.executor is None:
        flags = ("--members-per-job", "--slurm-partition", "--gpus-per-job", "--mem-gb",
                 "--slurm-arg", "--wait", "--force")  # fmt: skip
        given = [flag for flag in flags if getattr(args, flag[2:].replace("-", "_"))]
        if given:
            raise UsageError(f"{', '.join(given)}: only with --executor slurm or local")
        return None
    if getattr(args, "summarize", False):
        raise UsageError("--summarize trains nothing: give it without --executor")
    opts = ExecutorOptions(
        kind=args.executor, members_per_job=args.members_per_job or 0,
        partition=args.slurm_partition or "", time_min=args.job_time,
        gpus_per_job=args.gpus_per_job, cpus_per_job=args.cpus_per_job, mem_gb=args.mem_gb,
        slurm_args=list(args.slurm_arg), wait=args.wait, force=args.force,
    )  # fmt: skip
    if args.members_per_job is not None and args.members_per_job < 1:
        raise UsageError(f"--members-per-job {args.members_per_job}: must be >= 1")
    require_submitit()
    if opts.kind == "slurm":
        check_slurm()
    return opts
