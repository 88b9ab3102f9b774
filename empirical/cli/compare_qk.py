"""`python -m empirical compare-qk RUN_DIR [...]`: the theory's predicted layer-2 key-query
update (Theorem C.1's G1) against the one observed in a trained run, over its snapshots.
Writes compare_qk.json (every number), blocks.npz (every labelled block), summary.md and
figures to RUN_DIR/compare_qk (or --out), and prints summary.md. Its options:
empirical.bridge.compare_qk.options. See docs/compare_qk.md.
"""

from __future__ import annotations

import sys

import torch

from disentangled.command_line import prepare_output_dir
from empirical.bridge.compare_qk.options import CompareQKOptions
from empirical.bridge.compare_qk.outputs import report
from empirical.bridge.compare_qk.run_comparison import compare_run
from empirical.config.options import command_main
from empirical.report.writer import print_report, write_report


def run(opts: CompareQKOptions) -> int:
    out = prepare_output_dir(opts.out_dir)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    result = report(compare_run(opts.run_dir, opts.library_options()))
    print_report(result, write_report(result, out, opts.figures, opts.format), opts.quiet)
    return 0


main = command_main(CompareQKOptions, run)

if __name__ == "__main__":
    sys.exit(main())
