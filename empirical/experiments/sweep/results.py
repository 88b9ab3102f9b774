"""A sweep's members' rows summarized over seeds with the threshold (`summarize`: results.json's
content), and its files, results.json, summary.md and the figure, declared once
(`results_report`)."""

from __future__ import annotations

from empirical.experiments.sweep.figure import plot_sweep
from empirical.experiments.sweep.summary_md import markdown
from empirical.experiments.sweep.thresholds import (
    aggregate,
    curve_threshold,
    pooled_intervals,
    threshold_uncertainty,
)
from empirical.report.writer import Figure, Json, Report
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


def results_report(results: dict, stem: str, at_step: int | None = None,
                   fmt: str = "png") -> Report:  # fmt: skip
    """results.json, summary.md and the figure `stem` (e.g. the sweep config's name; in `fmt`,
    which summary.md links; none without points); with `at_step`, results_step_NNNNNN.json,
    summary_step_NNNNNN.md and STEM_step_NNNNNN beside them (the final summary is kept)."""
    names = SweepDir(".")
    json_name, md_name = SweepDir.RESULTS_JSON, SweepDir.SUMMARY_MD
    if at_step is not None:
        json_name, md_name = names.results_json_at(at_step).name, names.summary_md_at(at_step).name
        stem = f"{stem}_step_{at_step:06d}"
    files: dict = {
        json_name: Json(results, indent=2, plain=True),
        md_name: markdown(results, f"{stem}.{fmt}"),
    }
    if results["points"]:
        files[stem] = Figure(lambda: plot_sweep(results))
    return Report(files, summary=None)
