"""`python -m empirical race [OVERRIDES...] [--only NAME ...] [--seeds S ...] [--out DIR]`: the
race criterion of docs/race.md on its configurations (step-0 quantities and the dynamics
ladder's outcome per seed; one constant tau fitted, every configuration predicted). Resumes
from OUT/race_state.json; writes race.json, summary.md and race.png to --out (default
runs/race) and prints summary.md. OVERRIDES: dotted dynamics-ladder fields for every
configuration.
"""

from __future__ import annotations

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    UsageError,
    add_output_arguments,
    main_of,
    overrides_from_lists,
    prepare_output_dir,
    print_outputs,
    say,
)


def build_parser():
    ap = parser("race", "Test the race criterion (docs/race.md) on the ladder's configurations.")
    ap.add_argument(
        "overrides", nargs="*", help="dynamics-ladder overrides for every configuration (steps=100)"
    )
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="only these configurations (as in race.json)")  # fmt: skip
    ap.add_argument("--seeds", nargs="+", metavar="S",
                    help="every configuration's seeds (default: 0 1 2)")  # fmt: skip
    ap.add_argument("--out", default="runs/race", help="output directory (default runs/race)")
    add_output_arguments(ap)
    return ap


def _seeds(values: list[str] | None) -> list[int] | None:
    if values is None:
        return None
    try:
        seeds = [int(v) for v in values]
    except ValueError:
        raise UsageError(f"--seeds {' '.join(values)}: allowed: integers >= 0") from None
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds {' '.join(values)}: allowed: distinct integers >= 0")
    return seeds


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    overrides_from_lists(args, ("only", "seeds"))
    seeds = _seeds(args.seeds)
    from empirical.bridge.race.configs import dynamics_config, select

    configs = select(args.only)  # ConfigError: one line
    for rc in configs:  # every override checked before anything runs
        dynamics_config(rc, list(args.overrides))
    out = prepare_output_dir(args.out)

    from empirical.bridge.race.outputs import write_outputs
    from empirical.bridge.race.run import run_race
    from empirical.report.figures import use_cli_backend

    use_cli_backend()

    result = run_race(configs, out, list(args.overrides), seeds, progress=not args.quiet,
                      say=(lambda _m: None) if args.quiet else say)  # fmt: skip
    paths = write_outputs(result, out, fmt=args.format)
    print_outputs(paths, args.quiet)
    return 0


main = main_of(run)
