"""What `grid` and `claims` share: the options of a grid config, and the grid config of the
command line, with its --seeds, --only and --max-batch applied and checked before anything
is trained."""

from __future__ import annotations

import argparse
import dataclasses

from empirical.config.command_line import UsageError, overrides_from_lists


def add_grid_arguments(ap: argparse.ArgumentParser, member: str, only: str, out: str) -> None:
    """The grid config's options; `member`, `only`, `out`: the command's words for them."""
    ap.add_argument("overrides", nargs="*", help=f"run-config overrides for every {member}")
    ap.add_argument("--config", required=True, help="grid config: a run config plus [grid]")
    ap.add_argument("--seeds", nargs="+", metavar="SEED", help="seeds (default: the config's)")
    ap.add_argument("--only", nargs="+", metavar="VARIANT", help=only)
    ap.add_argument("--max-batch", type=int, help="members per batched model (0: no limit)")
    ap.add_argument("--out", help=out)
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def grid_config_of(args: argparse.Namespace):
    """(base RunConfig, GridSpec) of `--config` and the overrides, restricted to `--seeds`
    and `--only` and cut into batches of `--max-batch` members; UsageError for a seed that is
    no integer or an unknown variant."""
    overrides_from_lists(args, ("seeds", "only"))
    from empirical.experiments.sweep.grid import load_grid_config  # torch-free

    base, spec = load_grid_config(args.config, args.overrides)
    if args.seeds is not None:
        try:
            seeds = [int(s) for s in args.seeds]
        except ValueError:
            raise UsageError(f"--seeds {' '.join(args.seeds)}: seeds are integers") from None
        spec = dataclasses.replace(spec, seeds=seeds)  # validated again
    if args.only is not None:
        unknown = [v for v in args.only if v not in spec.variants]
        if unknown:
            raise UsageError(
                f"--only: unknown variant(s) {', '.join(unknown)}; the config has "
                f"{', '.join(spec.variants)}"
            )
        spec = dataclasses.replace(
            spec, variants={k: v for k, v in spec.variants.items() if k in args.only}
        )
    if args.max_batch is not None:
        spec = dataclasses.replace(spec, max_batch=args.max_batch)  # validated again
    return base, spec
