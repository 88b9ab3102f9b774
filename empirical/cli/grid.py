"""`python -m empirical grid --config GRID_CONFIG`: named config variants x seeds, trained as
batched models. Re-running the same command skips finished members and resumes unfinished
ones. Its options: empirical.experiments.sweep.options. See docs/sweep.md ('Grids').
"""

from __future__ import annotations

import sys

from disentangled.command_line import check_output_dir
from empirical.config.options import command_main
from empirical.experiments.sweep.cluster import failed_jobs
from empirical.experiments.sweep.grid import plot_grid, run_grid
from empirical.experiments.sweep.options import GridOptions
from empirical.experiments.sweep.runner import sweep_dir_lock
from empirical.report.figures import use_cli_backend
from empirical.report.writer import Figure, Report, say, write_report
from empirical.runs.rundir import SweepDir


def run(opts: GridOptions) -> int:
    use_cli_backend()
    base, spec = opts.grid
    out = opts.out_dir
    # the grid directory's writer lock, held to the last file written (runner.sweep_dir_lock)
    with sweep_dir_lock(SweepDir(out), train=not opts.summarize):
        check_output_dir(out, "--out")  # before any training
        results = run_grid(base, spec, out, progress=opts.progress, log=say,
                           train=not opts.summarize, executor=opts.executor_options(),
                           member_figures=opts.member_figures)  # fmt: skip
        if results.get("failed_jobs"):
            return failed_jobs(results["failed_jobs"])
        if not results:
            if opts.summarize:
                print(f"no member directories in {out}", file=sys.stderr)
            return 0
        if opts.format != "png":  # beside grid.png
            figure = Figure(lambda: plot_grid(results))
            paths = write_report(Report({SweepDir.GRID_FIGURE: figure}, summary=None), out,
                                 fmt=opts.format)  # fmt: skip
            print(f"wrote {paths[SweepDir.GRID_FIGURE]}", file=sys.stderr)
    return 0


main = command_main(GridOptions, run)

if __name__ == "__main__":
    sys.exit(main())
