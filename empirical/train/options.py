"""The command lines of `train` (TrainOptions), `evaluate` (EvaluateOptions) and `repair`
(RepairOptions), declared once (empirical.config.options), with what they check before any
work: the run config and its overrides, the flags that go together, the run directory. No
torch here: `python -m empirical` reads and checks these before the command's module is
imported.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from disentangled.errors import UsageError
from empirical.config.field_types import MUST, Flag, choice, integer
from empirical.config.io import ConfigError, apply_overrides, from_dict, to_dict
from empirical.config.options import arg, flag_of, options_class
from empirical.report.figures import FORMATS
from empirical.runs.config import (
    RECOVERY_CHANGES,
    RESUMABLE_CHANGES,
    RunConfig,
    Seed,
    config_field,
    device_name,
)
from empirical.runs.options import RunConfigOptions, Threads, threads_arg
from empirical.runs.rundir import RunDir
from empirical.train.tensorboard import require_tensorboard

DEFAULT_BATCH_SIZE = 2048  # sequences per forward pass when evaluating a run's snapshots
RUNS_ROOT = "runs"  # where `train` and `reproduce` put runs: RUNS_ROOT/NAME/seedS


def run_dir_for(cfg: RunConfig, runs_root: str | Path) -> Path:
    return Path(runs_root) / cfg.name / f"seed{cfg.seed}"


def check_config(cfg: RunConfig, stop_at: int | None) -> None:
    """Refuse, before anything is written, a config that needs a package not installed, and
    a --stop-at outside its steps."""
    if cfg.train.tensorboard:
        require_tensorboard()
    if stop_at is not None and not 1 <= stop_at <= cfg.train.steps:
        raise UsageError(f"--stop-at {stop_at}: allowed 1..train.steps = {cfg.train.steps}")


def resume_config(run_dir: str | Path, overrides: list[str]) -> RunConfig:
    """The config of the run in `run_dir` with the overrides a resume may make (the fields of
    RESUMABLE_CHANGES and RECOVERY_CHANGES); a ConfigError for any other."""
    run = RunDir(run_dir)
    if not run.config.exists():
        raise ConfigError(f"cannot resume {run_dir}: it holds no {run.CONFIG} (no run there)")
    may_change = (RESUMABLE_CHANGES | RECOVERY_CHANGES) - {"warmup_from"}  # set by the trainer
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if not (key.startswith("train.") and key[len("train.") :] in may_change):
            allowed = ", ".join(f"train.{k}" for k in sorted(may_change))
            raise ConfigError(
                f"--resume: {key!r} cannot change in an existing run; allowed: {allowed}"
            )
    return from_dict(RunConfig, apply_overrides(to_dict(run.read_config()), RunConfig, overrides))


# -- train --------------------------------------------------------------------------------------


@options_class("train", "Train the paper's 2-layer transformer on the assign-and-add task.",
               field_hint=config_field)  # fmt: skip
class TrainOptions(RunConfigOptions):
    """`python -m empirical train [--config FILE] [key=value ...] [--seeds S ...]
    [--resume RUN_DIR]`: the run config (RunConfigOptions) and the command's own flags."""

    seeds: tuple[Seed, ...] | None = arg(None, help="train one run per seed", nargs="+")
    runs_root: str = arg(RUNS_ROOT, help="runs go to RUNS_ROOT/NAME/seedS")
    run_dir: str | None = arg(None, help="exact run directory (single seed only)")
    resume: str | None = arg(None, help="continue the run in RUN_DIR", metavar="RUN_DIR")
    rebuild_eval_sets: Flag = arg(
        False, help="with --resume: build RUN_DIR/eval_sets.pt again from the run's config (when "
        "it is unreadable or belongs to another task or seed)")  # fmt: skip
    stop_at: integer() | None = arg(
        None, metavar="N", help="end this session after step N (the schedule still runs to "
        "train.steps; --resume continues): e.g. a long run looked at only around an early "
        "spike")  # fmt: skip
    progress: Flag = arg(True, help="no progress bar")
    figures: Flag = arg(True, help="numbers only: no training_curves figure")
    format: choice(*FORMATS) = arg(
        "png", help="training-curve figure format: png (always written) plus pdf or svg if asked")

    def check(self) -> None:
        """The flags that go together, then the config (the run's own with --resume, read as
        a reader: the command reads it again under the run's writer lock)."""
        if not self.figures and self.format != "png":
            raise UsageError(f"--no-figures with --format {self.format}: give one or the other")
        if self.resume is not None:
            self._check_resume_flags()
            check_config(resume_config(self.resume, list(self.overrides)), self.stop_at)
        elif self.rebuild_eval_sets:
            raise UsageError(
                "--rebuild-eval-sets goes with --resume RUN_DIR (a new run builds them)"
            )
        else:
            self.plan()

    def _check_resume_flags(self) -> None:
        """A resume keeps its run's config and directory: the flags of a new run are refused
        rather than ignored."""
        ignored = [flag_of(TrainOptions, name) for name in ("config", "seeds", "run_dir")
                   if getattr(self, name) is not None]  # fmt: skip
        ignored += ["--runs-root"] if self.runs_root != RUNS_ROOT else []
        if ignored:
            raise UsageError(
                f"--resume {self.resume}: {', '.join(ignored)} cannot apply to an existing run "
                "(it keeps its config; give dotted overrides of what a resume may change)"
            )

    def run_dir_flag(self) -> str:
        """The flag that named the run directories of a new run (errors name it)."""
        return "--run-dir" if self.run_dir else "--runs-root"

    def plan(self) -> list[tuple[RunConfig, Path]]:
        """The runs of a new training, (config, run directory) per seed, checked."""
        base = self.run_config()
        check_config(base, self.stop_at)
        seeds = list(self.seeds) if self.seeds else [base.seed]
        if self.run_dir and len(seeds) > 1:
            raise ConfigError("--run-dir takes a single seed; use --runs-root with --seeds")
        if len(set(seeds)) != len(seeds):
            raise UsageError(f"--seeds {' '.join(map(str, seeds))}: a seed is repeated")
        configs = [replace(base, seed=seed) for seed in seeds]
        return [(cfg, Path(self.run_dir) if self.run_dir else run_dir_for(cfg, self.runs_root))
                for cfg in configs]  # fmt: skip


