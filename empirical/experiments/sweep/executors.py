"""How a sweep's or a grid's batches run as jobs: the options (`ExecutorOptions`, checked
when made) and the submitit executor they make, on this machine (`local`) or on SLURM
(empirical.experiments.sweep.cluster submits the jobs; docs/sweep.md, "Many machines")."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disentangled.errors import UsageError

EXECUTORS = ("local", "slurm")


@dataclass
class ExecutorOptions:
    """How to run a sweep's or a grid's batches as jobs (see the module docstring)."""

    kind: str  # "local" or "slurm"
    members_per_job: int = 0  # at most this many members per job (0: the sweep's max_batch)
    partition: str = ""  # SLURM partition (empty: the cluster's default)
    time_min: int = 240  # wall-clock limit per job, minutes
    gpus_per_job: int | None = None  # None: 1 on SLURM; local: every GPU of this machine
    cpus_per_job: int = 2
    mem_gb: float | None = None  # None: the partition's default
    slurm_args: list[str] = field(default_factory=list)  # extra sbatch KEY=VALUE parameters
    wait: bool = False  # SLURM: wait for the jobs and summarize (the local executor always does)
    force: bool = False  # also submit members claimed by a job that may still run

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise UsageError(f"--executor {self.kind!r}: use one of {', '.join(EXECUTORS)}")
        for name, flag, low in (
            ("members_per_job", "--members-per-job", 0),
            ("time_min", "--job-time", 1),
            ("cpus_per_job", "--cpus-per-job", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"{flag} {value!r}: must be an integer >= {low}")
        if self.gpus_per_job is not None and self.gpus_per_job < 0:
            raise UsageError(f"--gpus-per-job {self.gpus_per_job}: must be >= 0")
        for arg in self.slurm_args:
            if "=" not in arg:
                raise UsageError(f"--slurm-arg {arg!r}: write KEY=VALUE (e.g. account=myproject)")
        if self.kind == "local" and (self.partition or self.slurm_args):
            raise UsageError("--slurm-partition / --slurm-arg apply to --executor slurm only")

    @property
    def waits(self) -> bool:
        return self.kind == "local" or self.wait


def require_submitit():
    """The submitit module, or a UsageError saying how to install it."""
    try:
        import submitit
    except ImportError:
        raise UsageError("--executor needs submitit, an optional dependency: pip install -e "
                         "'.[cluster]' (or pip install submitit)") from None
    return submitit


def check_slurm() -> None:
    """A UsageError unless SLURM's commands are on this machine's PATH."""
    missing = [c for c in ("sbatch", "srun") if not shutil.which(c)]
    if missing:
        raise UsageError(f"--executor slurm: {' and '.join(missing)} not found: submit from a "
                         "SLURM login node (or use --executor local on this machine)")


def _local_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def make_executor(opts: ExecutorOptions, folder: Path, name: str = "sweep"):
    """A configured submitit executor writing its files under `folder`."""
    submitit = require_submitit()
    if opts.kind == "local":
        executor = submitit.LocalExecutor(folder=folder)
        gpus = _local_gpus() if opts.gpus_per_job is None else opts.gpus_per_job
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
