"""The one report writer (empirical.report.writer): every declared file written, atomically,
in its format; figures only when asked for; the summary printed before the file list."""

from __future__ import annotations

import json
import math

import numpy as np

from empirical.report.writer import Arrays, Figure, Json, Report, print_report, write_report


def _figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    ax.set_title("a line")
    return fig


def test_every_declared_file_is_written_in_its_format(tmp_path, capsys):
    drawn = []
    report = Report({
        "r.json": Json({"x": math.nan, "a": np.arange(3), "_work": 1}, newline=True),
        "summary.md": "# hello\n",
        "blocks.npz": Arrays({"m": np.eye(2)}),
        "none.npz": Arrays({}),
        "line": Figure(lambda: drawn.append(1) or _figure()),
    })  # fmt: skip
    paths = write_report(report, tmp_path / "out", fmt="svg")
    assert set(paths) == {"r.json", "summary.md", "blocks.npz", "line"}
    text = paths["r.json"].read_text()
    assert text.endswith("\n") and json.loads(text) == {"x": None, "a": [0, 1, 2]}
    assert paths["summary.md"].read_text() == "# hello\n"
    assert np.load(paths["blocks.npz"])["m"].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert paths["line"].suffix == ".svg" and paths["line"].read_text().startswith("<?xml")
    assert not (tmp_path / "out" / "none.npz").exists() and drawn == [1]
    assert not list((tmp_path / "out").glob(".*.tmp"))  # nothing half-written left behind
    print_report(report, paths, quiet=False)
    out = capsys.readouterr().out
    assert out.startswith("# hello") and "wrote " in out and str(paths["line"]) in out


def test_no_figure_is_drawn_when_figures_are_not_asked_for(tmp_path, capsys):
    report = Report({"summary.md": "x", "f": Figure(lambda: 1 / 0)}, summary=None)
    paths = write_report(report, tmp_path, figures=False)
    assert set(paths) == {"summary.md"}
    print_report(report, paths, quiet=True)
    assert capsys.readouterr().out == ""
