"""`python -m empirical trivial-rules --config CONFIG [--sets S ...]`: on each evaluation set of
the config's task and seed, the accuracy of rules that give a variable operand a value without
its own binding (the last assignment's, the first's, a uniformly drawn one's) beside the
label's own rule, as a markdown table. Its options: empirical.runs.options
(TrivialRulesOptions); the rules: empirical.analysis.trivial_rules. See docs/heads.md.
"""

from __future__ import annotations

import sys

from empirical.analysis.trivial_rules import markdown, rules_table
from empirical.config.options import command_main
from empirical.runs.options import TrivialRulesOptions


def run(opts: TrivialRulesOptions) -> int:
    cfg = opts.sample_config()
    print(markdown(rules_table(cfg.task, cfg.seed, list(opts.sets) or None)))
    return 0


main = command_main(TrivialRulesOptions, run)

if __name__ == "__main__":
    sys.exit(main())
