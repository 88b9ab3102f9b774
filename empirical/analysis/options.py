"""What one run's analysis can vary (`AnalysisOptions`, which `analyze_run` takes), declared
once: each field is also a flag of `python -m empirical analyze` (whose own options,
`empirical.studies.options.AnalyzeOptions`, add the run directory and the printing). No torch
here: the command checks every value before torch is imported.

    analyze_run(run_dir, AnalysisOptions(n_probe=256, figures=False))
    analyze_run(run_dir, n_probe=256, figures=False)        # the same
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from empirical.config.field_types import MUST, Flag, choice, integer, parsed
from empirical.config.options import arg, options_class
from empirical.report.figures import FORMATS

__all__ = ["AnalysisOptions", "parse_steps"]


def parse_steps(text: str | None) -> str | tuple[int, int] | None:
    """A `--first-spike-steps` / `--second-spike-steps` value: 'auto' (or None) -> 'auto';
    'off' / 'none' -> None; 'A,B' -> (A, B) with A < B."""
    if text is None or text.strip().lower() == "auto":
        return "auto"
    if text.strip().lower() in ("off", "none"):
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        a, b = (int(p) for p in parts)
    except ValueError:
        raise ValueError("expected two steps A,B (e.g. 5301,5401), 'auto' or 'off'") from None
    if a >= b:
        raise ValueError("the first step must come before the second")
    return a, b


# (A, B), "auto" (from the detected phases) or None (skip); text from the command line
SpikeSteps = parsed(parse_steps, Any)


@options_class("analyze", "Mechanistic analysis of a training run (paper Sections 5-6, App. B).")
class AnalysisOptions:
    """Everything `analyze_run` can vary; each field but `progress` is a flag of `analyze`."""

    step: integer(0, wording=MUST) | None = arg(
        None, help="analyse snapshots/step_S.pt (default: the final checkpoint)", metavar="S")
    out_dir: Path | None = arg(
        None, help="output directory (default RUN_DIR/analysis[/step_S])", flag="--out",
        metavar="DIR", raw=True)
    dynamics: Flag = arg(True, help="skip the progress measures over snapshots",
                         flag="--no-dynamics")  # fmt: skip
    every: integer(1, wording=MUST) = arg(1, help="use every N-th snapshot", metavar="N")
    n_probe: integer(16, wording=MUST) = arg(
        2048, help="probe sequences per split", flag="--probe-size", metavar="N")
    seed: integer(0, wording=MUST) | None = arg(
        None, help="analysis seed (default: the run's seed)", metavar="S")
    threads: integer(0, wording=MUST) | None = arg(
        1, help="torch CPU threads (0: torch's default; 1 is the fastest here)", metavar="N")
    progress: bool = False  # a progress bar over the snapshots (the command: --no-progress)
    figures: Flag = arg(True, help="numbers only", flag="--no-figures")
    fmt: choice(*FORMATS) = arg("png", help="figure file format: png, pdf or svg",
                                flag="--format")  # fmt: skip
    first_spike_steps: SpikeSteps = arg(
        "auto", metavar="A,B|auto|off", raw=True,
        help="compare the snapshots at steps A and B around the first spike (Figure 8); "
        "auto: the paper's 5301,5401 when the run has them inside its detected spike, else "
        "the snapshots around the detected spike's largest jump")
    second_spike_steps: SpikeSteps = arg(
        "auto", metavar="A,B|auto|off", raw=True,
        help="compare the snapshots at A and B around the second spike (Figures 9c/9d); "
        "auto: the paper's 14501,16001 when inside the detected spike, else its onset and "
        "the end of its window")
    example: str | None = arg(
        None, raw=True, metavar="TOKENS",
        help="the Figure-8 example in token form, e.g. 'pad pad a 40 pad j 18 pad pad pad k 9 "
        "+ a 27 =' (default: that one, the authors', when the task holds it)")
