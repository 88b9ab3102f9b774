"""What the interventions can vary (`InterventionOptions`, which `intervene` takes) and the
command line of `python -m empirical intervene` (`InterveneOptions`: the same fields and the
command's own), declared once (empirical.config.options; docs/attribution.md, "`intervene`").
No torch here."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from disentangled.errors import UsageError
from empirical.bridge.interventions.conditions import CONDITIONS
from empirical.config.field_types import MUST, checked, fail, integer, number, split_list
from empirical.config.options import arg, options_class
from empirical.config.output_options import Format, Quiet, Threads
from empirical.runs.rundir import RunDir

DESCRIPTION = "Continuations from a checkpoint under interventions, replicated."
CONDITION_NAMES = tuple(CONDITIONS)
Count = integer(1, wording=MUST)


def _conditions(value: Any) -> tuple[str, ...]:
    """Some of CONDITION_NAMES: a list, or comma-separated."""
    names = split_list(value)
    if not isinstance(names, (list, tuple)) or not names or not set(names) <= set(CONDITIONS):
        raise fail(f"allowed {', '.join(CONDITION_NAMES)}", colon=True)
    return tuple(names)


@options_class("intervene", DESCRIPTION)
class InterventionOptions:
    """Everything `intervene` can vary; each field but the last three is also a flag."""

    checkpoint: str = arg(help="a training checkpoint of the run", raw=True, metavar="C")
    steps: Count = arg(2000, help="steps per continuation")
    replicates: Count = arg(20, help="data orders per condition")
    conditions: checked(tuple, _conditions) = arg(
        CONDITION_NAMES, help=f"comma-separated, of {', '.join(CONDITION_NAMES)}",
        default_text="all")
    eval_every: Count = arg(50, help="steps between evaluations")
    eval_size: Count = arg(1000, help="sequences per set")
    threshold: number(0, 1, lo_open=True) = arg(0.9, help="the jump's accuracy")
    jump_set: str = arg("1var/ind", help="the set whose rise is the jump", raw=True)
    device: str = arg("cpu", help="cpu, cuda, cuda:N", raw=True)
    label: str = arg("", help="a device label for summary.md", raw=True, default_text="")
    progress: bool = True
    g1_batch: int = 2048  # compare-qk's 1-var batch for the measured (a, b)
    g1_population: int = 16384  # sequences of the sampled G1 population


@options_class("intervene", DESCRIPTION)
class InterveneOptions(Format, Quiet, Threads, InterventionOptions):
    """`python -m empirical intervene RUN_DIR --checkpoint C [...]`: the interventions'
    options and the command's."""

    run_dir: str = arg(help="the run (its config and evaluation sets)", positional=True)
    out: str | None = arg(None, help="output directory (default RUN_DIR/interventions)", raw=True)

    @cached_property
    def run_config(self):
        """The run's config (two layers), read once."""
        return RunDir(self.run_dir).require_run().read_two_layer_config("intervene")

    def check(self) -> None:
        """The run exists, has two layers and, for project_g1, one head; before the output
        directory is made."""
        if self.run_config.model.n_heads != 1 and "project_g1" in self.conditions:
            raise UsageError("project_g1 needs a one-head model")


@options_class("pool-interventions", "Pool the interventions of several checkpoints (seeds).")
class PoolInterventionsOptions(Quiet):
    """`python -m empirical pool-interventions DIR ... --out OUT [--names N ...]`: each DIR an
    `intervene` output (its interventions.json)."""

    dirs: tuple[str, ...] = arg(help="intervene outputs (each with interventions.json)",
                                positional=True, nargs="+", metavar="DIR", raw=True)
    names: tuple[str, ...] | None = arg(None, nargs="+", metavar="NAME", raw=True,
                                        help="a name per DIR (default: the DIRs' names)")
    out: str = arg(help="output directory", raw=True)

    def check(self) -> None:
        """Every DIR holds an interventions.json; one name per DIR."""
        for d in self.dirs:
            if not (Path(d) / "interventions.json").is_file():
                raise UsageError(f"DIR = {d!r}: no interventions.json there")
        if self.names is not None and len(self.names) != len(self.dirs):
            raise UsageError(f"--names: {len(self.names)} names for {len(self.dirs)} DIRs")
