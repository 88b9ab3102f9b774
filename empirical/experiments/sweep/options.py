"""The command lines of `python -m empirical sweep` and `grid` (and, with
empirical.experiments.population.options, `claims`), each option declared once
(empirical.config.options; docs/sweep.md): how batches run as jobs (`ExecutorOptions`), what
the three commands share (`BatchOptions`), the sweep's (`SweepOptions`), a grid config's
(`GridConfigOptions`) and the grid's (`GridOptions`). Every check, the config loaded with the
command's changes included, runs before anything is trained or torch is imported; no torch
here.

    opts = parse_options(GridOptions, ["--config", "configs/explore_generalization.toml"])
    base, spec = opts.grid          # the config, restricted to --seeds / --only / --max-batch
"""

from __future__ import annotations

import dataclasses
import shutil
from functools import cached_property
from pathlib import Path
from typing import Any

from disentangled.errors import UsageError
from empirical.config.field_types import MUST, Flag, checked, choice, fail, integer, number
from empirical.config.options import arg, flag_of, options_class
from empirical.config.output_options import Format
from empirical.experiments.sweep.spec import (
    GridSpec,
    MaxBatch,
    SweepSpec,
    Target,
    default_sweep_dir,
    load_grid_config,
    load_sweep_config,
    parse_param,
)
from empirical.runs.config import RunConfig, config_field

EXECUTORS = ("local", "slurm")


def require_submitit():
    """The submitit module (an optional dependency), or a UsageError saying how to install it."""
    try:
        import submitit
    except ImportError:
        raise UsageError("--executor needs submitit, an optional dependency: pip install -e "
                         "'.[cluster]' (or pip install submitit)") from None
    return submitit


def check_slurm() -> None:
    """A UsageError unless SLURM's commands are on this machine's PATH."""
    missing = [c for c in ("sbatch", "srun") if not shutil.which(c)]
    if missing:
        raise UsageError(f"--executor slurm: {' and '.join(missing)} not found: submit from a "
                         "SLURM login node (or use --executor local on this machine)")


def _key_values(words: Any) -> tuple[str, ...]:
    words = (words,) if isinstance(words, str) else tuple(words)
    for word in words:
        if not isinstance(word, str) or "=" not in word:
            which = f"{word!r}: " if len(words) > 1 else ""
            raise fail(f"{which}write KEY=VALUE (e.g. account=myproject)", colon=True)
    return words


@options_class("", "many machines (submitit: pip install -e '.[cluster]'; docs/sweep.md)")
class ExecutorOptions:
    """How a sweep's or a grid's batches run as jobs (empirical.experiments.sweep.cluster,
    through submitit; docs/sweep.md, "Many machines"); `kind` None: trained in this process."""

    kind: choice(*EXECUTORS) | None = arg(
        None, flag="--executor", metavar="{" + ",".join(EXECUTORS) + "}",
        help="train each batch of members as a job: on SLURM, or as processes on this machine "
        "(which waits for them); the summary is gathered afterwards")
    members_per_job: integer(1, wording=MUST) | None = arg(
        None, metavar="N", help="at most N members per job (default: --max-batch, else a whole "
        "batch)")
    partition: str = arg("", flag="--slurm-partition", metavar="P", raw=True, default_text="",
                         help="SLURM partition (default: the cluster's)")
    time_min: integer(1, wording=MUST) = arg(240, flag="--job-time", metavar="MIN",
                                             help="time limit per job, minutes")
    gpus_per_job: integer(0, wording=MUST) | None = arg(
        None, metavar="G", help="GPUs per job (SLURM default 1; local: every GPU of the "
        "machine, shared)")
    cpus_per_job: integer(1, wording=MUST) = arg(2, metavar="C", help="CPUs per job")
    mem_gb: number(0, lo_open=True, message="must be a number > 0") | None = arg(
        None, metavar="GB", help="memory per job (SLURM; default: the partition's)")
    slurm_args: checked(tuple, _key_values) = arg(
        (), flag="--slurm-arg", repeat=True, raw=True, metavar="KEY=VALUE",
        help="extra sbatch parameter, e.g. account=myproject or qos=short (repeatable)")
    wait: Flag = arg(False, help="SLURM: wait for the jobs, then summarize")
    force: Flag = arg(False, help="also submit members claimed by a job that may still be "
                      "running")  # fmt: skip

    @property
    def waits(self) -> bool:
        return self.kind == "local" or self.wait

    def executor_options(self) -> ExecutorOptions | None:
        """These options, if the batches run as jobs (None: trained in this process)."""
        return self if self.kind is not None else None

    def check_executor(self) -> None:
        """The flags of an executor only with --executor; submitit (and SLURM's commands for
        --executor slurm) present: checked before anything is trained or submitted."""
        if self.kind is None:
            only = ("members_per_job", "partition", "gpus_per_job", "mem_gb", "slurm_args",
                    "wait", "force")  # fmt: skip
            given = [flag_of(type(self), name) for name in only if getattr(self, name)]
            if given:
                raise UsageError(f"{', '.join(given)}: only with --executor slurm or local")
            return
        if self.kind == "local" and (self.partition or self.slurm_args):
            raise UsageError("--slurm-partition / --slurm-arg apply to --executor slurm only")
        require_submitit()
        if self.kind == "slurm":
            check_slurm()


