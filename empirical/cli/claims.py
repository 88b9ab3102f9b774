"""`python -m empirical claims --config GRID_CONFIG`: a population of runs of one config (seeds
as members) and how often each of the paper's claims holds in it. Each variant of the grid
config is one population: its members are trained by the grid's batched runner, analysed where
needed, and it gets claims.json, claims.md and figures in OUT/claims/<variant>/ (two or more:
a comparison in OUT/claims/comparison/). See docs/populations.md.
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
    positive_int,
    say,
)
from empirical.report.figures import use_cli_backend


def build_parser() -> argparse.ArgumentParser:
    ap = parser("claims", "Train (or read) a population of runs of one config, seeds as "
                "members, and count how often each paper claim holds, with intervals, jump-step "
                "survival and robust final accuracies.")  # fmt: skip
    add_grid_arguments(
        ap, "member", "only these variants", "population directory (default runs/population/NAME)"
    )
    ap.add_argument(
        "--summarize", action="store_true",
        help="train nothing: count the finished members (analysing those that need it)",
    )  # fmt: skip
    ap.add_argument("--jobs", type=int, default=1, metavar="J",
                    help="analyse the members in J processes (default 1)")  # fmt: skip
    ap.add_argument(
        "--no-analysis", action="store_true",
        help="run no analysis or compare-qk: count the checks from summary.json and the "
        "metrics, and from analysis.json / compare-qk output only where a member has them",
    )  # fmt: skip
    ap.add_argument(
        "--final-window", type=int, default=2000, metavar="STEPS",
        help="robust final accuracy: the mean over the evaluations of the last STEPS steps "
        "(default 2000)",
    )  # fmt: skip
    ap.add_argument(
        "--paper-run", metavar="DIR",
        help="a run directory (the paper's run, imported: runs/authors) to place in every "
        "population: its value, percentile and tail per check, in claims.md",
    )  # fmt: skip
    ap.add_argument("--no-figures", action="store_true", help="claims.json and claims.md only")
    add_format_argument(ap)
    add_member_figures_argument(ap)
    add_executor_arguments(ap)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    base, spec = grid_config_of(args)
    positive_int("--jobs", args.jobs)
    positive_int("--final-window", args.final_window)
    if args.paper_run is not None:
        from empirical.runs.rundir import RunDir

        RunDir(args.paper_run).require_run()  # before any training
    executor = executor_options(args)  # None: train here
    out = Path(args.out) if args.out else Path("runs") / "population" / base.name
    if not args.summarize:
        trained = _train(args, base, spec, out, executor)
        if trained is not None:
            return trained
    return _summarize(args, base, spec, out)


def _train(args, base, spec, out: Path, executor) -> int | None:
    """The grid's training of every unfinished member; an exit status to return now (jobs
    not waited for, failed jobs), or None to go on to the claims."""
    from empirical.experiments.sweep.grid import run_grid
    from empirical.experiments.sweep.runner import sweep_dir_lock  # torch: after the checks
    from empirical.runs.rundir import SweepDir

    with sweep_dir_lock(SweepDir(out), train=True):
        check_output_dir(out, "--out")  # before any training
        results = run_grid(base, spec, out, progress=not args.no_progress, log=say,
                           train=True, executor=executor,
                           member_figures=not args.no_member_figures)  # fmt: skip
    if results.get("failed_jobs"):
        return failed_jobs(results["failed_jobs"])
    if executor is not None and not results:
        say("when the jobs have finished, count the claims: the same command with --summarize "
            "instead of --executor")
        return 0
    return None


def _summarize(args, base, spec, out: Path) -> int:
    from empirical.experiments.population.pipeline import summarize_population
    from empirical.experiments.sweep.runner import sweep_dir_lock
    from empirical.runs.rundir import SweepDir

    with sweep_dir_lock(SweepDir(out), train=False):
        done = summarize_population(
            base, spec, out, jobs=args.jobs, analysis=not args.no_analysis, fmt=args.format,
            window=args.final_window, figures=not args.no_figures,
            paper_run=args.paper_run, log=say,
        )  # fmt: skip
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


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
