"""A comparison's files, declared once (`report`): compare_qk.json (every number), blocks.npz
(every block), summary.md and the figures (docs/compare_qk.md, "Outputs"); written by
empirical.report.writer.write_report."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from empirical.bridge.compare_qk import plots, step_plots
from empirical.bridge.compare_qk.summary import frames_of, summary_markdown
from empirical.report.files import atomic_write_bytes
from empirical.report.style import DPI
from empirical.report.writer import Arrays, Figure, Json, Report, jsonable
from empirical.runs.rundir import RunDir

# `jsonable` and `write_npz` stay importable from here for bridge/attribution and
# bridge/interventions until their files are Reports too (then both go)
__all__ = ["blocks", "figures", "jsonable", "report", "write_npz"]


def blocks(result: dict) -> dict[str, np.ndarray]:
    """blocks.npz: steps, row/col labels, and per block name an array [n_steps, R, C]
    (NaN where a step has no such block, e.g. `diff` at the last snapshot)."""
    rows, cols = result["labels"]["rows"], result["labels"]["cols"]
    steps = [r["step"] for r in result["steps"]]
    arrays = {"steps": np.array(steps), "rows": np.array(rows), "cols": np.array(cols)}
    for name, items in result["_blocks"].items():
        A = np.full((len(steps), len(rows), len(cols)), np.nan)
        for s, M in items:
            A[steps.index(s)] = M
        arrays[name.replace("/", "__")] = A
    return arrays


def figures(result: dict) -> dict[str, Figure]:
    """Every figure of the comparison, by file stem: the cosines in the headline frame and in
    each other frame, the terms, the structure, the assumptions, the blocks of the one-step
    test's snapshot (else the last) and the one-step test (each at the style's DPI)."""

    def figure(draw) -> Figure:
        return Figure(draw, dpi=DPI)

    run = RunDir(result["run_dir"])
    name = run.label() if run.is_run() else run.name
    frame = result.get("frame", "orth")
    cos_title = f"{name}: theory's G1 vs the layer-2 QK update"
    made = {"cosines": figure(lambda: plots.plot_cosines(result, cos_title))}
    for f in [f for f in frames_of(result) if f != frame]:  # cosines_orth, ...
        made[f"cosines_{f}"] = figure(
            lambda f=f: plots.plot_cosines(result, cos_title, frame=f))  # fmt: skip
    for key, plot, title in (
        ("terms", plots.plot_terms, "the theorem's all-assignment term along training"),
        ("structure", plots.plot_structure, "associative memory and attenuation"),
        ("assumptions", plots.plot_assumptions, "the theorem's assumptions, measured"),
    ):
        made[key] = figure(lambda plot=plot, title=title: plot(result, f"{name}: {title}"))
    one = result.get("one_step")
    rows, cols = result["labels"]["rows"], result["labels"]["cols"]
    at = one.get("step") if one and "step" in one else result["steps"][-1]["step"]
    at_step = {k: M for k, items in result["_blocks"].items() for s, M in items if s == at}
    if at_step:
        made[f"blocks_step_{at:06d}"] = figure(lambda: step_plots.plot_blocks(
            at_step, rows, cols, result["task"]["L"],
            f"{name}, step {at}: blocks (rows: query, columns: key)", frame=frame,
        ))  # fmt: skip
    if one and "families" in one:
        made["one_step"] = figure(lambda: step_plots.plot_one_step(
            one, f"{name}: one step on 1-var data from step {one['step']}"))  # fmt: skip
    return made


def report(result: dict) -> Report:
    """What a comparison writes (figures as png, pdf or svg: write_report's `fmt`)."""
    return Report({
        RunDir.COMPARE_QK_JSON: Json(result, indent=1),
        RunDir.BLOCKS_NPZ: Arrays(blocks(result)),
        RunDir.SUMMARY_MD: summary_markdown(result),
        **figures(result),
    }, summary=RunDir.SUMMARY_MD)  # fmt: skip


def write_npz(path: Path, arrays: dict) -> Path:
    """`arrays` as a compressed .npz at `path`, written atomically."""
    atomic_write_bytes(path, Arrays(arrays).encode())
    return path
