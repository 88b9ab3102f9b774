"""What a comparison can vary (`Options`, which `compare_run` takes) and the command line of
`python -m empirical compare-qk` (`CompareQKOptions`: the same fields and the command's own),
declared once (empirical.config.options; docs/compare_qk.md). No torch here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from disentangled.command_line import check_output_dir
from empirical.bridge.compare_qk.windows import parse_windows
from empirical.config.field_types import MUST, Flag, choice, integer, parsed, positives
from empirical.config.options import arg, options_class
from empirical.config.output_options import Figures, Output, Threads
from empirical.runs.rundir import RunDir

# the frames a comparison reads its matrices in (empirical.bridge.compare_qk.frames)
FRAMES = ("dual", "score", "orth", "raw")
DEFAULT_FRAME = "dual"
ORDERS = ("fixed", "mixed")
DISTRIBUTIONS = ("unrestricted", "train")


def _steps(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"expected comma-separated integers, got {text!r}") from None


Count = integer(1, wording=MUST)


@options_class("compare-qk", "Theorem C.1's predicted layer-2 QK update vs the observed one.")
class Options:
    """Everything `compare_run` can vary; each field is also a flag of `compare-qk`."""

    steps: parsed(_steps, list[int] | None) = arg(
        None, help="snapshot steps, e.g. 0,1000,1250 (default: all)", raw=True)
    every: Count = arg(1, help="use every N-th snapshot")
    batch_size: Count = arg(4096, help="1-var sequences for gradients and attention measures")
    order: choice(*ORDERS) = arg(
        "mixed", help="1-var operand order of the batch and of G1: mixed (either order, as the "
        "run trains) or fixed (variable second, the theorem's)")
    distribution: choice(*DISTRIBUTIONS) = arg(
        "train", help="1-var data of the batch and of G1: the run's training restrictions "
        "(train) or every variable at every position (unrestricted, the theorem's)")
    frame: choice(*FRAMES) = arg(
        DEFAULT_FRAME, help="headline frame: dual (reads a label-space gradient back exactly), "
        "score (score change vs G1 pushed through the Gram matrices; exact), orth / raw (legacy "
        "readings against G1 itself); every frame is in the JSON")
    null_draws: Count = 1000  # sign-randomised null: random sign patterns per snapshot
    all_assigned: Flag = arg(
        False, help="assign every variable in each sequence (the theorem's sequences)")
    ab_from: choice("operands", "values") = arg(
        "operands", help="measure a from `=`'s attention to the operand positions or values")
    layout: choice("averaged", "packed") = arg(
        "averaged", help="prediction's pos0..pos{L-5} columns: averaged (random layouts) or "
        "packed")
    seed: integer(0, wording=MUST) = arg(0, help="data seed of the comparison batch")
    windows: parsed(parse_windows, list[tuple[str, int, int]] | None) = arg(
        None, help="training windows, e.g. plateau1=4801:5301,spike=5301:5401 (lo <= step <= "
        "hi; default: from the detected phases)", raw=True)
    prediction: choice("auto", "closed", "population") = arg(
        "auto", help="G1: the closed form (needs 2K <= L-4), the theorem's model on a sampled "
        "population, or auto (closed where it exists)")
    prediction_size: Count = arg(
        65536, help="sequences of the sampled population (--prediction population)")
    one_step: Flag = arg(True, help="skip the one-step test")
    one_step_at: integer(0, wording=MUST) | None = arg(
        None, help="snapshot of the one-step test (default: the last before the first spike's "
        "jump, else the first with 0var/ind >= 0.9)")
    one_step_lrs: positives(nan_ok=True) = arg(
        (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0), help="plain-SGD learning rates")
    one_step_steps: Count = arg(1, help="SGD steps per lr")
    score_steps: positives(nan_ok=True) = arg(
        (0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
        help="sizes t of the non-SGD steps: RMS change of `=`'s layer-2 scores on the batch")
    one_step_order: choice(*ORDERS) = arg(
        "mixed", help="operand order of the one-step test's 1-var data (mixed: as the task)")
    one_step_distribution: choice(*DISTRIBUTIONS) = arg(
        "train", help="1-var data of the one-step test (train: the run's training distribution)")
    eval_size: integer(0, wording=MUST) | None = arg(
        5000, help="sequences per evaluation set in the one-step test (0: all)")
    progress: bool = True


@options_class("compare-qk", "Theorem C.1's predicted layer-2 QK update vs the observed one.")
class CompareQKOptions(Output, Figures, Threads, Options):
    """`python -m empirical compare-qk RUN_DIR [...]`: a comparison's options and the command's
    (--threads, --no-figures, --quiet, --format: empirical.config.output_options)."""

    run_dir: str = arg(help="a run directory written by `python -m empirical train`",
                       positional=True)  # fmt: skip
    out: str | None = arg(None, help="output directory (default RUN_DIR/compare_qk)")

    def check(self) -> None:
        """The run exists and has two layers, and the output directory can be made, before
        anything is written."""
        run = RunDir(self.run_dir).require_run()
        run.read_two_layer_config("compare-qk")
        check_output_dir(self.out_dir)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else RunDir(self.run_dir).compare_qk_dir

    def library_options(self) -> Options:
        """The comparison's own options (what compare_run records), progress unless --quiet
        and --eval-size 0 as None (all sequences)."""
        mine = {f.name: getattr(self, f.name) for f in dataclasses.fields(Options)}
        return Options(**{**mine, "progress": not self.quiet, "eval_size": self.eval_size or None})
