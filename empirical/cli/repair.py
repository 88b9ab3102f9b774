"""`python -m empirical repair RUN_DIR [--rebuild-eval-sets]`: repair a run directory.

Examples:
    python -m empirical repair runs/paper/seed0                      # metrics.jsonl
    python -m empirical repair runs/paper/seed0 --rebuild-eval-sets  # and eval_sets.pt

metrics.jsonl with bad lines: every valid line is kept, the others dropped, and it says how
many and which (the file as it was: metrics.jsonl.bak). metrics.jsonl missing: rebuilt from
the snapshots and the checkpoint (training losses unknown). --rebuild-eval-sets: eval_sets.pt
built again from the run's config. See empirical/runs/repair.py and docs/robustness.md.

It holds the run directory's writer lock (empirical.runs.lock): a run that another process
is writing (training, resuming) is refused with one line naming that process.
"""

from __future__ import annotations

import argparse
import sys

from empirical.cli.common import command_main, parser


def build_parser() -> argparse.ArgumentParser:
    ap = parser("repair", "Repair a run directory's metrics log (and evaluation sets).")
    ap.add_argument("run_dir", help="a run directory (or a sweep member's directory)")
    ap.add_argument(
        "--rebuild-eval-sets",
        action="store_true",
        help="build eval_sets.pt again from the run's config",
    )
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from empirical.runs.lock import writer_lock
    from empirical.runs.repair import rebuild_eval_sets, repair_metrics
    from empirical.runs.rundir import RunDir

    run_dir = RunDir(args.run_dir).require_run()
    with writer_lock(run_dir, "RUN_DIR"):  # a run being trained is not repaired beside it
        lines = []
        if args.rebuild_eval_sets:  # first: a metrics rebuild evaluates on them
            lines += rebuild_eval_sets(run_dir)
        lines += repair_metrics(run_dir)
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    return command_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
