"""`python -m empirical analyze RUN_DIR [--step S] [--out DIR] [...]`: mechanistic analysis
(default: the final checkpoint, and all snapshots). Writes analysis.json, summary.md and
figures to RUN_DIR/analysis (with --step: RUN_DIR/analysis/step_XXXXXX) and prints
summary.md. See docs/analysis.md.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    add_format_argument,
    main_of,
    positive_int,
    prepare_output_dir,
    say,
)
from empirical.report.figures import use_cli_backend
from empirical.runs.rundir import RunDir
from empirical.studies import ANALYSES


def _steps(text: str):
    from empirical.analysis.step_pairs import parse_steps  # torch-free

    try:
        return parse_steps(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    ap = parser("analyze", "Mechanistic analysis of a training run (paper Sections 5-6, App. B).")
    ap.add_argument("run_dir", help="a run directory written by `python -m empirical train`")
    ap.add_argument("--step", type=int, help="analyse snapshots/step_S.pt (default: final)")
    ap.add_argument("--out", help="output directory (default RUN_DIR/analysis[/step_S])")
    ap.add_argument("--no-dynamics", action="store_true",
                    help="skip the progress measures over snapshots")  # fmt: skip
    ap.add_argument("--every", type=int, default=1, help="use every N-th snapshot (default 1)")
    ap.add_argument("--probe-size", type=int, default=2048,
                    help="probe sequences per split (default 2048)")  # fmt: skip
    ap.add_argument("--seed", type=int, help="analysis seed (default: the run's seed)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: fastest here)")  # fmt: skip
    ap.add_argument("--no-figures", action="store_true", help="numbers only")
    add_format_argument(ap)
    ap.add_argument(
        "--first-spike-steps", type=_steps, default="auto", metavar="A,B|auto|off",
        help="compare the snapshots at steps A and B around the first spike (Figure 8); "
        "auto (default): the paper's 5301,5401 when the run has them inside its detected "
        "spike, else the snapshots around the detected spike's largest jump",
    )  # fmt: skip
    ap.add_argument(
        "--second-spike-steps", type=_steps, default="auto", metavar="A,B|auto|off",
        help="compare the snapshots at A and B around the second spike (Figures 9c/9d); "
        "auto (default): the paper's 14501,16001 when inside the detected spike, else its "
        "onset and the end of its window",
    )  # fmt: skip
    ap.add_argument(
        "--example",
        help="the Figure-8 example in token form, e.g. 'pad pad a 40 pad j 18 pad pad pad "
        "k 9 + a 27 =' (default: that one, the authors', when the task holds it)",
    )
    ap.add_argument("--quiet", action="store_true", help="do not print the summary")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    positive_int("--every", args.every)
    positive_int("--probe-size", args.probe_size, 16)
    positive_int("--threads", args.threads, 0)
    if args.seed is not None:
        positive_int("--seed", args.seed, 0)
    run_dir = RunDir(args.run_dir).require_run()
    run_dir.model_path(args.step)  # the step exists (an error listing the steps otherwise)
    # the run's family analyses it: the paper's (below) for assign_add, its own for the others
    analysis = ANALYSES.get(run_dir.read_config().task.family)
    if analysis is None:
        return analyze_paper_run(run_dir, args)
    module, _, function = analysis.partition(":")
    return int(getattr(importlib.import_module(module), function)(run_dir, args) or 0)


def analyze_paper_run(run_dir: RunDir, args) -> int:
    """The paper's analysis of a 2-layer assign_add run (empirical.analysis.run_analysis)."""
    run_dir.read_two_layer_config("analyze")  # before the output directory is made
    out = prepare_output_dir(args.out or run_dir.analysis_dir(args.step))  # before the work
    from empirical.analysis.run_analysis import analyze_run  # torch: after every check

    result = analyze_run(
        run_dir.path, step=args.step, out_dir=out, dynamics=not args.no_dynamics,
        every=args.every, n_probe=args.probe_size, seed=args.seed, threads=args.threads,
        progress=not args.no_progress, figures=not args.no_figures, fmt=args.format,
        first_spike_steps=args.first_spike_steps, second_spike_steps=args.second_spike_steps,
        example=args.example,
    )  # fmt: skip
    if not args.quiet:
        print((Path(out) / RunDir.SUMMARY_MD).read_text())
    say(f"wrote {out}/analysis.json, summary.md and {len(result.get('figures', []))} figures "
        f"in {result['seconds']:.1f} s")
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
