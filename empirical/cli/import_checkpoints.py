"""`python -m empirical import-checkpoints SRC [--config FILE] [key=value ...] --out RUN_DIR`:
a folder of TransformerLens checkpoints (checkpoint_step_N.pth, N = optimiser updates done;
model_state_dict.pth = the final model, at --final-step) turned into a run directory.
See docs/import.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from empirical.cli.parsing import parser
from empirical.cli.train import DEFAULT_CONFIG
from empirical.config.command_line import UsageError, main_of, say, set_threads
from empirical.runs.config import load_run_config


def build_parser() -> argparse.ArgumentParser:
    ap = parser("import-checkpoints",
                "Turn the paper authors' TransformerLens checkpoints into a run directory.")
    ap.add_argument("src", help="folder of checkpoint_step_N.pth files (+ model_state_dict.pth)")
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. seed=1")
    ap.add_argument("--config", help=f"run config (default: configs/{DEFAULT_CONFIG.name})")
    ap.add_argument("--out", required=True, help="the run directory to write")
    ap.add_argument(
        "--train-pairs",
        help="JSON list of the run's ordered training pairs: refuse unless the config's "
        "held-out pairs are exactly the others",
    )
    ap.add_argument(
        "--final-step", type=int,
        help="step of model_state_dict.pth (default: the config's train.steps)",
    )  # fmt: skip
    ap.add_argument("--overwrite", action="store_true",
                    help="replace an existing --out of any content")  # fmt: skip
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: fastest here)")  # fmt: skip
    ap.add_argument("--quiet", action="store_true", help="no progress and no summary line")
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_intermixed_args(argv)
    if args.threads < 0:
        raise UsageError(f"--threads {args.threads}: must be an integer >= 0 (0: torch default)")
    config = args.config or DEFAULT_CONFIG
    load_run_config(config, args.overrides)  # a bad config or override: answered before torch
    src = Path(args.src)
    if not src.is_dir():
        what = "not a folder" if src.exists() else "no such folder"
        raise UsageError(f"{src}: {what} (give the folder of checkpoint_step_N.pth files)")
    from empirical.runs.import_run import import_checkpoints  # torch: after the checks

    set_threads(args.threads)
    result = import_checkpoints(
        args.src, config, args.out, overrides=args.overrides, train_pairs=args.train_pairs,
        final_step=args.final_step, overwrite=args.overwrite,
        command="python -m empirical import-checkpoints " + shlex.join(argv),
        progress=not args.quiet,
    )  # fmt: skip
    if not args.quiet:
        steps = result.steps
        say(f"imported {len(steps)} checkpoints (steps {steps[0]}..{steps[-1]}) into "
            f"{result.out} in {result.seconds:.1f} s"
            + (" (replaced the earlier directory)" if result.replaced else ""))
        say(f"next: python -m empirical evaluate {result.out} --all-steps")
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
