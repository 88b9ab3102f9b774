"""`python -m empirical sweep --config configs/sweep_pairs.toml [--summarize]`: the paper's
Figure-3 sweeps, many models trained as one batch (--summarize: only re-plot). Re-running
the same command skips finished members and resumes unfinished ones. Its options:
empirical.experiments.sweep.options. See docs/sweep.md.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from disentangled.command_line import check_output_dir
from empirical.config.options import command_argv, command_main
from empirical.experiments.sweep.cluster import failed_jobs
from empirical.experiments.sweep.figure import plot_sweep
from empirical.experiments.sweep.merge import figure_stem, merge_results
from empirical.experiments.sweep.options import SweepOptions
from empirical.experiments.sweep.param_sweep import run_sweep
from empirical.experiments.sweep.results import results_report
from empirical.experiments.sweep.runner import sweep_dir_lock
from empirical.experiments.sweep.summary_md import threshold_sentence
from empirical.report.figures import use_cli_backend
from empirical.report.writer import Figure, Report, write_report
from empirical.runs.rundir import SweepDir


def run(opts: SweepOptions) -> int:
    use_cli_backend()
    if opts.merge:
        return _merge(opts)
    base, spec = opts.sweep
    out = opts.out_dir
    command = "python -m empirical sweep " + shlex.join(command_argv(opts) or ())
    # the sweep directory's writer lock, held to the last file written (runner.sweep_dir_lock)
    with sweep_dir_lock(SweepDir(out), train=not opts.summarize):
        check_output_dir(out, "--out")  # before any training
        if spec.note and not opts.summarize:
            print(spec.note.strip(), file=sys.stderr)
        return _sweep_and_report(opts, base, spec, out, command)


def _merge(opts: SweepOptions) -> int:
    """--merge: the pooled summary of several results.json files, written to --out."""
    results = merge_results([Path(p) for p in opts.merge])
    paths = write_report(results_report(results, figure_stem(results), fmt=opts.format),
                         opts.out, fmt=opts.format)  # fmt: skip
    print(threshold_sentence(results), file=sys.stderr)
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    return 0


def _sweep_and_report(opts: SweepOptions, base, spec, out: Path, command: str) -> int:
    outcome = run_sweep(
        base, spec, out, progress=opts.progress, log=lambda text: print(text, file=sys.stderr),
        train=not opts.summarize, command=command, executor=opts.executor_options(),
        at_step=opts.at_step, member_figures=opts.member_figures,
    )  # fmt: skip
    failed = outcome.submission.failed if outcome.submission is not None else {}
    if failed:
        return failed_jobs(failed)
    if opts.summarize and not outcome.results["points"]:
        what = "finished members" if opts.at_step is None else f"evaluations at step {opts.at_step}"
        print(f"no {what} in {outcome.sweep_dir}", file=sys.stderr)
    elif opts.format != "png" and outcome.results.get("points"):  # beside the png
        figure = Report({base.name: Figure(lambda: plot_sweep(outcome.results))}, summary=None)
        paths = write_report(figure, outcome.sweep_dir, fmt=opts.format)
        print(f"wrote {paths[base.name]}", file=sys.stderr)
    return 0


main = command_main(SweepOptions, run)

if __name__ == "__main__":
    sys.exit(main())