# -- evaluate -----------------------------------------------------------------------------------


@options_class("evaluate", "Accuracy of every evaluation set of a run, at any step.")
class EvaluateOptions:
    """`python -m empirical evaluate RUN_DIR [--step N] [--all-steps]`."""

    run_dir: str = arg(help="a run directory (trained, or written by import-checkpoints)",
                       positional=True)  # fmt: skip
    step: integer(0, wording=MUST) | None = arg(
        None, help="the snapshot at this step (default: the final model)")
    format: choice("json", "table") = arg("json", help="print JSON or a table")
    all_steps: Flag = arg(
        False, help="evaluate every snapshot; write metrics.jsonl, summary.json, "
        "training_curves.png")  # fmt: skip
    force: Flag = arg(False, help="--all-steps even on a run with a training log")
    batch_size: integer(1, wording=MUST) = arg(DEFAULT_BATCH_SIZE,
                                               help="sequences per forward pass")  # fmt: skip
    device: device_name = arg("cpu", help="cpu, cuda, cuda:N or auto")
    threads: Threads = threads_arg()
    progress: Flag = arg(True, help="no progress bar")

    def check(self) -> None:
        """The run, and the snapshot asked for, exist."""
        if self.all_steps and self.step is not None:
            raise UsageError("--step and --all-steps exclude each other")
        run = RunDir(self.run_dir).require_run()
        if not self.all_steps:
            run.model_path(self.step)  # an error listing the steps there are


# -- repair -------------------------------------------------------------------------------------


@options_class("repair", "Repair a run directory's metrics log (and evaluation sets).")
class RepairOptions:
    """`python -m empirical repair RUN_DIR [--rebuild-eval-sets]`."""

    run_dir: str = arg(help="a run directory (or a sweep member's directory)", positional=True)
    rebuild_eval_sets: Flag = arg(False, help="build eval_sets.pt again from the run's config")

    def check(self) -> None:
        RunDir(self.run_dir).require_run()
