"""`python -m empirical train [--config FILE] [key=value ...] [--seeds S ...] [--resume DIR]`
(`--resume runs/authors/seed0 train.steps=60000` extends a run). Its options:
empirical.train.options.TrainOptions, checked (the config read) before this module is
imported. The command holds the writer lock of every run directory it trains (empirical.runs.lock)
from before it reads the run directory to its end; a resumed run's config is read again under
it. See docs/training.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.runs.config import RunConfig
from empirical.runs.lock import writer_lock, writer_locks
from empirical.train.loop import TrainResult, check_train_target, summary_of, train_run
from empirical.train.options import TrainOptions, check_config, resume_config
from empirical.train.summary import write_training_curves


def run(opts: TrainOptions) -> int:
    use_cli_backend()
    if opts.resume is not None:
        run_dir = Path(opts.resume)
        with writer_lock(run_dir, "--resume"):  # before the run directory is read again
            cfg = resume_config(run_dir, list(opts.overrides))
            check_config(cfg, opts.stop_at)
            result = train_run(
                cfg, run_dir, resume=True, progress=opts.progress, stop_at=opts.stop_at,
                rebuild_eval_sets=opts.rebuild_eval_sets, figures=opts.figures,
            )  # fmt: skip
            _report(result, cfg, opts.format)
        return 0
    plan, flag = opts.plan(), opts.run_dir_flag()
    # every run directory's writer lock, then every check, before the first run trains
    with writer_locks([run_dir for _, run_dir in plan], flag):
        for cfg, run_dir in plan:
            check_train_target(cfg, run_dir, flag=flag)
        for cfg, run_dir in plan:
            print(f"training {cfg.name} seed {cfg.seed} -> {run_dir}", file=sys.stderr)
            result = train_run(cfg, run_dir, progress=opts.progress, stop_at=opts.stop_at,
                               figures=opts.figures)  # fmt: skip
            _report(result, cfg, opts.format)
    return 0


main = command_main(TrainOptions, run)


def _report(result: TrainResult, cfg: RunConfig, fmt: str) -> None:
    if result.stopped_early:  # --stop-at: no summary yet
        print(f"{result.run_dir}: stopped after step {result.step} "
              f"({resume_point(result.step, cfg.train.checkpoint_every)}), "
              f"{result.elapsed_s:.0f} s")  # fmt: skip
        return
    summary = summary_of(result.run_dir)
    if fmt != "png":  # the trainer wrote the PNG; add the asked format
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


def resume_point(step: int, checkpoint_every: int) -> str:
    """Where --resume picks a run stopped after `step` up: the step itself when a checkpoint
    was written there, else the last checkpoint before it (the steps between are trained
    again, to the same weights). checkpoint_every >= 1 (the config's own check)."""
    last = step - step % checkpoint_every
    if last == step:
        return "--resume continues from it"
    where = f"step {last}" if last else "the start"
    return (f"no checkpoint there: --resume continues from {where}; a --stop-at that "
            f"train.checkpoint_every = {checkpoint_every} divides stops at a checkpoint")


if __name__ == "__main__":
    sys.exit(main())
