"""`python -m empirical claims --config GRID_CONFIG`: a population of runs of one config (seeds
as members) and how often each of the paper's claims holds in it. Each variant of the grid
config is one population: its members are trained by the grid's batched runner, analysed where
needed, and it gets claims.json, claims.md and figures in OUT/claims/<variant>/ (two or more:
a comparison in OUT/claims/comparison/). Its options: empirical.experiments.population.options.
See docs/populations.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from disentangled.command_line import check_output_dir
from empirical.config.options import command_main
from empirical.experiments.population.options import ClaimsOptions
from empirical.experiments.population.pipeline import summarize_population
from empirical.experiments.sweep.cluster import failed_jobs
from empirical.experiments.sweep.grid import run_grid
from empirical.experiments.sweep.runner import sweep_dir_lock
from empirical.report.figures import use_cli_backend
from empirical.report.writer import say
from empirical.runs.rundir import SweepDir


def run(opts: ClaimsOptions) -> int:
    use_cli_backend()
    out = opts.out_dir
    if not opts.summarize:
        trained = _train(opts, out)
        if trained is not None:
            return trained
    return _summarize(opts, out)


def _train(opts: ClaimsOptions, out: Path) -> int | None:
    """The grid's training of every unfinished member; an exit status to return now (jobs
    not waited for, failed jobs), or None to go on to the claims."""
    base, spec = opts.grid
    executor = opts.executor_options()  # None: train here
    with sweep_dir_lock(SweepDir(out), train=True):
        check_output_dir(out, "--out")  # before any training
        results = run_grid(base, spec, out, progress=opts.progress, log=say, train=True,
                           executor=executor, member_figures=opts.member_figures)  # fmt: skip
    if results.get("failed_jobs"):
        return failed_jobs(results["failed_jobs"])
    if executor is not None and not results:
        say("when the jobs have finished, count the claims: the same command with --summarize "
            "instead of --executor")
        return 0
    return None


def _summarize(opts: ClaimsOptions, out: Path) -> int:
    base, spec = opts.grid
    with sweep_dir_lock(SweepDir(out), train=False):
        done = summarize_population(base, spec, out, opts, log=say)
    for variant, claims in done.items():
        print(f"{variant}: {claims['members']} members")
        for c in claims["claims"]:
            ci = claims_ci(c)
            print(f"  {c['verdict']:<16} {c['holds']:>3} of {c['of']:<3} {ci:<22} {c['claim']}")
    return 0


def claims_ci(entry: dict) -> str:
    if not entry.get("ci95"):
        return "-"
    lo, hi = entry["ci95"]
    return f"[{100 * lo:.0f}, {100 * hi:.0f}]%"


main = command_main(ClaimsOptions, run)

if __name__ == "__main__":
    sys.exit(main())
