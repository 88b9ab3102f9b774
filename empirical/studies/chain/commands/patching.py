"""`python -m empirical chain-patching RUN_DIR [--set chain/1var_h2]`: which layer carries
which hop of a chain run, by activation patching (docs/chain.md). Writes
RUN_DIR/analysis/chain_patching_SET.json and .png (SET with `/` as `_`; both corruptions) and
prints the tables. Its options: empirical.studies.chain.options.
"""

from __future__ import annotations

import sys

from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.report.writer import write_report
from empirical.studies.chain.analysis.patching import CORRUPTIONS, chain_patching, report
from empirical.studies.chain.commands.attention import open_chain_run, weights_of
from empirical.studies.chain.options import ChainPatchingOptions


def run(opts: ChainPatchingOptions) -> int:
    run_dir, sets, model, vocab = open_chain_run(opts)
    tokens = sets[opts.set].tokens[: opts.n]
    results = [chain_patching(model, vocab, tokens, c, seed=opts.seed) for c in CORRUPTIONS]
    use_cli_backend()
    paths = write_report(report(opts.set, weights_of(opts), results, run_dir.label()),
                         run_dir.analysis_dir())  # fmt: skip
    for res in results:
        print(f"corrupted: the {res['corruption']} ({res['n']} sequences); share of the logit "
              "difference restored by patching one position")  # fmt: skip
        roles = res["roles"]
        print(" " * 18 + " ".join(f"{r[:14]:>14s}" for r in roles))
        for point in res["points"]:
            cells = " ".join(
                "             -" if (v := res["restored"][point].get(r)) is None
                else f"{round(v, 3) + 0.0:14.3f}" for r in roles
            )  # fmt: skip
            print(f"{point:18s}{cells}")
    stem = next(iter(paths.values())).with_suffix("")  # RUN_DIR/analysis/chain_..._SET
    print(f"wrote {stem}.json and .png", file=sys.stderr)
    return 0


main = command_main(ChainPatchingOptions, run)
