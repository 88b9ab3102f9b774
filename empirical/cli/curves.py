"""`python -m empirical curves RUN_DIR [RUN_DIR ...] --out FILE`: several runs' accuracy
curves side by side, one panel per evaluation set (--sets 1var/ind 1var/var), detected spikes
marked.
"""

from __future__ import annotations

import sys

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    UsageError,
    add_format_argument,
    check_output_file,
    main_of,
)
from empirical.report.figures import use_cli_backend


def run(argv: list[str]) -> int:
    ap = parser("curves", "Several runs' accuracy curves side by side, spikes marked.")
    ap.add_argument("run_dirs", nargs="+", help="run directories (trained or imported)")
    ap.add_argument("--sets", nargs="+", default=["1var/ind", "1var/var"],
                    help="evaluation sets (panels)")  # fmt: skip
    ap.add_argument("--labels", nargs="+", help="a label per run (default: RunDir.label)")
    ap.add_argument("--title", default="", help="figure title")
    ap.add_argument("--out", required=True, help="figure file (png, pdf or svg)")
    add_format_argument(ap)
    args = ap.parse_args(argv)
    from empirical.runs.phases import detect_phases
    from empirical.runs.rundir import RunDir
    from empirical.train.plots import plot_runs

    if args.labels is not None and len(args.labels) != len(args.run_dirs):
        raise UsageError(
            f"--labels: {len(args.labels)} labels for {len(args.run_dirs)} run directories"
        )
    out = check_output_file(args.out)
    runs = []
    for i, path in enumerate(args.run_dirs):
        run = RunDir(path).require_run()
        records = run.read_metrics()
        if not records:
            raise UsageError(f"{run}: no metrics yet (train it, or `evaluate --all-steps` it)")
        missing = [s for s in args.sets if s not in records[-1].get("acc", {})]
        if missing:
            raise UsageError(
                f"--sets: {run} has no evaluation set {missing[0]!r}; it has "
                f"{', '.join(records[-1]['acc'])}"
            )
        label = args.labels[i] if args.labels else run.label()
        runs.append((label, records, detect_phases(records)))
    use_cli_backend()
    fig = plot_runs(runs, args.sets, out, args.title, fmt=None if out.suffix else args.format)
    print(f"wrote {fig.saved_path}", file=sys.stderr)
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
