"""The option groups several commands share, each declared once (empirical.config.options): a
command's options class takes a group by inheriting it, after its library's options

    @options_class("ladder", "...")
    class LadderCommandOptions(Output, Threads, LadderOptions):   # --threads, --quiet, --format
        run_dir: str = arg(help="a run directory", positional=True)

(the fields of the last base come first in `--help`). No torch here (`threads` is applied by
the command that runs).
"""

from __future__ import annotations

from pydantic.dataclasses import dataclass as pydantic_dataclass

from empirical.config.field_types import MUST, Flag, choice, integer
from empirical.config.io import CONFIG
from empirical.config.options import arg
from empirical.report.figures import FORMATS

__all__ = ["Figures", "Format", "Output", "Quiet", "Threads"]


def group(cls: type) -> type:
    """An option group: a pydantic dataclass (keyword-only fields) to inherit from."""
    return pydantic_dataclass(cls, config=CONFIG, kw_only=True)


@group
class Quiet:
    """`--quiet`: no progress and no summary printed."""

    quiet: Flag = arg(False, help="no progress and no summary print")


@group
class Format:
    """`--format`: the figures' file format."""

    format: choice(*FORMATS) = arg("png", help="figure file format: png, pdf or svg")


@group
class Output(Format, Quiet):
    """`--quiet` and `--format`: how a command that writes a report ends."""


@group
class Threads:
    """`--threads N`: torch's CPU threads."""

    threads: integer(0, wording=MUST) = arg(1, help="torch CPU threads (0: torch's default)")


@group
class Figures:
    """`--no-figures`: the numbers only."""

    figures: Flag = arg(True, help="numbers only: no figures", flag="--no-figures")
