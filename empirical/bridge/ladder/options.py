"""What the assumption ladder can vary (`LadderOptions`, which `run_ladder` takes) and the
command line of `python -m empirical ladder` (`LadderCommandOptions`: the same fields and the
command's own), declared once (empirical.config.options; docs/ladder.md). No torch here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from disentangled.command_line import check_output_dir
from empirical.config.field_types import MUST, integer, positives
from empirical.config.options import arg, options_class
from empirical.config.output_options import Output, Threads
from empirical.runs.rundir import RunDir

DEFAULT_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
Count = integer(1, wording=MUST)
DESCRIPTION = "The assumption ladder from Theorem C.1's model to a trained snapshot."


@options_class("ladder", DESCRIPTION)
class LadderOptions:
    """Everything `run_ladder` can vary; the fields with a flag are flags of `ladder` too.
    hooked_check: sequences on which each rung's forward is checked against its model's own
    hooked forward; eval_sets: the evaluation sets of the one-step test (None: all)."""

    step: integer(0, wording=MUST) | None = arg(
        None, help="snapshot step (default: the last before the first spike's jump, as "
        "compare-qk picks it)")
    batch_size: Count = arg(4096, help="1-var sequences per rung's gradient")
    prediction_size: Count = arg(
        65536, help="sequences of G1's sampled population (compare-qk's)")
    eval_size: integer(0, wording=MUST) | None = arg(
        1000, help="sequences per evaluation set in the one-step test (0: all)")
    grid: positives() = arg(DEFAULT_GRID, help="one-step sizes: RMS change of `=`'s layer-2 scores")
    seed: integer(0, wording=MUST) = arg(0, help="data seed")
    hooked_check: integer(0, wording=MUST) = 64
    eval_sets: tuple[str, ...] | None = None
    progress: bool = True


@options_class("ladder", DESCRIPTION)
class LadderCommandOptions(Output, Threads, LadderOptions):
    """`python -m empirical ladder RUN_DIR [...]`: the ladder's options and the command's
    (--threads, --quiet, --format: empirical.config.output_options)."""

    run_dir: str = arg(help="a run directory with snapshots", positional=True)
    out: str | None = arg(None, help="output directory (default RUN_DIR/ladder/step_NNNNNN)")

    def check(self) -> None:
        """The run exists and has two layers, and the output directory can be made."""
        run = RunDir(self.run_dir).require_run()
        run.read_two_layer_config("ladder")
        check_output_dir(self.out or run.path / "ladder")

    def out_dir(self, step: int) -> Path:
        """--out, else RUN_DIR/ladder/step_NNNNNN of the snapshot `step`."""
        if self.out:
            return Path(self.out)
        return RunDir(self.run_dir).path / "ladder" / f"step_{step:06d}"

    def library_options(self) -> LadderOptions:
        """The ladder's own options (what run_ladder records): progress unless --quiet, and
        --eval-size 0 as None (all sequences)."""
        mine = {f.name: getattr(self, f.name) for f in dataclasses.fields(LadderOptions)}
        return LadderOptions(
            **{**mine, "progress": not self.quiet, "eval_size": self.eval_size or None})
