"""`python -m empirical codes RUN [RUN ...] [--out DIR]`: multi-head attention's latent codes
at `=` (docs/heads.md, "Latent codes"): for each run, a linear probe for the sequence's form
on held-out compositions with its controls, the codes' structure and (unless --no-timeline)
the probe over the snapshots against the spikes, written to RUN/codes; with several runs, a
summary by variant to --out. Its options: empirical.analysis.codes.options.
"""

from __future__ import annotations

import torch

from empirical.analysis.codes.options import CodesOptions
from empirical.analysis.codes.report import run_report, runs_report
from empirical.analysis.codes.run_codes import (
    association,
    codes_of_run,
    codes_of_runs,
    default_out,
)
from empirical.config.options import command_main
from empirical.report.writer import print_report, say, write_report


def run(opts: CodesOptions) -> int:
    if opts.threads:
        torch.set_num_threads(opts.threads)
    log = (lambda _m: None) if opts.quiet else say
    results = []
    for path in opts.runs:
        r = codes_of_run(path, opts.step, opts.n_train, opts.n_test, opts.timeline, opts.every,
                         opts.seed, progress=not opts.quiet, log=log)  # fmt: skip
        files = run_report(r)
        out = default_out([path], None)
        paths = write_report(files, out, opts.figures, opts.format)
        if len(opts.runs) == 1:
            print_report(files, paths, opts.quiet)
        else:
            log(f"wrote {out}")
        results.append(r)
    if len(opts.runs) > 1:
        files = runs_report(codes_of_runs(results), results, association(results))
        print_report(files, write_report(files, opts.out, opts.figures, opts.format), opts.quiet)
    return 0


main = command_main(CodesOptions, run)
