"""`python -m empirical analyze RUN_DIR [--step S] [--out DIR] [...]`: mechanistic analysis
(default: the final checkpoint, and all snapshots). Writes analysis.json, summary.md and
figures to RUN_DIR/analysis (with --step: RUN_DIR/analysis/step_XXXXXX) and prints
summary.md. A run of a family with its own analysis (empirical.studies.registry.ANALYSES:
chain, lego) gets that one. Its options: empirical.studies.options. See docs/analysis.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys

from disentangled.command_line import prepare_output_dir
from empirical.analysis.run_analysis import analyze_run
from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.runs.rundir import RunDir
from empirical.studies.options import AnalyzeOptions
from empirical.studies.registry import ANALYSES


def run(opts: AnalyzeOptions) -> int:
    use_cli_backend()
    run_dir = RunDir(opts.run_dir)
    # the run's family analyses it: the paper's (below) for assign_add, its own for the others
    analysis = ANALYSES.get(run_dir.read_config().task.family)
    if analysis is not None:
        module, _, function = analysis.partition(":")
        return int(getattr(importlib.import_module(module), function)(run_dir, opts) or 0)
    out = prepare_output_dir(opts.out_dir or run_dir.analysis_dir(opts.step))  # before the work
    result = analyze_run(run_dir.path, dataclasses.replace(
        opts, out_dir=out, progress=not opts.no_progress))  # fmt: skip
    if not opts.quiet:
        print((out / RunDir.SUMMARY_MD).read_text())
    print(f"wrote {out}/analysis.json, summary.md and {len(result.get('figures', []))} figures "
          f"in {result['seconds']:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
    return 0


main = command_main(AnalyzeOptions, run)

if __name__ == "__main__":
    sys.exit(main())
