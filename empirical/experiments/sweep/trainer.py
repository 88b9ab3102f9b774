"""Train several run configs at once as one `BatchedModel`, each in its own standard run
directory, every member the run `train_run(cfg, run_dir)` would train (docs/sweep.md,
"Batching design"; the loop is empirical.train.engine's with a `BatchLearner`).

    train_batch([(cfg_a, dir_a), (cfg_b, dir_b)], progress=True)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from empirical.experiments.sweep.spec import batch_key
from empirical.runs.config import RunConfig
from empirical.runs.rundir import RunDir
from empirical.train.engine import Trainee, TrainingError, checkpoint_step, resolve_device
from empirical.train.learners import BatchLearner
from empirical.train.session import run_training


def member_stopped(run_dir: Path) -> dict | None:
    """What stopped.json says about a member that stopped on a diverged loss (else None)."""
    return RunDir(run_dir).read_stopped()


def member_step(run_dir: Path) -> int:
    """The step of a member's resumable checkpoint (0: none)."""
    return checkpoint_step(RunDir(run_dir))


def train_batch(
    members: list[tuple[RunConfig, Path]],
    progress: bool = True,
    stop_at: int | None = None,
    on_eval: Callable[[int, list[dict]], None] | None = None,
    labels: list[str] | None = None,
    metric: Callable[[int, dict], float] | None = None,
    figures: bool = True,
) -> list[dict]:
    """Train the members (same `batch_key`, same checkpoint step) together; returns each
    member's last metrics record. A member with `checkpoints/last.pt` resumes from it.

    stop_at: end after that step (as if killed after the checkpoint there). on_eval(step,
    records): called after each evaluation. labels / metric(m, acc): the progress bar's
    per-member text and value (default: the member's directory name and 0var/ind).
    figures=False: no member writes training_curves.png."""
    if not members:
        return []
    cfgs = [cfg for cfg, _ in members]
    if len({batch_key(cfg) for cfg in cfgs}) != 1:
        raise TrainingError("train_batch: members differ in architecture or [train] settings")
    runs = [RunDir(d) for _, d in members]
    stopped = [r.name for r in runs if r.read_stopped() is not None]
    if stopped:
        raise TrainingError(f"train_batch: member(s) {', '.join(stopped)} stopped earlier")
    device = resolve_device(cfgs[0].train.device)
    if cfgs[0].train.threads:
        torch.set_num_threads(cfgs[0].train.threads)
    trainees = [Trainee(cfg, run) for cfg, run in zip(cfgs, runs, strict=True)]
    return run_training(trainees, BatchLearner(cfgs, device), progress=progress, stop_at=stop_at,
                        on_eval=on_eval, labels=labels, metric=metric,
                        figures=figures).records
