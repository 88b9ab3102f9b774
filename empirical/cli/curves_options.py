"""The options of `python -m empirical curves` (`CurvesOptions`), declared once and checked
before any run is read (empirical.config.options); the figure itself is
empirical.train.plots.plot_runs. No torch, no matplotlib here."""

from __future__ import annotations

from disentangled.command_line import UsageError, check_output_file
from empirical.config.field_types import choice
from empirical.config.options import arg, options_class
from empirical.report.figures import FORMATS
from empirical.runs.rundir import RunDir

__all__ = ["CurvesOptions"]


@options_class("curves", "Several runs' accuracy curves side by side, spikes marked.")
class CurvesOptions:
    """`python -m empirical curves RUN_DIR [RUN_DIR ...] --out FILE [...]`."""

    run_dirs: tuple[str, ...] = arg(help="run directories (trained or imported)",
                                    positional=True, nargs="+", metavar="RUN_DIR")  # fmt: skip
    sets: tuple[str, ...] = arg(
        ("1var/ind", "1var/var"), help="evaluation sets (panels)", nargs="+", metavar="SET",
        default_text="1var/ind 1var/var")
    labels: tuple[str, ...] | None = arg(
        None, help="a label per run (default: RunDir.label)", nargs="+", metavar="LABEL")
    title: str = arg("", help="figure title (default none)", raw=True, default_text="")
    out: str = arg(help="figure file (png, pdf or svg)", raw=True)
    format: choice(*FORMATS) = arg(
        "png", help="figure file format where --out has no suffix: png, pdf or svg")

    def check(self) -> None:
        """A label per run, a figure file that can be written, and runs to read."""
        if self.labels is not None and len(self.labels) != len(self.run_dirs):
            raise UsageError(
                f"--labels: {len(self.labels)} labels for {len(self.run_dirs)} run directories"
            )
        check_output_file(self.out)
        for path in self.run_dirs:
            RunDir(path).require_run()
