"""`python -m empirical compare-qk RUN_DIR [...]`: the theory's predicted layer-2 key-query
update (Theorem C.1's G1) against the one observed in a trained run, over its snapshots.
Writes compare_qk.json (every number), blocks.npz (every labelled block), summary.md and
figures to RUN_DIR/compare_qk (or --out), and prints summary.md. Its options:
empirical.bridge.compare_qk.options. See docs/compare_qk.md.
"""

from __future__ import annotations

import dataclasses
import sys

import torch

from empirical.bridge.compare_qk.options import CompareQKOptions
from empirical.bridge.compare_qk.outputs import write_outputs
from empirical.bridge.compare_qk.run_comparison import compare_run
from empirical.config.command_line import prepare_output_dir, print_outputs
from empirical.config.options import command_main
from empirical.runs.rundir import RunDir


def run(opts: CompareQKOptions) -> int:
    out = prepare_output_dir(opts.out or RunDir(opts.run_dir).compare_qk_dir)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    result = compare_run(opts.run_dir, dataclasses.replace(opts, progress=not opts.quiet))
    paths = write_outputs(result, out, figures=opts.figures, fmt=opts.format)
    print_outputs(paths, opts.quiet)
    return 0


main = command_main(CompareQKOptions, run)

if __name__ == "__main__":
    sys.exit(main())
