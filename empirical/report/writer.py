"""The one writer of a result's files: a result declares once what it writes (its JSON, its
markdown, its arrays, its figures) as a `Report`, and `write_report` writes them all into one
directory, each file atomically.

    report = Report({
        "ladder.json": Json(result, newline=True),
        "summary.md": summary_markdown(result),           # a str is written as it is
        "blocks.npz": Arrays(blocks),                     # compressed numpy arrays
        "ladder": Figure(lambda: plot_ladder(result), dpi=110),  # the format's suffix added
    })
    paths = write_report(report, out_dir, figures=True, fmt="png")   # name -> path written
    print_report(report, paths, quiet=False)              # summary.md, then the files

A Figure is drawn only when figures are asked for; an empty Arrays writes nothing.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from empirical.report.figures import DPI, save_figure
from empirical.report.files import atomic_write_bytes

__all__ = [
    "Arrays", "Figure", "Json", "Report", "jsonable", "print_report", "say", "write_report",
]


def jsonable(obj: Any) -> Any:
    """Plain JSON types: NaN / inf -> None; numpy arrays -> lists, numpy scalars -> numbers;
    a dict's keys that start with `_` (a result's working data) are left out."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


@dataclass(frozen=True)
class Json:
    """A JSON file of `data` (made `jsonable` unless `plain`): `indent`, and a final newline
    if `newline`."""

    data: Any
    indent: int | None = 1
    newline: bool = False
    plain: bool = False

    def encode(self) -> bytes:
        data = self.data if self.plain else jsonable(self.data)
        return (json.dumps(data, indent=self.indent) + ("\n" if self.newline else "")).encode()


@dataclass(frozen=True)
class Arrays:
    """A compressed .npz of named numpy arrays (nothing is written if there are none)."""

    arrays: dict[str, Any]

    def encode(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **self.arrays)
        return buffer.getvalue()


@dataclass(frozen=True)
class Figure:
    """A figure, drawn by `draw()` (a matplotlib Figure) when the files are written."""

    draw: Callable[[], Any]
    dpi: int = DPI


@dataclass
class Report:
    """What a result writes: file name -> its content (a str is markdown or text, written as
    it is; a Figure's name is its stem). `summary`: the file a command prints."""

    files: dict[str, str | Json | Arrays | Figure] = field(default_factory=dict)
    summary: str | None = "summary.md"


def write_report(report: Report, out_dir: str | os.PathLike, figures: bool = True,
                 fmt: str = "png") -> dict[str, Path]:  # fmt: skip
    """Every file of `report` into `out_dir` (made if missing), each atomically; figures in
    `fmt` (png, pdf or svg), none if not `figures`. Returns name -> the path written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, content in report.files.items():
        if isinstance(content, Figure):
            if figures:
                paths[name] = save_figure(content.draw(), out / name, fmt, content.dpi).saved_path
            continue
        if isinstance(content, Arrays) and not content.arrays:
            continue
        atomic_write_bytes(out / name, content.encode())  # a str's utf-8, or the file's bytes
        paths[name] = out / name
    return paths


def print_report(report: Report, paths: dict[str, Path], quiet: bool) -> None:
    """A command's ending: its summary printed, then the files it wrote (nothing if quiet)."""
    if quiet:
        return
    if report.summary is not None and report.summary in paths:
        print(paths[report.summary].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}")


def say(msg: str) -> None:
    """A progress line on stderr (a command's summary goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)