def is_override(word: Any) -> bool:
    """A run-config override (`KEY=VALUE`) given after a list option (`--seeds 0 1
    train.steps=100`); a key with `@` is not one (the race's `embeddings@lr=1e-4`)."""
    return isinstance(word, str) and "=" in word and "@" not in word.split("=", 1)[0]


def _seeds(words: Any) -> tuple[int | str, ...]:
    """Integer seeds, and the overrides given after them (moved by `BatchOptions.split`)."""
    out: list[int | str] = []
    for word in (words,) if isinstance(words, (str, int)) else tuple(words):
        if is_override(word) or (isinstance(word, int) and not isinstance(word, bool)):
            out.append(word)
        elif isinstance(word, str) and word.strip().lstrip("+-").isdigit():
            out.append(int(word))
        else:
            raise fail(f"{word!r} is not an integer seed", colon=True)
    return tuple(out)


def _words(words: Any) -> tuple[str, ...]:
    return (words,) if isinstance(words, str) else tuple(words)


@options_class("", "what sweep, grid and claims share")
class BatchOptions(Format, ExecutorOptions):
    """What `sweep`, `grid` and `claims` share: run-config overrides for every member, the
    seeds, the batching, the progress, the members' figures, --summarize and the executor."""

    overrides: checked(tuple, _words) = arg(
        (), positional=True, nargs="*", metavar="KEY=VALUE",
        help="run-config overrides for every member, e.g. train.steps=2000")
    seeds: checked(tuple, _seeds) | None = arg(
        None, nargs="+", metavar="SEED", raw=True,
        help="seeds: every value or variant is trained for each (default: the config's)")
    max_batch: MaxBatch | None = arg(
        None, help="members per batched model (0: no limit; default: the config's)")
    summarize: Flag = arg(
        False, help="train nothing: summarize the finished members again (sweep: results.json, "
        "summary.md and the figure; grid: grid.json, grid.md, grid.png; claims: the claims, "
        "analysing the members that need it)")
    progress: Flag = arg(True, help="no progress bar (a line per evaluation instead)")
    member_figures: Flag = arg(
        True, help="the members draw no training_curves.png (about a second each on a CPU); "
        "the command's own files are written")

    def split(self) -> tuple[list[str], list[int] | None]:
        """(the overrides, the seeds): a KEY=VALUE word given after --seeds is an override
        (in the order given)."""
        seeds = None if self.seeds is None else [s for s in self.seeds if isinstance(s, int)]
        moved = [s for s in self.seeds or () if isinstance(s, str)]
        return [*self.overrides, *moved], seeds

    def check_batches(self) -> None:
        """--summarize trains nothing: no executor with it; the executor's flags
        (`check_executor`)."""
        if self.summarize and self.kind is not None:
            raise UsageError("--summarize trains nothing: give it without --executor")
        self.check_executor()


SWEEP = ("Train one model per (swept value, seed), batched as one stacked model, and plot the "
         "final accuracy against the swept value with its threshold (Figure 3).")  # fmt: skip


