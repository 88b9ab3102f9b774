"""`python -m empirical ladder-dynamics [--config FILE] [OVERRIDES...] [--out DIR]`: the
dynamics ladder: Theorem C.1's model trained from its own weights as the theorem has it,
then with one constraint released at a time, each alone and cumulatively, over several seeds.
Writes ladder_dynamics.json, summary.md, ladder_dynamics.png and config.toml to --out
(default runs/ladder_dynamics) and prints summary.md. Its options:
empirical.bridge.ladder_dynamics.options. See docs/ladder.md.
"""

from __future__ import annotations

from disentangled.command_line import prepare_output_dir
from empirical.bridge.ladder_dynamics.options import LadderDynamicsOptions
from empirical.bridge.ladder_dynamics.outputs import report
from empirical.bridge.ladder_dynamics.train_variants import run_ladder_dynamics
from empirical.config.options import command_main
from empirical.report.writer import print_report, say, write_report


def run(opts: LadderDynamicsOptions) -> int:
    cfg = opts.dynamics_config()
    out = prepare_output_dir(opts.out)
    result = run_ladder_dynamics(cfg, progress=None if opts.quiet else say)
    files = report(result, cfg)
    print_report(files, write_report(files, out, fmt=opts.format), opts.quiet)
    return 0


main = command_main(LadderDynamicsOptions, run)
