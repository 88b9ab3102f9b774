"""A sweep's members' rows summarized over seeds with the threshold (`summarize`: results.json's
content) and written as results.json, summary.md and the figure (`write_results`)."""

from __future__ import annotations

import json
from pathlib import Path

from empirical.experiments.sweep.figure import plot_sweep
from empirical.experiments.sweep.summary_md import markdown
from empirical.experiments.sweep.thresholds import (
    aggregate,
    curve_threshold,
    pooled_intervals,
    threshold_uncertainty,
)
from empirical.report.files import atomic_write_bytes
from empirical.runs.rundir import SweepDir


def summarize(
    rows: list[dict], *, param: str, x_label: str, metric: str, target: float,
    missing: list[str], title: str, command: str | None = None,
    stopped: dict[str, str] | None = None,
) -> dict:  # fmt: skip
    """The results dict (`results.json`) of finished members' rows
    ({"member", "value", "x", "seed", "final_step", "metric", "aux": {...}, "final_acc"})."""
    points = aggregate(rows)
    for aux in sorted({a for r in rows for a in r.get("aux", {})}):
        sub = [dict(r, aux_value=r["aux"][aux]) for r in rows if aux in r.get("aux", {})]
        for p, a in zip(points, aggregate(sub, "aux_value"), strict=False):
            if p["x"] == a["x"]:
                p.setdefault("aux", {})[aux] = a["mean"]
    pooled_intervals(rows, points)
    thr = curve_threshold(points, [p["mean"] for p in points], target)
    thr.update(threshold_uncertainty(rows, points, target))
    return {
        "title": title, "param": param, "x_label": x_label, "metric": metric, "target": target,
        "command": command, "threshold": thr, "points": points, "members": rows,
        "missing_members": missing, "stopped_members": dict(stopped or {}),
    }  # fmt: skip


def write_results(
    results: dict, sweep_dir: Path, figure_name: str, at_step: int | None = None
) -> tuple[Path, Path, Path]:
    """results.json, summary.md and the figure `figure_name` (e.g. NAME.png) in sweep_dir;
    with `at_step`, results_step_NNNNNN.json, summary_step_NNNNNN.md and NAME_step_NNNNNN.png
    beside them (the final summary is kept)."""
    out = SweepDir(sweep_dir)
    json_path, md_path = out.results_json, out.summary_md
    if at_step is not None:
        json_path, md_path = out.results_json_at(at_step), out.summary_md_at(at_step)
        stem, dot, ext = figure_name.rpartition(".")
        figure_name = f"{stem}_step_{at_step:06d}{dot}{ext}"
    fig_path = out.path / figure_name
    atomic_write_bytes(json_path, json.dumps(results, indent=2).encode())
    atomic_write_bytes(md_path, markdown(results, fig_path.name).encode())
    if results["points"]:
        plot_sweep(results, fig_path)
    return json_path, md_path, fig_path
