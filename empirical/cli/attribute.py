"""`python -m empirical attribute RUN_DIR --window A:B [...]`: what drives a change of a run's
losses and labelled layer-2 scores between steps A and B, split into the model's parameter
groups by integrating each target's gradient along the training path. Writes, per window,
OUT/A_B/attribution.json, attribution.npz and shares.png, and OUT/summary.md (default OUT:
RUN_DIR/attribution), and prints summary.md. See docs/attribution.md.
"""

from __future__ import annotations

import argparse
import sys

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    add_output_arguments,
    main_of,
    positive_ints,
    prepare_output_dir,
)
from empirical.runs.rundir import RunDir

# paths.STEP_RULES (tested equal)
STEP_RULES = ("simpson", "simpson4", "simpson8", "trapezoid", "midpoint", "start")


def _window(text: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A:B (two steps), got {text!r}") from None
    if not 0 <= a < b:
        raise argparse.ArgumentTypeError(f"{text!r}: needs 0 <= A < B")
    return a, b


def build_parser() -> argparse.ArgumentParser:
    ap = parser("attribute", "Attribute a window's loss and score changes to parameter groups.")
    ap.add_argument("run_dir", help="a run directory (trained, or imported with snapshots)")
    ap.add_argument("--window", type=_window, action="append", required=True,
                    help="steps A:B (repeat for several windows)")  # fmt: skip
    ap.add_argument("--out", help="output directory (default RUN_DIR/attribution)")
    ap.add_argument(
        "--path", choices=("auto", "replay", "straight"), default="auto",
        help="the path: replay the training steps from a checkpoint (a trained run; default), "
        "or straight lines between snapshots (an imported run; default there)",
    )  # fmt: skip
    ap.add_argument("--checkpoint",
                    help="a training checkpoint of the run at or before A (default: "
                    "RUN_DIR/checkpoints/last.pt)")  # fmt: skip
    ap.add_argument(
        "--rule", choices=STEP_RULES, default="simpson",
        help="each replayed step's split: simpson (default), simpson4 / simpson8 (composite "
        "Simpson on quarters / eighths of the step: 2x / 4x the time), trapezoid, midpoint "
        "or start (the gradient at the step's start); every rule's residual is reported",
    )  # fmt: skip
    ap.add_argument("--nodes", type=int, default=8,
                    help="Gauss-Legendre points per straight segment (default 8)")  # fmt: skip
    ap.add_argument("--eval-size", type=int, default=1000,
                    help="sequences of each evaluation set in its loss (default 1000)")  # fmt: skip
    ap.add_argument("--sets", help="evaluation sets, comma-separated (default: all)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument(
        "--first-order-only", action="store_true",
        help="only each group's change A -> B against its first-order predictions at A (fast: "
        "no path integral)",
    )  # fmt: skip
    ap.add_argument("--null-draws", type=int, default=2000, metavar="N",
                    help="random sign patterns of each first-order sign null (default 2000; "
                    "its p-values resolve 1/(N+1))")  # fmt: skip
    add_output_arguments(ap, figures=True)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    run_dir = RunDir(args.run_dir).require_run()
    run_dir.read_two_layer_config("attribute")  # before the output directory is made
    positive_ints(args, "nodes", "eval_size", "null_draws")
    positive_ints(args, "threads", minimum=0)
    out = prepare_output_dir(args.out or run_dir.path / "attribution")
    from empirical.bridge.attribution.outputs import window_name, write_summary, write_window
    from empirical.bridge.attribution.run_attribution import (
        AttributionOptions,
        attribute_window,
        threads,
    )

    threads(args.threads)
    opts = AttributionOptions(
        path=args.path, checkpoint=args.checkpoint, rule=args.rule, nodes=args.nodes,
        eval_size=args.eval_size,
        sets=tuple(s for s in args.sets.split(",") if s) if args.sets else None,
        progress=not args.quiet, first_order_only=args.first_order_only,
        null_draws=args.null_draws,
    )  # fmt: skip
    results = []
    for a, b in args.window:
        result = attribute_window(run_dir.path, a, b, opts)
        write_window(result, out / window_name(result), args.format, not args.no_figures)
        results.append(result)
    text = write_summary(results, out)
    if not args.quiet:
        print(text)
        print(f"wrote {out}")
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
