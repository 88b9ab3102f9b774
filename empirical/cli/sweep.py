"""`python -m empirical sweep --config configs/sweep_pairs.toml [--summarize]`: the paper's
Figure-3 sweeps, many models trained as one batch (--summarize: only re-plot). Re-running
the same command skips finished members and resumes unfinished ones. See docs/sweep.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path

from empirical.cli.executor import add_executor_arguments, executor_options, failed_jobs
from empirical.cli.parsing import parser
from empirical.config.command_line import (
    UsageError,
    add_format_argument,
    add_member_figures_argument,
    check_output_dir,
    main_of,
    overrides_from_lists,
)
from empirical.report.figures import use_cli_backend
from empirical.runs.rundir import SweepDir


def build_parser() -> argparse.ArgumentParser:
    ap = parser("sweep", "Train one model per (swept value, seed), batched as one stacked "
                "model, and plot the final accuracy against the swept value with its threshold "
                "(Figure 3).")  # fmt: skip
    ap.add_argument("overrides", nargs="*", help="run-config overrides, e.g. train.steps=2000")
    ap.add_argument("--config", help="sweep config: a run config plus a [sweep] table")
    ap.add_argument(
        "--param", metavar="KEY=V1,V2,...",
        help="swept field and values (a dotted run-config field, or the alias pair_fraction = "
        "task.train_pair_fraction = 1 - task.held_out_fraction); ';' separates values that "
        "contain commas",
    )  # fmt: skip
    ap.add_argument("--seeds", nargs="+", metavar="SEED",
                    help="seeds (every value is trained for each seed)")  # fmt: skip
    ap.add_argument("--metric", help="accuracy to plot and threshold (default: the config's)")
    ap.add_argument("--target", type=float, help="threshold target accuracy (default 0.99)")
    ap.add_argument("--max-batch", type=int, help="members per batched model (0: no limit)")
    ap.add_argument("--out", help="sweep directory (default runs/sweep/NAME)")
    ap.add_argument("--summarize", action="store_true", help="no training: rewrite the summary")
    ap.add_argument(
        "--at-step", type=int, metavar="N",
        help="with --summarize: the summary of every member's evaluation at step N (members "
        "still training included) in results_step_N.json / summary_step_N.md, beside the "
        "final one",
    )  # fmt: skip
    ap.add_argument("--no-progress", action="store_true", help="a line per evaluation instead")
    ap.add_argument(
        "--merge", nargs="+", metavar="RESULTS_JSON",
        help="no training: pool the members of these results.json files of one sweep (e.g. "
        "seeds trained on different machines) into --out (empirical/experiments/sweep/merge.py)",
    )  # fmt: skip
    add_format_argument(ap)
    add_member_figures_argument(ap)
    add_executor_arguments(ap)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    if args.merge:
        return _merge(args)
    overrides_from_lists(args, ("seeds",))
    from empirical.experiments.sweep.spec import load_sweep_config, parse_param  # torch-free

    base, spec = load_sweep_config(args.config, args.overrides)
    changes: dict = {}
    if args.param:
        changes["param"], changes["values"] = parse_param(args.param)
    if args.seeds is not None:
        changes["seeds"] = [_seed(s) for s in args.seeds]
    for name in ("metric", "target", "max_batch"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    spec = dataclasses.replace(spec, **changes)  # validated again, with the command's values
    if args.at_step is not None:
        if not args.summarize:
            raise UsageError(
                f"--at-step {args.at_step} summarizes an earlier evaluation: use it with "
                "--summarize (no training)"
            )
        if args.at_step < 0 or args.at_step > base.train.steps:
            raise UsageError(
                f"--at-step {args.at_step}: allowed 0..train.steps = {base.train.steps} (an "
                "evaluation step of the members)"
            )
    executor = executor_options(args)  # None: train here
    from empirical.experiments.sweep.param_sweep import default_sweep_dir  # torch: after the checks
    from empirical.experiments.sweep.runner import sweep_dir_lock

    out = Path(args.out) if args.out else default_sweep_dir(base)
    command = "python -m empirical sweep " + shlex.join(argv)
    # the sweep directory's writer lock, held to the last file written (runner.sweep_dir_lock)
    with sweep_dir_lock(SweepDir(out), train=not args.summarize):
        check_output_dir(out, "--out")  # before any training
        if spec.note and not args.summarize:
            print(spec.note.strip(), file=sys.stderr)
        return _sweep_and_report(args, base, spec, out, command, executor)


def _merge(args) -> int:
    """--merge: the pooled summary of several results.json files, written to --out."""
    if not args.out:
        raise UsageError("--merge needs --out DIR (where the merged summary goes)")
    if args.config or args.overrides or args.summarize or args.at_step is not None:
        raise UsageError("--merge takes result files and --out only (no --config, overrides, "
                         "--summarize or --at-step)")  # fmt: skip
    from empirical.experiments.sweep.merge import figure_name, merge_results
    from empirical.experiments.sweep.results import write_results
    from empirical.experiments.sweep.summary_md import threshold_sentence

    results = merge_results([Path(p) for p in args.merge])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = figure_name(results).replace(".png", f".{args.format}")
    paths = write_results(results, out, name)
    print(threshold_sentence(results), file=sys.stderr)
    print(f"wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0


def _sweep_and_report(args, base, spec, out: Path, command: str, executor) -> int:
    from empirical.experiments.sweep.param_sweep import run_sweep

    outcome = run_sweep(
        base, spec, out, progress=not args.no_progress,
        log=lambda text: print(text, file=sys.stderr), train=not args.summarize,
        command=command, executor=executor, at_step=args.at_step,
        member_figures=not args.no_member_figures,
    )  # fmt: skip
    failed = outcome.submission.failed if outcome.submission is not None else {}
    if failed:
        return failed_jobs(failed)
    if args.summarize and not outcome.results["points"]:
        what = "finished members" if args.at_step is None else f"evaluations at step {args.at_step}"
        print(f"no {what} in {outcome.sweep_dir}", file=sys.stderr)
    elif args.format != "png" and outcome.results.get("points"):
        from empirical.experiments.sweep.figure import plot_sweep

        fig = plot_sweep(outcome.results, outcome.sweep_dir / base.name, fmt=args.format)
        print(f"wrote {fig.saved_path}", file=sys.stderr)
    return 0


main = main_of(run)


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--seeds: {text!r} is not an integer seed") from None


if __name__ == "__main__":
    sys.exit(main())