@options_class("sweep", SWEEP, field_hint=config_field)
class SweepOptions(BatchOptions):
    """`python -m empirical sweep --config C [...]` (docs/sweep.md)."""

    config: str | None = arg(None, raw=True, help="sweep config: a run config plus a [sweep] table")
    param: str | None = arg(
        None, raw=True, metavar="KEY=V1,V2,...",
        help="swept field and values (a dotted run-config field, or the alias pair_fraction = "
        "task.train_pair_fraction = 1 - task.held_out_fraction); ';' separates values that "
        "contain commas")
    metric: str | None = arg(None, raw=True,
                             help="accuracy to plot and threshold (default: the config's)")
    target: Target | None = arg(None, help="threshold target accuracy (default: the config's)")
    out: str | None = arg(None, raw=True, help="sweep directory (default runs/sweep/NAME)")
    at_step: integer(0, wording=MUST) | None = arg(
        None, metavar="N", help="with --summarize: the summary of every member's evaluation at "
        "step N (members still training included) in results_step_N.json / summary_step_N.md, "
        "beside the final one")
    merge: checked(tuple, _words) | None = arg(
        None, nargs="+", raw=True, metavar="RESULTS_JSON",
        help="no training: pool the members of these results.json files of one sweep (e.g. "
        "seeds trained on different machines) into --out (empirical/experiments/sweep/merge.py)")

    @cached_property
    def sweep(self) -> tuple[RunConfig, SweepSpec]:
        """(base run config, sweep spec): the config with the command's changes."""
        overrides, seeds = self.split()
        base, spec = load_sweep_config(self.config, overrides)
        changes: dict[str, Any] = {}
        if self.param:
            changes["param"], changes["values"] = parse_param(self.param)
        if seeds is not None:
            changes["seeds"] = seeds
        for name in ("metric", "target", "max_batch"):
            if getattr(self, name) is not None:
                changes[name] = getattr(self, name)
        return base, dataclasses.replace(spec, **changes)  # validated again

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else default_sweep_dir(self.sweep[0])

    def check(self) -> None:
        """--merge's company; the config with the changes; --at-step; the executor."""
        if self.merge:
            if not self.out:
                raise UsageError("--merge needs --out DIR (where the merged summary goes)")
            if self.config or self.overrides or self.summarize or self.at_step is not None:
                raise UsageError("--merge takes result files and --out only (no --config, "
                                 "overrides, --summarize or --at-step)")  # fmt: skip
            return
        base, _ = self.sweep
        if self.at_step is not None and not self.summarize:
            raise UsageError(f"--at-step {self.at_step} summarizes an earlier evaluation: use it "
                             "with --summarize (no training)")  # fmt: skip
        if self.at_step is not None and self.at_step > base.train.steps:
            raise UsageError(f"--at-step {self.at_step}: allowed 0..train.steps = "
                             f"{base.train.steps} (an evaluation step of the members)")
        self.check_batches()


@options_class("", "a grid config and its variants")
class GridConfigOptions(BatchOptions):
    """What `grid` and `claims` share: a grid config, restricted to --seeds and --only and
    cut into batches of --max-batch members (`grid`)."""

    config: str = arg(help="grid config: a run config plus [grid]", raw=True)
    only: checked(tuple, _words) | None = arg(None, nargs="+", metavar="VARIANT", raw=True,
                                              help="only these variants")  # fmt: skip

    @cached_property
    def grid(self) -> tuple[RunConfig, GridSpec]:
        """(base run config, grid spec); a KEY=VALUE word after --only is an override too."""
        overrides, seeds = self.split()
        only = None if self.only is None else [v for v in self.only if not is_override(v)]
        overrides += [v for v in self.only or () if is_override(v)]
        base, spec = load_grid_config(self.config, overrides)
        if seeds is not None:
            spec = dataclasses.replace(spec, seeds=seeds)  # validated again
        if only is not None:
            unknown = [v for v in only if v not in spec.variants]
            if unknown:
                raise UsageError(f"--only: unknown variant(s) {', '.join(unknown)}; the config "
                                 f"has {', '.join(spec.variants)}")  # fmt: skip
            variants = {k: v for k, v in spec.variants.items() if k in only}
            spec = dataclasses.replace(spec, variants=variants)
        if self.max_batch is not None:
            spec = dataclasses.replace(spec, max_batch=self.max_batch)
        return base, spec

    def check(self) -> None:
        """The grid config with the changes, then the executor."""
        _ = self.grid  # loaded and checked once (cached)
        self.check_batches()


GRID = ("Train every (variant, seed) of a grid config as batched models and tabulate the final "
        "accuracy of every evaluation set per variant.")  # fmt: skip


@options_class("grid", GRID, field_hint=config_field)
class GridOptions(GridConfigOptions):
    """`python -m empirical grid --config G [...]` (docs/sweep.md, "Grids")."""

    out: str | None = arg(None, raw=True, help="grid directory (default runs/grid/NAME)")

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("runs") / "grid" / self.grid[0].name
