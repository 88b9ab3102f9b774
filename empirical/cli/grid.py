"""`python -m empirical grid --config GRID_CONFIG`: named config variants x seeds, trained as
batched models. Re-running the same command skips finished members and resumes unfinished
ones. See docs/sweep.md ('Grids').
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from empirical.cli.executor import add_executor_arguments, executor_options, failed_jobs
from empirical.cli.grid_options import add_grid_arguments, grid_config_of
from empirical.cli.parsing import parser
from empirical.config.command_line import (
    add_format_argument,
    add_member_figures_argument,
    check_output_dir,
    main_of,
    say,
)
from empirical.report.figures import use_cli_backend
from empirical.runs.rundir import SweepDir


def build_parser() -> argparse.ArgumentParser:
    ap = parser("grid", "Train every (variant, seed) of a grid config as batched models and "
                "tabulate the final accuracy of every evaluation set per variant.")  # fmt: skip
    add_grid_arguments(
        ap, "variant", "train only these variants", "grid directory (default runs/grid/NAME)"
    )
    add_format_argument(ap)
    add_member_figures_argument(ap)
    ap.add_argument(
        "--summarize", action="store_true", help="no training: rewrite grid.json/md/png"
    )
    add_executor_arguments(ap)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    base, spec = grid_config_of(args)
    executor = executor_options(args)  # None: train here
    from empirical.experiments.sweep.runner import sweep_dir_lock  # torch: after the checks

    out = Path(args.out) if args.out else Path("runs") / "grid" / base.name
    # the grid directory's writer lock, held to the last file written (runner.sweep_dir_lock)
    with sweep_dir_lock(SweepDir(out), train=not args.summarize):
        check_output_dir(out, "--out")  # before any training
        return _grid_and_report(args, base, spec, out, executor)


def _grid_and_report(args, base, spec, out: Path, executor) -> int:
    from empirical.experiments.sweep.grid import run_grid

    results = run_grid(base, spec, out, progress=not args.no_progress, log=say,
                       train=not args.summarize, executor=executor,
                       member_figures=not args.no_member_figures)  # fmt: skip
    if results.get("failed_jobs"):
        return failed_jobs(results["failed_jobs"])
    if not results:
        if args.summarize:
            print(f"no member directories in {out}", file=sys.stderr)
        return 0
    if args.format != "png":
        from empirical.experiments.sweep.grid import plot_grid

        fig = plot_grid(results, out / "grid", fmt=args.format)
        print(f"wrote {fig.saved_path}", file=sys.stderr)
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
