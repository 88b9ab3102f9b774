"""`python -m empirical recount CLAIMS_DIR ... [--paper-run RUN] [--comparison DIR]`: published
claims.json files brought to the present form from what they hold (their members' directories
are not needed): the spike claims split into presence and timing, ranks instead of
percentiles, every share's lean; the paper's run re-placed, its jump steps read from the
imported run. Each directory gets claims.json, claims.md and figures again; with
--comparison, the populations' comparison. Its options: empirical.experiments.population.
options (RecountOptions). See docs/populations.md.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from empirical.config.options import command_argv, command_main
from empirical.experiments.population.compare import compare_populations, comparison_report
from empirical.experiments.population.options import RecountOptions
from empirical.experiments.population.recount import recount_claims
from empirical.experiments.population.report import claims_report
from empirical.report.figures import use_cli_backend
from empirical.report.provenance import provenance
from empirical.report.writer import say, write_report


def run(opts: RecountOptions) -> int:
    use_cli_backend()
    origin = provenance("python -m empirical recount " + shlex.join(command_argv(opts) or ()))
    done = {}
    for d in opts.claims_dirs:
        old = json.loads((Path(d) / "claims.json").read_text())
        claims = {**recount_claims(old, opts.paper_run), "recount_provenance": origin}
        paths = write_report(claims_report(claims, opts.format), d, opts.figures, opts.format)
        say(f"wrote {', '.join(str(p) for p in paths.values())}")
        done[claims["variant"]] = claims
    if opts.comparison is not None:
        cmp = {**compare_populations(done), "provenance": origin}
        paths = write_report(comparison_report(cmp, done, opts.format), opts.comparison,
                             opts.figures, opts.format)  # fmt: skip
        say(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


main = command_main(RecountOptions, run)
