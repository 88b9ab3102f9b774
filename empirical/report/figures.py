"""What every figure of `empirical` shares: saving (png / pdf / svg), the CLI's backend, and
colour-blind-safe colours.

Plot functions take `path=None` (nothing written: shown in a notebook; else written, then
closed) and `fmt=None` (the suffix's format) and return the matplotlib `Figure`. Importing a
module of `empirical` never selects a matplotlib backend; the command-line entry points call
`use_cli_backend()` (Agg, unless MPLBACKEND says otherwise).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

# the CLI's backend choice (Agg unless MPLBACKEND), one implementation for every package
from disentangled.command_line import use_cli_backend  # noqa: F401
from empirical.report.files import atomic_write_bytes

FORMATS = ("png", "pdf", "svg")
DPI = 120
MIN_FONT = 8  # no tick label, legend or annotation smaller than this

# Okabe & Ito's palette: distinguishable with every common colour-vision deficiency
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}
# sequential maps for magnitudes, a diverging one for signed values
SEQUENTIAL = "viridis"
SEQUENTIAL_ALT = "cividis"
DIVERGING = "RdBu_r"


def figure_path(path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Where a figure goes: `path` with the suffix `fmt` (png / pdf / svg) when given; without
    `fmt` the suffix of `path` says the format (none: png)."""
    path = Path(path)
    if fmt is None:
        suffix = path.suffix.lower().lstrip(".")
        if suffix in FORMATS:
            return path
        if suffix:
            raise ValueError(
                f"{path}: unknown figure format {suffix!r}; use one of {', '.join(FORMATS)}"
            )
        return path.with_suffix(".png")
    fmt = fmt.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"figure format {fmt!r}: use one of {', '.join(FORMATS)}")
    if path.suffix.lower().lstrip(".") in FORMATS:
        return path.with_suffix(f".{fmt}")
    return path.with_name(f"{path.name}.{fmt}") if path.suffix else path.with_suffix(f".{fmt}")


def save_figure(fig, path: str | os.PathLike | None, fmt: str | None = None, dpi: int = DPI):
    """Write `fig` to `path` (in `fmt`, or the suffix's format) and close it; with `path`
    None, leave it open and write nothing. Returns `fig` either way. Written atomically (a
    reader never sees half a file), with the umask's permissions."""
    if path is None:
        return fig
    # pyplot here, not at the top: the dispatcher and the options classes import this module
    # (FORMATS, use_cli_backend) before parsing, and pyplot takes seconds to import
    import matplotlib.pyplot as plt

    target = figure_path(path, fmt)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=target.suffix[1:], dpi=dpi, bbox_inches="tight")
    atomic_write_bytes(target, buffer.getvalue())
    plt.close(fig)
    fig.saved_path = target  # where it went (callers list the files they made)
    return fig


def saved_name(fig) -> str:
    """The file name a figure was saved under by `save_figure`."""
    return Path(fig.saved_path).name
