"""Train one run: AdamW on on-the-fly batches, periodic evaluation, atomic checkpoints.

    result = train_run(cfg, run_dir)                 # fresh run (refuses a directory in use)
    result = train_run(cfg, run_dir, resume=True)    # continue from checkpoints/last.pt

The shared skeleton (empirical.train.session) with a `SingleLearner`. A resume may change
RESUMABLE_CHANGES and, to recover from a divergence, RECOVERY_CHANGES; every start and resume
is recorded in config_history.jsonl with what it changed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from disentangled.command_line import UsageError, check_output_dir, check_writable_dir
from empirical.config.io import ConfigError, config_to_toml, dotted, to_dict
from empirical.runs.config import (
    RECOVERY_CHANGES,
    RESUMABLE_CHANGES,
    RunConfig,
    TrainConfig,
    load_run_config,
)
from empirical.runs.lock import writer_lock
from empirical.runs.rundir import RunDir
from empirical.train.engine import (
    Trainee,
    TrainingError,
    checkpoint_step,
    preflight,
    record_history,
    resolve_device,
)
from empirical.train.evaluate import evaluate_and_log
from empirical.train.learners import SingleLearner
from empirical.train.session import run_training

__all__ = [
    "check_run_dir_writable", "check_train_target", "RECOVERY_CHANGES", "RESUMABLE_CHANGES",
    "TrainResult", "TrainingError", "config_changes", "evaluate_and_log", "resolve_device",
    "resume_view", "steps_change_refusal", "summary_of", "train_run",
]  # fmt: skip


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    final_acc: dict[str, float]
    elapsed_s: float
    stopped_early: bool = False


def resume_view(cfg: RunConfig, also: set[str] = frozenset()) -> str:
    """The config as TOML without the fields a resume may change (RESUMABLE_CHANGES and
    `also`): two configs with equal views may continue one another's run."""
    skip = RESUMABLE_CHANGES | set(also)
    keep = {k: v for k, v in vars(cfg.train).items() if k not in skip}
    return config_to_toml(replace(cfg, train=replace(TrainConfig(), **keep)))


def steps_change_refusal(existing: RunConfig, cfg: RunConfig) -> str | None:
    """Why `cfg` may not continue a run started as `existing` although their resume views
    agree (None: it may): a decaying lr schedule is fixed by train.steps."""
    if cfg.train.lr_schedule != "constant" and existing.train.steps != cfg.train.steps:
        return (
            f"it was started with train.steps = {existing.train.steps} and train.lr_schedule = "
            f"'{cfg.train.lr_schedule}', whose decay is fixed by train.steps; it cannot "
            f"continue to train.steps = {cfg.train.steps}"
        )
    return None


def config_changes(old: RunConfig, new: RunConfig) -> dict[str, list]:
    """{"train.lr": [old, new], ...}: every dotted field whose value differs."""
    a, b = dotted(to_dict(old)), dotted(to_dict(new))
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def check_run_dir_writable(run_dir: str | Path | RunDir, flag: str = "--run-dir") -> None:
    """The run directory, its checkpoints/ and snapshots/ and its logs can be written (a
    UsageError naming `flag` and the path otherwise)."""
    run = RunDir(run_dir)
    check_output_dir(run.path, flag)
    for sub in (run.checkpoints_dir, run.snapshots_dir):
        if sub.exists() and not sub.is_dir():
            raise UsageError(f"{flag} {run}: {sub} is not a directory; move it away")
        if sub.is_dir():
            check_writable_dir(sub, f"{flag} {run}:")
    for path in (run.metrics, run.config_history):
        if path.exists() and not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {run}: {path} is read-only; make it writable (chmod u+w)")


def check_train_target(
    cfg: RunConfig, run_dir: str | Path | RunDir, resume: bool = False, flag: str | None = None
) -> RunConfig | None:
    """Every refusal `train_run(cfg, run_dir, resume)` makes before computing anything (the
    directory is writable, `flag` naming it, and may take this config). Returns the run's
    saved config (None: a new run)."""
    run = RunDir(run_dir)
    check_run_dir_writable(run, flag or ("--resume" if resume else "run directory"))
    return _check_run_dir(cfg, run, resume)


