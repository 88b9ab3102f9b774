"""`python -m empirical ladder RUN_DIR [--step N] [--out DIR] [--format png|pdf|svg]`: the
assumption ladder from Theorem C.1's model to the trained model at one snapshot: every
rung's layer-2 key-query gradient against G1 and its one-step test. Writes ladder.json,
summary.md, blocks.npz and ladder.png to RUN_DIR/ladder/step_NNNNNN (or --out) and prints
summary.md. Its options: empirical.bridge.ladder.options. See docs/ladder.md.
"""

from __future__ import annotations

import torch

from disentangled.command_line import prepare_output_dir
from empirical.bridge.ladder.options import LadderCommandOptions
from empirical.bridge.ladder.outputs import report
from empirical.bridge.ladder.snapshot_ladder import choose_step, run_ladder
from empirical.config.options import command_main
from empirical.report.writer import print_report, write_report
from empirical.runs.rundir import RunDir


def run(opts: LadderCommandOptions) -> int:
    ladder = opts.library_options()
    run_dir = RunDir(opts.run_dir)
    step = choose_step(run_dir, ladder)[0]  # a bad --step fails before the output directory
    out = prepare_output_dir(opts.out_dir(step))
    if opts.threads:
        torch.set_num_threads(opts.threads)
    result = report(run_ladder(run_dir.path, ladder))  # picks the same step, records its rule
    print_report(result, write_report(result, out, fmt=opts.format), opts.quiet)
    return 0


main = command_main(LadderCommandOptions, run)
