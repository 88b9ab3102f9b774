"""`python -m empirical train [--config FILE] [key=value ...] [--seeds S ...] [--resume DIR]`
(`--resume runs/authors/seed0 train.steps=60000` extends a run). The command holds the writer
lock of every run directory it trains (empirical.runs.lock) from before its first check to
its end. See docs/training.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from empirical.cli.parsing import parser
from empirical.config.command_line import UsageError, add_format_argument, main_of
from empirical.config.io import ConfigError, apply_overrides, from_dict, to_dict
from empirical.report.figures import use_cli_backend
from empirical.runs.config import (
    RECOVERY_CHANGES,
    RESUMABLE_CHANGES,
    RunConfig,
    load_run_config,
)
from empirical.runs.lock import writer_lock, writer_locks
from empirical.runs.rundir import RunDir

# the main config: the paper authors' own configuration (configs/paper.toml is our earlier
# reconstruction from the paper's text; README, "Which config")
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "authors.toml"


def build_parser() -> argparse.ArgumentParser:
    ap = parser("train", "Train the paper's 2-layer transformer on the assign-and-add task.")
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. train.steps=2000")
    ap.add_argument("--config", help=f"TOML config (default: {DEFAULT_CONFIG.name} if present)")
    ap.add_argument("--seeds", nargs="+", type=int, help="train one run per seed")
    ap.add_argument("--runs-root", default="runs", help="runs go to RUNS_ROOT/NAME/seedS")
    ap.add_argument("--run-dir", help="exact run directory (single seed only)")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    ap.add_argument(
        "--rebuild-eval-sets", action="store_true",
        help="with --resume: build RUN_DIR/eval_sets.pt again from the run's config (when it "
        "is unreadable or belongs to another task or seed)",
    )  # fmt: skip
    ap.add_argument(
        "--stop-at", type=int, metavar="N",
        help="end this session after step N (the schedule still runs to train.steps; "
        "--resume continues): e.g. a long run looked at only around an early spike",
    )  # fmt: skip
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--no-figures", action="store_true",
                    help="numbers only: no training_curves figure")  # fmt: skip
    add_format_argument(
        ap, "training-curve figure format: png (always written) plus pdf or svg if asked"
    )
    return ap


def run_dir_for(cfg: RunConfig, runs_root: str | Path) -> Path:
    return Path(runs_root) / cfg.name / f"seed{cfg.seed}"


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.no_figures and args.format != "png":
        raise UsageError(f"--no-figures with --format {args.format}: give one or the other")
    use_cli_backend()
    # the arguments and the config are checked first; the trainer (torch) is imported after
    if args.resume:
        ignored = [f for f, v in _NEW_RUN_FLAGS.items() if getattr(args, v) is not None]
        ignored += ["--runs-root"] if args.runs_root != "runs" else []
        if ignored:
            raise UsageError(
                f"--resume {args.resume}: {', '.join(ignored)} cannot apply to an existing run "
                "(it keeps its config; give dotted overrides of what a resume may change)"
            )
        run_dir = Path(args.resume)
        with writer_lock(run_dir, "--resume"):  # before anything is read or written
            cfg = _resume_config(run_dir, args.overrides)
            _check_config(cfg, args.stop_at)
            from empirical.train.loop import train_run

            result = train_run(
                cfg, run_dir, resume=True, progress=not args.no_progress, stop_at=args.stop_at,
                rebuild_eval_sets=args.rebuild_eval_sets, figures=not args.no_figures,
            )  # fmt: skip
            _report(result, cfg, args.format)
        return 0
    if args.rebuild_eval_sets:
        raise UsageError("--rebuild-eval-sets goes with --resume RUN_DIR (a new run builds them)")
    config_path = args.config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    base = load_run_config(config_path, args.overrides)
    _check_config(base, args.stop_at)
    seeds = args.seeds if args.seeds else [base.seed]
    if args.run_dir and len(seeds) > 1:
        raise ConfigError("--run-dir takes a single seed; use --runs-root with --seeds")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds {' '.join(map(str, seeds))}: a seed is repeated")
    flag = "--run-dir" if args.run_dir else "--runs-root"
    plan = []
    for seed in seeds:
        cfg = dataclasses.replace(base, seed=seed)
        plan.append((cfg, Path(args.run_dir) if args.run_dir else run_dir_for(cfg, args.runs_root)))
    from empirical.train.loop import check_train_target, train_run

    # every run directory's writer lock, then every check, before the first run trains
    with writer_locks([run_dir for _, run_dir in plan], flag):
        for cfg, run_dir in plan:
            check_train_target(cfg, run_dir, flag=flag)
        for cfg, run_dir in plan:
            print(f"training {cfg.name} seed {cfg.seed} -> {run_dir}", file=sys.stderr)
            result = train_run(cfg, run_dir, progress=not args.no_progress, stop_at=args.stop_at,
                               figures=not args.no_figures)  # fmt: skip
            _report(result, cfg, args.format)
    return 0


# flags of a new run, which a resume refuses rather than ignores (flag -> argparse name)
_NEW_RUN_FLAGS = {"--config": "config", "--seeds": "seeds", "--run-dir": "run_dir"}


main = main_of(run)


def _check_config(cfg: RunConfig, stop_at: int | None) -> None:
    """Refuse, before anything is written, a config that needs a package not installed, and
    a --stop-at outside its steps."""
    if cfg.train.tensorboard:
        from empirical.train.tensorboard import require_tensorboard

        require_tensorboard()
    if stop_at is not None and not 1 <= stop_at <= cfg.train.steps:
        raise UsageError(f"--stop-at {stop_at}: allowed 1..train.steps = {cfg.train.steps}")


def _resume_config(run_dir: Path, overrides: list[str]) -> RunConfig:
    path = RunDir(run_dir).config
    if not path.exists():
        raise ConfigError(f"cannot resume {run_dir}: it holds no {path.name} (no run there)")
    may_change = (RESUMABLE_CHANGES | RECOVERY_CHANGES) - {"warmup_from"}  # set by the trainer
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if not (key.startswith("train.") and key[len("train.") :] in may_change):
            allowed = ", ".join(f"train.{k}" for k in sorted(may_change))
            raise ConfigError(
                f"--resume: {key!r} cannot change in an existing run; allowed: {allowed}"
            )
    saved = RunDir(run_dir).read_config()
    return from_dict(RunConfig, apply_overrides(to_dict(saved), RunConfig, overrides))


def _report(result, cfg: RunConfig, fmt: str) -> None:
    from empirical.train.loop import summary_of

    if result.stopped_early:  # --stop-at: no summary yet
        print(f"{result.run_dir}: stopped after step {result.step} (--resume continues), "
              f"{result.elapsed_s:.0f} s")  # fmt: skip
        return
    summary = summary_of(result.run_dir)
    if fmt != "png":  # the trainer wrote the PNG; add the asked format
        from empirical.train.summary import write_training_curves

        print(f"wrote {write_training_curves(cfg, result.run_dir, fmt=fmt)}", file=sys.stderr)
    print(f"{result.run_dir}: step {result.step}, {result.elapsed_s:.0f} s")
    ci = summary.get("final_acc_ci95") or {}
    for name, acc in sorted(summary["final_acc"].items()):
        interval = f"  [{100 * ci[name][0]:.2f}, {100 * ci[name][1]:.2f}]" if name in ci else ""
        print(f"  {name:<26} {100 * acc:6.2f}%{interval}")
    for name, cells in (summary.get("accuracy_by_operand_variable") or {}).items():
        text = ", ".join(f"{k} {100 * c['acc']:.0f}%" for k, c in cells.items())
        print(f"  {name} by operand variable: {text}")
    ph = summary["phases"]
    print(f"  0-var >= 90% at step {ph['zero_var_learned_step']}")
    for key in ("first_spike", "second_spike"):
        s = ph[key]
        text = "none detected" if s is None else f"steps {s['start_step']}-{s['end_step']}"
        print(f"  {key.replace('_', ' ')}: {text}")


if __name__ == "__main__":
    sys.exit(main())
