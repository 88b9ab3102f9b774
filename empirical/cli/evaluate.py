"""`python -m empirical evaluate RUN_DIR [--step N] [--format json|table] [--all-steps]`.

Prints the accuracy of every evaluation set of the run (eval_sets.pt), as JSON {"step": N,
"accuracy": {...}, "loss": {...}, "n": {...}} or a table. --all-steps evaluates every snapshot
and writes the run's metrics log, summary and Figure 2 (a run with its own training log only
with --force). See docs/import.md.
"""

from __future__ import annotations

import argparse
import json
import sys

from empirical.cli.parsing import parser
from empirical.config.command_line import UsageError, main_of, say, set_threads


def build_parser() -> argparse.ArgumentParser:
    ap = parser("evaluate", "Accuracy of every evaluation set of a run, at any step.")
    ap.add_argument("run_dir", help="a run directory (trained, or written by import-checkpoints)")
    ap.add_argument("--step", type=int, help="the snapshot at this step (default: final model)")
    ap.add_argument("--format", choices=("json", "table"), default="json", help="default json")
    ap.add_argument(
        "--all-steps", action="store_true",
        help="evaluate every snapshot; write metrics.jsonl, summary.json, training_curves.png",
    )  # fmt: skip
    ap.add_argument("--force", action="store_true",
                    help="--all-steps even on a run with a training log")  # fmt: skip
    ap.add_argument("--batch-size", type=int, help="sequences per forward pass (default 2048)")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: fastest here)")  # fmt: skip
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from empirical.runs.rundir import RunDir

    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size {args.batch_size}: must be an integer >= 1")
    if args.threads < 0:
        raise UsageError(f"--threads {args.threads}: must be an integer >= 0 (0: torch default)")
    if args.all_steps and args.step is not None:
        raise UsageError("--step and --all-steps exclude each other")
    run_dir = RunDir(args.run_dir).require_run()  # checked before torch is imported
    if not args.all_steps:
        run_dir.model_path(args.step)  # the step exists (an error listing the steps otherwise)
    from empirical.train.evaluate_run import (  # torch: after the checks
        DEFAULT_BATCH_SIZE,
        evaluate_all_steps,
        evaluate_run,
        format_table,
    )

    args.batch_size = args.batch_size or DEFAULT_BATCH_SIZE  # None: the default (0 refused)
    set_threads(args.threads)
    if args.all_steps:
        records, summary = evaluate_all_steps(
            args.run_dir, batch_size=args.batch_size, device=args.device, force=args.force,
            progress=not args.no_progress,
        )  # fmt: skip
        final = records[-1]
        result = {"step": final["step"], "accuracy": final["acc"], "loss": final["loss"],
                  "n": summary.get("eval_set_sizes") or {}}  # fmt: skip
        say(f"evaluated {len(records)} snapshots in {summary['evaluation_s']:.1f} s; wrote "
            f"{run_dir.metrics}, {run_dir.summary}, {run_dir.training_curves}")
        say(f"phases: {_phases_line(summary['phases'])}")
    else:
        result = evaluate_run(
            args.run_dir, step=args.step, batch_size=args.batch_size, device=args.device
        )
    print(format_table(result) if args.format == "table" else json.dumps(result, indent=2))
    return 0


def _phases_line(ph: dict) -> str:
    def span(rise):
        if not rise:
            return "none"
        jump = rise.get("jump_start_step")
        tail = "" if jump is None else f", jump {jump}->{rise['jump_end_step']}"
        return f"{rise['start_step']}-{rise['end_step']}{tail}"

    return (
        f"0-var >= 90% at {ph.get('zero_var_learned_step')}; first spike "
        f"{span(ph.get('first_spike'))}; second spike {span(ph.get('second_spike'))}"
    )


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
