"""`python -m empirical intervene RUN_DIR --checkpoint C [...]`: continuations of a run from a
training checkpoint shortly before a jump under each condition (CONDITION_NAMES), with
several data orders, trained as one batch of members: the share that jumps and when, and the
cosine between replicates' W_QK updates. Writes OUT/interventions.json, updates.npz,
survival.png, summary.md and g1_direction.pt (default OUT: RUN_DIR/interventions), and prints
summary.md. Its options: empirical.bridge.interventions.options. See docs/attribution.md.
"""

from __future__ import annotations

import dataclasses
import sys

import torch

from disentangled.command_line import prepare_output_dir
from empirical.bridge.interventions.options import InterveneOptions
from empirical.bridge.interventions.outputs import report
from empirical.bridge.interventions.run_interventions import intervene
from empirical.config.options import command_main
from empirical.report.writer import print_report, write_report
from empirical.runs.rundir import RunDir


def run(opts: InterveneOptions) -> int:
    run_dir = RunDir(opts.run_dir)
    out = prepare_output_dir(opts.out or run_dir.path / "interventions")
    if opts.threads:
        torch.set_num_threads(opts.threads)
    lib = dataclasses.replace(opts, progress=not opts.quiet)
    stats, result = intervene(run_dir, opts.run_config, out, lib)
    made = report(stats, result)
    print_report(made, write_report(made, out, fmt=opts.format), opts.quiet)
    return 0


main = command_main(InterveneOptions, run)

if __name__ == "__main__":
    sys.exit(main())
