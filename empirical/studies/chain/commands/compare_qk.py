"""`python -m empirical chain-compare-qk RUN_DIR`: compare-qk for a chain run (>= 3 layers)
against the two-hop theory, and the order in which the hops form (docs/compare_qk.md,
"Deeper models (chain runs)"). Writes chain_compare_qk.json, summary.md and
chain_compare_qk.png to RUN_DIR/analysis/chain_compare_qk (or --out) and prints the summary
(or, with --format json, the JSON). Its options: empirical.studies.chain.options.
"""

from __future__ import annotations

import sys

from disentangled.command_line import UsageError, prepare_output_dir
from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.report.writer import write_report
from empirical.runs.rundir import RunDir
from empirical.studies.chain.analysis.qk_compare import compare_chain_run
from empirical.studies.chain.analysis.qk_summary import json_text, report, summary_markdown
from empirical.studies.chain.options import ChainCompareQKOptions
from empirical.task.eval_sets import load_eval_sets


def run(opts: ChainCompareQKOptions) -> int:
    run_dir = RunDir(opts.run_dir)
    have = load_eval_sets(run_dir.eval_sets)
    missing = [s for s in (*opts.sets, opts.attention_set) if s not in have]
    if missing:
        raise UsageError(f"set {','.join(missing)}: the run's sets are {', '.join(have)}")
    out = prepare_output_dir(opts.out or run_dir.analysis_dir() / "chain_compare_qk")
    res = compare_chain_run(run_dir.path, opts)
    use_cli_backend()
    write_report(report(res), out)
    print(json_text(res) if opts.format == "json" else summary_markdown(res))
    print(f"wrote {out}/chain_compare_qk.json, summary.md, chain_compare_qk.png", file=sys.stderr)
    return 0


main = command_main(ChainCompareQKOptions, run)


if __name__ == "__main__":
    sys.exit(main())
