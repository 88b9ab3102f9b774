"""`python -m empirical race [OVERRIDES...] [--only NAME ...] [--seeds S ...] [--out DIR]`: the
race criterion of docs/race.md on its configurations (step-0 quantities and the dynamics
ladder's outcome per seed; one constant tau fitted, every configuration predicted). Resumes
from OUT/race_state.json; writes race.json, summary.md and race.png to --out (default
runs/race) and prints summary.md. OVERRIDES: dotted dynamics-ladder fields for every
configuration. Its options: empirical.bridge.race.options.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from disentangled.command_line import prepare_output_dir
from empirical.bridge.race.options import RaceOptions
from empirical.bridge.race.outputs import report
from empirical.bridge.race.run import rescore, run_race
from empirical.config.options import command_argv, command_main
from empirical.report.provenance import provenance
from empirical.report.writer import print_report, say, write_report


def run(opts: RaceOptions) -> int:
    out = prepare_output_dir(opts.out)
    seeds = list(opts.seeds) if opts.seeds is not None else None
    command = "python -m empirical race " + shlex.join(command_argv(opts) or ())
    if opts.rescore is not None:
        result = rescore(json.loads(Path(opts.rescore).read_text()))
        result["provenance"] = provenance(command)
        files = report(result)
        print_report(files, write_report(files, out, fmt=opts.format), opts.quiet)
        return 0
    result = run_race(opts.configurations(), out, list(opts.overrides), seeds,
                      progress=not opts.quiet, say=(lambda _m: None) if opts.quiet else say,
                      predict_only=opts.predict_only, command=command)
    files = report(result)
    print_report(files, write_report(files, out, fmt=opts.format), opts.quiet)
    return 0


main = command_main(RaceOptions, run)
