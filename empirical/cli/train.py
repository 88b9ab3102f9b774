"""`python -m empirical train [--config FILE] [key=value ...] [--seeds S ...] [--resume DIR]`.

Examples:
    python -m empirical train                                  # configs/paper.toml, seed 0
    python -m empirical train train.steps=2000 seed=1
    python -m empirical train --config configs/smoke.toml --seeds 0 1 2
    python -m empirical train --resume runs/paper/seed0        # continue a run
    python -m empirical train --resume runs/paper/seed0 train.steps=40000   # extend it
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from empirical.config_io import ConfigError, apply_overrides, from_dict, to_dict
from empirical.run_config import RunConfig, load_run_config

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "paper.toml"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m empirical train",
        description="Train the paper's 2-layer transformer on the assign-and-add task.",
    )
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. train.steps=2000")
    ap.add_argument("--config", help=f"TOML config (default: {DEFAULT_CONFIG.name} if present)")
    ap.add_argument("--seeds", nargs="+", type=int, help="train one run per seed")
    ap.add_argument("--runs-root", default="runs", help="runs go to RUNS_ROOT/NAME/seedS")
    ap.add_argument("--run-dir", help="exact run directory (single seed only)")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def run_dir_for(cfg: RunConfig, runs_root: str | Path) -> Path:
    return Path(runs_root) / cfg.name / f"seed{cfg.seed}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from empirical.model import CheckpointError
    from empirical.train.loop import TrainingError, train_run

    try:
        if args.resume:
            run_dir = Path(args.resume)
            cfg = _resume_config(run_dir, args.overrides)
            result = train_run(cfg, run_dir, resume=True, progress=not args.no_progress)
            _report(result)
            return 0
        config_path = args.config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
        base = load_run_config(config_path, args.overrides)
        seeds = args.seeds if args.seeds else [base.seed]
        if args.run_dir and len(seeds) > 1:
            raise ConfigError("--run-dir takes a single seed; use --runs-root with --seeds")
        for seed in seeds:
            cfg = dataclasses.replace(base, seed=seed)
            run_dir = Path(args.run_dir) if args.run_dir else run_dir_for(cfg, args.runs_root)
            print(f"training {cfg.name} seed {seed} -> {run_dir}", file=sys.stderr)
            _report(train_run(cfg, run_dir, progress=not args.no_progress))
        return 0
    except (ConfigError, TrainingError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _resume_config(run_dir: Path, overrides: list[str]) -> RunConfig:
    path = run_dir / "config.toml"
    if not path.exists():
        raise ConfigError(f"cannot resume {run_dir}: it holds no config.toml (no run there)")
    from empirical.train.loop import RESUMABLE_CHANGES

    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if not (key.startswith("train.") and key[len("train.") :] in RESUMABLE_CHANGES):
            allowed = ", ".join(f"train.{k}" for k in sorted(RESUMABLE_CHANGES))
            raise ConfigError(
                f"--resume: {key!r} cannot change in an existing run; allowed: {allowed}"
            )
    saved = load_run_config(path)
    return from_dict(RunConfig, apply_overrides(to_dict(saved), RunConfig, overrides))


def _report(result) -> None:
    from empirical.train.loop import summary_of

    summary = summary_of(result.run_dir)
    print(f"{result.run_dir}: step {result.step}, {result.elapsed_s:.0f} s")
    for name, acc in sorted(summary["final_acc"].items()):
        print(f"  {name:<26} {100 * acc:6.2f}%")
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
