"""`python -m empirical repair RUN_DIR [--rebuild-eval-sets]`: repair a run directory's
metrics.jsonl (bad lines dropped, the old file kept as metrics.jsonl.bak; a missing one
rebuilt from the snapshots) and with --rebuild-eval-sets its eval_sets.pt, under the run's
writer lock. Its options: empirical.train.options.RepairOptions. See
empirical/train/repair.py and docs/robustness.md.
"""

from __future__ import annotations

import sys

from empirical.config.options import command_main
from empirical.runs.lock import writer_lock
from empirical.runs.rundir import RunDir
from empirical.train.options import RepairOptions
from empirical.train.repair import rebuild_eval_sets, repair_metrics


def run(opts: RepairOptions) -> int:
    run_dir = RunDir(opts.run_dir)
    with writer_lock(run_dir, "RUN_DIR"):  # a run being trained is not repaired beside it
        lines = []
        if opts.rebuild_eval_sets:  # first: a metrics rebuild evaluates on them
            lines += rebuild_eval_sets(run_dir)
        lines += repair_metrics(run_dir)
    print("\n".join(lines))
    return 0


main = command_main(RepairOptions, run)

if __name__ == "__main__":
    sys.exit(main())
