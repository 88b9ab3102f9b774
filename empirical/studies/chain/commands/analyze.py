"""`python -m empirical analyze RUN_DIR` on a chain run (the chain family's `analysis`): the
attention per layer and over training, patching, the last layer's MLP and QK
(empirical.studies.chain.analysis.mechanisms); the paper's measures do not apply."""

from __future__ import annotations

import sys
from pathlib import Path

from empirical.config.command_line import prepare_output_dir
from empirical.runs.rundir import RunDir


def analyze_chain(run_dir: RunDir, args) -> int:
    """The chain report of the run (`analyze`'s arguments); exit status 0."""
    out = prepare_output_dir(args.out or run_dir.analysis_dir(args.step))
    from empirical.studies.chain.analysis.mechanisms import analyze_chain_run

    result = analyze_chain_run(run_dir.path, step=args.step, out_dir=out,
                               dynamics=not args.no_dynamics, figures=not args.no_figures,
                               fmt=args.format)  # fmt: skip
    if not args.quiet:
        print((Path(out) / RunDir.SUMMARY_MD).read_text())
    print(f"wrote {out}/analysis.json, summary.md and {len(result['figures'])} figures in "
          f"{result['seconds']:.1f} s", file=sys.stderr)  # fmt: skip
    return 0
