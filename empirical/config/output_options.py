"""The output flags several commands share, each declared once (empirical.config.options): a
command's options class lists the ones it has among its bases.

    @options_class("attribute", "...")
    class AttributeOptions(Format, Quiet, Figures, Threads, AttributionOptions): ...

No torch here (`threads` is applied by the command that runs)."""

from __future__ import annotations

from empirical.config.field_types import MUST, Flag, choice, integer
from empirical.config.options import arg, options_class
from empirical.report.figures import FORMATS

__all__ = ["Figures", "Format", "Quiet", "Threads"]


@options_class("", "torch's CPU threads")
class Threads:
    threads: integer(0, wording=MUST) = arg(1, help="torch CPU threads (0: torch's default)")


@options_class("", "figures or not")
class Figures:
    figures: Flag = arg(True, help="numbers only: no figures", flag="--no-figures")


@options_class("", "progress and summary printed or not")
class Quiet:
    quiet: Flag = arg(False, help="no progress and no summary print")


@options_class("", "the figures' file format")
class Format:
    format: choice(*FORMATS) = arg("png", help="figure file format: png, pdf or svg")
