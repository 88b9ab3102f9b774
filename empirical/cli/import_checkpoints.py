"""`python -m empirical import-checkpoints SRC [--config FILE] [key=value ...] --out RUN_DIR`:
a folder of TransformerLens checkpoints (checkpoint_step_N.pth, N = optimiser updates done;
model_state_dict.pth = the final model, at --final-step) turned into a run directory. Its
options: empirical.runs.options.ImportOptions. See docs/import.md.
"""

from __future__ import annotations

import shlex
import sys

import torch

from empirical.config.options import command_argv, command_main
from empirical.report.writer import say
from empirical.runs.import_run import import_checkpoints
from empirical.runs.options import ImportOptions


def run(opts: ImportOptions) -> int:
    if opts.threads:
        torch.set_num_threads(opts.threads)
    result = import_checkpoints(
        opts.src, opts.config_path(), opts.out, overrides=list(opts.overrides),
        train_pairs=opts.train_pairs, final_step=opts.final_step, overwrite=opts.overwrite,
        command="python -m empirical import-checkpoints " + shlex.join(command_argv(opts) or ()),
        progress=not opts.quiet,
    )  # fmt: skip
    if not opts.quiet:
        steps = result.steps
        say(f"imported {len(steps)} checkpoints (steps {steps[0]}..{steps[-1]}) into "
            f"{result.out} in {result.seconds:.1f} s"
            + (" (replaced the earlier directory)" if result.replaced else ""))
        say(f"next: python -m empirical evaluate {result.out} --all-steps")
    return 0


main = command_main(ImportOptions, run)

if __name__ == "__main__":
    sys.exit(main())
