"""`python -m empirical ladder RUN_DIR [--step N] [--out DIR] [--format png|pdf|svg]`: the
assumption ladder from Theorem C.1's model to the trained model at one snapshot: every
rung's layer-2 key-query gradient against G1 and its one-step test. Writes ladder.json,
summary.md, blocks.npz and ladder.png to RUN_DIR/ladder/step_NNNNNN (or --out) and prints
summary.md. See docs/ladder.md.
"""

from __future__ import annotations

import argparse

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    add_output_arguments,
    main_of,
    positive_floats,
    positive_ints,
    prepare_output_dir,
    print_outputs,
    set_threads,
)
from empirical.report.figures import use_cli_backend
from empirical.runs.rundir import RunDir

DEFAULT_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)  # snapshot_ladder.DEFAULT_GRID (tested equal)


def build_parser() -> argparse.ArgumentParser:
    ap = parser("ladder", "The assumption ladder from Theorem C.1's model to a trained snapshot.")
    ap.add_argument("run_dir", help="a run directory with snapshots")
    ap.add_argument(
        "--step", type=int,
        help="snapshot step (default: the last before the first spike's jump, as compare-qk)",
    )  # fmt: skip
    ap.add_argument("--out", help="output directory (default RUN_DIR/ladder/step_NNNNNN)")
    ap.add_argument("--batch-size", type=int, default=4096,
                    help="1-var sequences per rung's gradient (default 4096)")  # fmt: skip
    ap.add_argument("--prediction-size", type=int, default=65536,
                    help="sequences of G1's sampled population (default 65536)")  # fmt: skip
    ap.add_argument("--eval-size", type=int, default=1000,
                    help="sequences per evaluation set in the one-step test (default 1000; "
                    "0: all)")  # fmt: skip
    ap.add_argument("--grid", type=positive_floats, default=DEFAULT_GRID,
                    help="one-step sizes: RMS change of `=`'s layer-2 scores (default "
                    "0.1,0.3,1,3,10,30)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    add_output_arguments(ap, threads=True)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    run_dir = RunDir(args.run_dir).require_run()
    run_dir.read_two_layer_config("ladder")
    positive_ints(args, "batch_size", "prediction_size")
    positive_ints(args, "eval_size", "threads", minimum=0)
    # torch: imported after every check
    from empirical.bridge.ladder.outputs import write_outputs
    from empirical.bridge.ladder.snapshot_ladder import LadderOptions, choose_step, run_ladder

    opts = LadderOptions(
        step=args.step, batch_size=args.batch_size, prediction_size=args.prediction_size,
        eval_size=args.eval_size or None, grid=args.grid, seed=args.seed,
        progress=not args.quiet,
    )  # fmt: skip
    step = choose_step(run_dir, opts)[0]  # a bad --step fails before the output directory
    out = prepare_output_dir(args.out or run_dir.path / "ladder" / f"step_{step:06d}")
    set_threads(args.threads)
    result = run_ladder(run_dir.path, opts)  # picks the same step, and records its rule
    paths = write_outputs(result, out, fmt=args.format)
    print_outputs(paths, args.quiet)
    return 0


main = main_of(run)
