"""`python -m empirical repair RUN_DIR [--rebuild-eval-sets]`: repair a run directory's
metrics.jsonl (bad lines dropped, the old file kept as metrics.jsonl.bak; a missing one
rebuilt from the snapshots) and with --rebuild-eval-sets its eval_sets.pt, under the run's
writer lock. See empirical/train/repair.py and docs/robustness.md.
"""

from __future__ import annotations

import argparse
import sys

from empirical.cli.parsing import parser
from empirical.config.command_line import main_of


def build_parser() -> argparse.ArgumentParser:
    ap = parser("repair", "Repair a run directory's metrics log (and evaluation sets).")
    ap.add_argument("run_dir", help="a run directory (or a sweep member's directory)")
    ap.add_argument("--rebuild-eval-sets", action="store_true",
                    help="build eval_sets.pt again from the run's config")  # fmt: skip
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from empirical.runs.lock import writer_lock
    from empirical.runs.rundir import RunDir
    from empirical.train.repair import rebuild_eval_sets, repair_metrics

    run_dir = RunDir(args.run_dir).require_run()
    with writer_lock(run_dir, "RUN_DIR"):  # a run being trained is not repaired beside it
        lines = []
        if args.rebuild_eval_sets:  # first: a metrics rebuild evaluates on them
            lines += rebuild_eval_sets(run_dir)
        lines += repair_metrics(run_dir)
    print("\n".join(lines))
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
