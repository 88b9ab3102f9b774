"""What an attribution can vary (`AttributionOptions`, which `attribute_window` takes) and the
command line of `python -m empirical attribute` (`AttributeOptions`: the same fields and the
command's own), declared once (empirical.config.options; docs/attribution.md). No torch here.
"""

from __future__ import annotations

from typing import Any

from empirical.config.field_types import MUST, Flag, checked, choice, fail, integer, names
from empirical.config.options import arg, options_class
from empirical.config.output_options import Figures, Format, Quiet, Threads
from empirical.runs.rundir import RunDir

DESCRIPTION = "Attribute a window's loss and score changes to parameter groups."
# one optimiser step's part from the gradients along it: at its start (first order), the mean
# of its two ends, at its middle, Simpson (start + 4 mid + end) / 6, composite Simpson
STEP_RULES = ("start", "trapezoid", "midpoint", "simpson", "simpson4", "simpson8")
NULL_DRAWS = 2000  # random sign patterns of each first-order sign null
Count = integer(1, wording=MUST)


def check_window(start: int, stop: int) -> None:
    """A ValueError unless steps start..stop are a window (0 <= A < B)."""
    if not 0 <= start < stop:
        raise ValueError("needs 0 <= A < B")


def _window(word: Any) -> tuple[int, int]:
    """`A:B` (or a pair) as (A, B), checked (a ValueError says why not)."""
    if isinstance(word, str):
        try:
            word = tuple(int(x) for x in word.split(":"))
        except ValueError:
            raise ValueError(f"expected A:B (two steps), got {word!r}") from None
    if not isinstance(word, (tuple, list)) or len(word) != 2:
        raise ValueError(f"expected A:B (two steps), got {word!r}")
    check_window(*word)
    return int(word[0]), int(word[1])


def _windows(words: Any) -> tuple[tuple[int, int], ...]:
    words = [words] if isinstance(words, str) else list(words)
    out = []
    for word in words:
        try:
            out.append(_window(word))
        except ValueError as exc:
            which = f"{word}: " if len(words) > 1 else ""  # which of the windows
            raise fail(which + str(exc), colon=True) from None
    return tuple(out)


Windows = checked(tuple, _windows)


@options_class("attribute", DESCRIPTION)
class AttributionOptions:
    """Everything `attribute_window` can vary; each field but `progress` is also a flag."""

    path: choice("auto", "replay", "straight", "both") = arg(
        "auto", help="the path: replay (the training steps from a checkpoint; a trained run's "
        "auto), straight (lines between snapshots; an imported run's auto) or both (a "
        "trained run's window along each, and their comparison: A_B/paths.md)")
    checkpoint: str | None = arg(
        None, help="a training checkpoint of the run at or before A (default: "
        "RUN_DIR/checkpoints/last.pt)", raw=True, metavar="C")
    rule: choice(*STEP_RULES) = arg(
        "simpson", help="each replayed step's split: simpson, simpson4 / simpson8 (composite "
        "Simpson on quarters / eighths of the step: 2x / 4x the time), trapezoid, midpoint or "
        "start (the gradient at the step's start); every rule's residual is reported")
    nodes: Count = arg(8, help="Gauss-Legendre points per straight segment")
    eval_size: Count = arg(1000, help="sequences of each evaluation set in its loss")
    sets: names("evaluation set names") | None = arg(
        None, help="evaluation sets, comma-separated (default: all)")
    first_order_only: Flag = arg(
        False, help="only each group's change A -> B against its first-order predictions at A "
        "(fast: no path integral)")
    null_draws: Count = arg(
        NULL_DRAWS, metavar="N", help="random sign patterns of each first-order sign null (its "
        "p-values resolve 1/(N+1))")
    progress: bool = True


@options_class("attribute", DESCRIPTION)
class AttributeOptions(Format, Quiet, Figures, Threads, AttributionOptions):
    """`python -m empirical attribute RUN_DIR --window A:B [...]`: an attribution's options and
    the command's."""

    run_dir: str = arg(help="a run directory (trained, or imported with snapshots)",
                       positional=True)  # fmt: skip
    windows: Windows = arg(help="steps A:B (repeat for several windows)", flag="--window",
                           repeat=True, raw=True, metavar="A:B")  # fmt: skip
    out: str | None = arg(None, help="output directory (default RUN_DIR/attribution)", raw=True)

    def check(self) -> None:
        """The run exists and has two layers, before the output directory is made."""
        RunDir(self.run_dir).require_run().read_two_layer_config("attribute")