def _check_run_dir(cfg: RunConfig, run: RunDir, resume: bool) -> RunConfig | None:
    """Refuse to mix two configs in one directory, to restart over an existing run, or to
    resume to fewer steps than done. Returns the run's saved config (None: a new run)."""
    if not run.config.exists():
        if resume:
            raise TrainingError(f"cannot resume {run}: it holds no {RunDir.CONFIG} (no run there)")
        return None
    if run.imported.exists():
        raise TrainingError(
            f"{run} holds a run imported from checkpoints ({run.imported}), which cannot be "
            "trained on (it has no optimiser state); train into another run directory"
        )
    try:
        existing = load_run_config(run.config)
    except ConfigError as exc:
        raise TrainingError(f"{run.config} is not a readable run config: {exc}") from exc
    also = RECOVERY_CHANGES if resume else set()
    comparable = (resume_view(existing, also), resume_view(cfg, also))
    if not resume:
        comparable = (config_to_toml(existing), config_to_toml(cfg))
    if comparable[0] != comparable[1]:
        allowed = sorted(RESUMABLE_CHANGES | RECOVERY_CHANGES)
        raise TrainingError(
            f"{run} already holds a run with a different config ({run.config}); "
            "choose another run directory (--run-dir), or resume it with --resume "
            f"(which may change only train.{{{', '.join(allowed)}}})"
        )
    if resume:
        refusal = steps_change_refusal(existing, cfg)
        if refusal:
            raise TrainingError(f"cannot resume {run}: {refusal}")
        done = checkpoint_step(run)
        if done > cfg.train.steps:
            raise TrainingError(
                f"cannot resume {run} to train.steps = {cfg.train.steps}: its checkpoint is "
                f"at step {done} already (give train.steps >= {done})"
            )
    elif run.last_checkpoint.exists():
        raise TrainingError(
            f"{run} already holds a run of this config; continue it with --resume {run} "
            "or choose another run directory"
        )
    return existing


def train_run(
    cfg: RunConfig, run_dir: str | Path | RunDir, resume: bool = False, progress: bool = True,
    stop_at: int | None = None, rebuild_eval_sets: bool = False,
    on_eval: Callable[[int, list[dict]], None] | None = None, figures: bool = True,
) -> TrainResult:  # fmt: skip
    """Train `cfg` in `run_dir`, every check before any write, under the directory's writer
    lock (empirical.runs.lock; re-entrant). `stop_at` ends the session after that step (as if
    killed right after it); a later `resume=True` continues, and a resume that changes
    train.warmup_steps starts that warm-up at the resume step. `on_eval(step, records)`: after
    each evaluation. `rebuild_eval_sets`: build eval_sets.pt again instead of refusing one
    that is unreadable or another task's or seed's. `figures=False`: no training_curves.png."""
    run = RunDir(run_dir)
    with writer_lock(run):
        return _train_locked(cfg, run, resume, progress, stop_at, rebuild_eval_sets, on_eval,
                             figures)  # fmt: skip


def _train_locked(
    cfg: RunConfig, run: RunDir, resume: bool, progress: bool, stop_at: int | None,
    rebuild_eval_sets: bool, on_eval: Callable[[int, list[dict]], None] | None = None,
    figures: bool = True,
) -> TrainResult:  # fmt: skip
    existing = check_train_target(cfg, run, resume)
    start = checkpoint_step(run) if resume else 0
    if existing is not None and resume:
        if cfg.train.warmup_steps != existing.train.warmup_steps and start > 0:
            cfg = replace(cfg, train=replace(cfg.train, warmup_from=start))
    preflight(Trainee(cfg, run), start, rebuild_eval_sets)
    device = resolve_device(cfg.train.device)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    run.path.mkdir(parents=True, exist_ok=True)
    changes = config_changes(existing, cfg) if existing is not None else {}
    record_history(run, "resume" if resume else "start", start, changes)
    if resume and run.stopped.exists():  # a recovery: the run trains again from last.pt
        run.stopped.unlink()
    session = run_training(
        [Trainee(cfg, run)], SingleLearner(cfg, device), progress=progress, stop_at=stop_at,
        on_eval=on_eval, rebuild_eval_sets=rebuild_eval_sets, figures=figures,
    )  # fmt: skip
    record = session.records[0] or run.read_metrics()[-1]
    return TrainResult(
        run.path, session.step, record["acc"], session.elapsed[0], not session.finished
    )


def summary_of(run_dir: str | Path) -> dict:
    return json.loads(RunDir(run_dir).summary.read_text())
