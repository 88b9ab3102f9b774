"""`python -m empirical at-step RUN ... --step S --out DIR`: each run's first S steps written as
the run of S steps (train.steps = S, its evaluations to S, its summary there), so that a
population whose training stopped before its last step is counted at a common step by
`claims --summarize --no-analysis`; refused for a schedule that depends on train.steps. Its
options: empirical.experiments.population.options (AtStepOptions). See docs/populations.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from empirical.config.options import command_main
from empirical.experiments.population.at_step import run_at_step
from empirical.experiments.population.options import AtStepOptions
from empirical.report.writer import say


def run(opts: AtStepOptions) -> int:
    for src in opts.runs:
        summary = run_at_step(src, Path(opts.out) / Path(src).name, opts.step)
        say(f"{Path(src).name}: the run of {summary['final_step']} steps, in {opts.out}")
    return 0


main = command_main(AtStepOptions, run)

if __name__ == "__main__":
    sys.exit(main())
