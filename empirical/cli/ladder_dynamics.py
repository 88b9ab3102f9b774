"""`python -m empirical ladder-dynamics [--config FILE] [OVERRIDES...] [--out DIR]`: the
dynamics ladder: Theorem C.1's model trained from its own weights as the theorem has it,
then with one constraint released at a time, each alone and cumulatively, over several seeds.
Writes ladder_dynamics.json, summary.md, ladder_dynamics.png and config.toml to --out
(default runs/ladder_dynamics) and prints summary.md. See docs/ladder.md.
"""

from __future__ import annotations

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    add_output_arguments,
    main_of,
    prepare_output_dir,
    print_outputs,
    say,
)
from empirical.report.figures import use_cli_backend


def build_parser():
    ap = parser("ladder-dynamics",
                "Train Theorem C.1's model with its constraints released one at a time.")
    ap.add_argument("overrides", nargs="*",
                    help="config overrides, dotted key=value (steps=100 sgd.lr=0.02)")  # fmt: skip
    ap.add_argument("--config", help="a ladder-dynamics config (TOML or JSON; default: "
                    "the built-in defaults, equal to configs/ladder_dynamics.toml)")  # fmt: skip
    ap.add_argument("--out", default="runs/ladder_dynamics",
                    help="output directory (default runs/ladder_dynamics)")  # fmt: skip
    add_output_arguments(ap)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    use_cli_backend()
    from empirical.bridge.ladder_dynamics.config import DynamicsConfig
    from empirical.config.io import load_config

    cfg = load_config(DynamicsConfig, args.config, args.overrides)  # ConfigError: one line
    out = prepare_output_dir(args.out)

    from empirical.bridge.ladder_dynamics.outputs import write_outputs
    from empirical.bridge.ladder_dynamics.train_variants import run_ladder_dynamics

    result = run_ladder_dynamics(cfg, progress=None if args.quiet else say)
    paths = write_outputs(result, out, cfg, fmt=args.format)
    print_outputs(paths, args.quiet)
    return 0


main = main_of(run)
