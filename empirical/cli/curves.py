"""`python -m empirical curves RUN_DIR [RUN_DIR ...] --out FILE`: several runs' accuracy
curves side by side, one panel per evaluation set (--sets 1var/ind 1var/var), detected spikes
marked. Its options: empirical.cli.curves_options; the figure: empirical.train.plots.
"""

from __future__ import annotations

import sys
from pathlib import Path

from disentangled.command_line import UsageError
from empirical.cli.curves_options import CurvesOptions
from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import RunDir
from empirical.train.plots import plot_runs


def run(opts: CurvesOptions) -> int:
    runs = []
    for i, path in enumerate(opts.run_dirs):
        run_dir = RunDir(path).require_run()
        records = run_dir.read_metrics()
        if not records:
            raise UsageError(f"{run_dir}: no metrics yet (train it, or `evaluate --all-steps` it)")
        missing = [s for s in opts.sets if s not in records[-1].get("acc", {})]
        if missing:
            raise UsageError(
                f"--sets: {run_dir} has no evaluation set {missing[0]!r}; it has "
                f"{', '.join(records[-1]['acc'])}"
            )
        label = opts.labels[i] if opts.labels else run_dir.label()
        runs.append((label, records, detect_phases(records)))
    use_cli_backend()
    out = Path(opts.out)
    fig = plot_runs(runs, list(opts.sets), out, opts.title,
                    fmt=None if out.suffix else opts.format)  # fmt: skip
    print(f"wrote {fig.saved_path}", file=sys.stderr)
    return 0


main = command_main(CurvesOptions, run)

if __name__ == "__main__":
    sys.exit(main())
