"""`python -m empirical pool-interventions DIR ... --out OUT [--names NAME ...]`: the
interventions of several checkpoints (each DIR an `intervene` output: the population's seeds
before their spikes) side by side and pooled per condition; writes OUT/pooled.json and
OUT/summary.md and prints summary.md. Its options: empirical.bridge.interventions.options
(PoolInterventionsOptions). See docs/attribution.md.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from disentangled.command_line import prepare_output_dir
from empirical.bridge.interventions.options import PoolInterventionsOptions
from empirical.bridge.interventions.pooled import pool, pooled_report, read_interventions
from empirical.config.options import command_argv, command_main
from empirical.report.provenance import provenance
from empirical.report.writer import print_report, write_report


def run(opts: PoolInterventionsOptions) -> int:
    out = prepare_output_dir(opts.out)
    names = list(opts.names) if opts.names else [Path(d).name for d in opts.dirs]
    pooled = pool([read_interventions(d) for d in opts.dirs], names)
    pooled["provenance"] = provenance("python -m empirical pool-interventions "
                                      + shlex.join(command_argv(opts) or ()))  # fmt: skip
    made = pooled_report(pooled)
    print_report(made, write_report(made, out), opts.quiet)
    return 0


main = command_main(PoolInterventionsOptions, run)

if __name__ == "__main__":
    sys.exit(main())
