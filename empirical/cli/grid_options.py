"""What `grid` and `claims` share: the grid config of the command line, with its --seeds,
--only and --max-batch applied and checked before anything is trained."""

from __future__ import annotations

import argparse
import dataclasses

from empirical.cli.common import UsageError, overrides_from_lists


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
