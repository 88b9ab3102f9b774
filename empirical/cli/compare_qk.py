"""`python -m empirical compare-qk RUN_DIR [...]`: the theory's predicted layer-2 key-query
update (Theorem C.1's G1) against the one observed in a trained run, over its snapshots.
Writes compare_qk.json (every number), blocks.npz (every labelled block), summary.md and
figures to RUN_DIR/compare_qk (or --out), and prints summary.md. See docs/compare_qk.md.
"""

from __future__ import annotations

import argparse
import functools
import sys

from empirical.analysis.figures import use_cli_backend
from empirical.cli.common import (
    add_output_arguments,
    main_of,
    parser,
    positive_floats,
    positive_ints,
    prepare_output_dir,
    print_outputs,
    set_threads,
)
from empirical.runs.rundir import RunDir

# empirical.bridge.compare_qk.frames' FRAMES and DEFAULT_FRAME (tested equal), kept here so that
# parsing the arguments does not import the comparison (torch, sympy)
FRAMES = ("dual", "score", "orth", "raw")
DEFAULT_FRAME = "dual"


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from exc


_floats = functools.partial(positive_floats, nan_ok=True)


def _windows(text: str) -> list[tuple[str, int, int]]:
    from empirical.bridge.compare_qk.windows import parse_windows

    try:
        return parse_windows(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _add_comparison_arguments(ap: argparse.ArgumentParser) -> None:
    """The comparison's data, frame and prediction (Options' fields of the same names)."""
    ap.add_argument("--batch-size", type=int, default=4096,
                    help="1-var sequences for gradients (default 4096)")  # fmt: skip
    ap.add_argument(
        "--order", choices=("fixed", "mixed"), default="mixed",
        help="1-var operand order of the batch and of G1: mixed (either order, as the run "
        "trains; default) or fixed (variable second, the theorem's)",
    )  # fmt: skip
    ap.add_argument(
        "--distribution", choices=("unrestricted", "train"), default="train",
        help="1-var data of the batch and of G1: the run's training restrictions (default) or "
        "every variable at every position (the theorem's)",
    )  # fmt: skip
    ap.add_argument(
        "--frame", choices=FRAMES, default=DEFAULT_FRAME,
        help="headline frame: dual (reads a label-space gradient back exactly; default), "
        "score (score change vs G1 pushed through the Gram matrices; exact), orth / raw "
        "(legacy readings against G1 itself); every frame is in the JSON",
    )  # fmt: skip
    ap.add_argument(
        "--all-assigned", action="store_true",
        help="assign every variable in each sequence (the theorem's sequences)",
    )  # fmt: skip
    ap.add_argument(
        "--ab-from", choices=("operands", "values"), default="operands",
        help="measure a from `=`'s attention to the operand positions (default) or values",
    )  # fmt: skip
    ap.add_argument(
        "--layout", choices=("averaged", "packed"), default="averaged",
        help="prediction's pos0..pos{L-5} columns: averaged (random layouts; default) or packed",
    )  # fmt: skip
    ap.add_argument("--seed", type=int, default=0, help="data seed of the comparison batch")
    ap.add_argument(
        "--windows", type=_windows,
        help="training windows, e.g. plateau1=4801:5301,spike=5301:5401 (lo <= step <= hi; "
        "default: from the detected phases)",
    )  # fmt: skip
    ap.add_argument("--prediction", choices=("auto", "closed", "population"), default="auto",
                    help="G1: the closed form (needs 2K <= L-4), the theorem's model on a sampled "
                    "population, or auto (closed where it exists; default)")  # fmt: skip
    ap.add_argument(
        "--prediction-size", type=int, default=65536,
        help="sequences of the sampled population (--prediction population; default 65536)",
    )  # fmt: skip


def _add_one_step_arguments(ap: argparse.ArgumentParser) -> None:
    """The one-step test's snapshot, step sizes and data."""
    ap.add_argument("--no-one-step", action="store_true", help="skip the one-step test")
    ap.add_argument(
        "--one-step-at", type=int, help="snapshot of the one-step test (default: the last "
        "before the first spike's jump, else the first with 0var/ind >= 0.9)",
    )  # fmt: skip
    ap.add_argument(
        "--one-step-lrs", type=_floats, default=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0),
        help="plain-SGD learning rates (default 0.03,0.1,0.3,1,3,10,30,100)",
    )  # fmt: skip
    ap.add_argument("--one-step-steps", type=int, default=1, help="SGD steps per lr (default 1)")
    ap.add_argument(
        "--score-steps", type=_floats, default=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
        help="sizes t of the non-SGD steps: RMS change of `=`'s layer-2 scores on the batch",
    )  # fmt: skip
    ap.add_argument(
        "--one-step-order", choices=("fixed", "mixed"), default="mixed",
        help="operand order of the one-step test's 1-var data (default mixed, as the task)",
    )  # fmt: skip
    ap.add_argument(
        "--one-step-distribution", choices=("unrestricted", "train"), default="train",
        help="1-var data of the one-step test: the run's training distribution (default)",
    )  # fmt: skip
    ap.add_argument(
        "--eval-size", type=int, default=5000,
        help="sequences per evaluation set in the one-step test (default 5000; 0: all)",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    ap = parser("compare-qk", "Theorem C.1's predicted layer-2 QK update vs the observed one.")
    ap.add_argument("run_dir", help="a run directory written by `python -m empirical train`")
    ap.add_argument("--out", help="output directory (default RUN_DIR/compare_qk)")
    ap.add_argument("--steps", type=_ints, help="snapshot steps, e.g. 0,1000,1250 (default: all)")
    ap.add_argument("--every", type=int, default=1, help="use every N-th snapshot (default 1)")
    _add_comparison_arguments(ap)
    _add_one_step_arguments(ap)
    add_output_arguments(ap, threads=True, figures=True)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    run_dir = RunDir(args.run_dir).require_run()
    run_dir.read_two_layer_config("compare-qk")  # before the output directory is made
    positive_ints(args, "batch_size", "every", "one_step_steps", "prediction_size")
    positive_ints(args, "eval_size", "threads", minimum=0)
    out = prepare_output_dir(args.out or run_dir.compare_qk_dir)  # before minutes of work
    # torch: imported after every check
    from empirical.bridge.compare_qk import Options, compare_run, write_outputs

    set_threads(args.threads)
    same = ("steps", "every", "batch_size", "order", "distribution", "frame", "all_assigned",
            "ab_from", "layout", "seed", "one_step_at", "one_step_lrs", "one_step_steps",
            "score_steps", "one_step_order", "one_step_distribution", "prediction",
            "prediction_size", "windows")  # fmt: skip
    opts = Options(**{name: getattr(args, name) for name in same}, one_step=not args.no_one_step,
                   eval_size=args.eval_size or None, progress=not args.quiet)  # fmt: skip
    result = compare_run(run_dir.path, opts)
    paths = write_outputs(result, out, figures=not args.no_figures, fmt=args.format)
    print_outputs(paths, args.quiet)
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
