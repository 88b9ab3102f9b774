"""Writing a comparison: compare_qk.json (every number), blocks.npz (every block), summary.md,
and the figures (docs/compare_qk.md, "Outputs")."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np

from empirical.bridge.compare_qk.summary import frames_of, summary_markdown
from empirical.report.files import atomic_write_bytes
from empirical.runs.rundir import RunDir


def jsonable(obj):
    """Plain JSON types; NaN / inf -> None; numpy -> lists and floats."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def write_blocks(result: dict, path: Path) -> Path:
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
    return write_npz(path, arrays)


def write_npz(path: Path, arrays: dict) -> Path:
    """`arrays` as a compressed .npz at `path`, written atomically."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def write_figures(result: dict, out: Path, fmt: str = "png") -> dict[str, Path]:
    """Every figure of the comparison into `out` (png, pdf or svg); returns name -> path."""
    from empirical.bridge.compare_qk import plots, step_plots

    def at(stem: str) -> Path:
        return out / f"{stem}.{fmt}"

    run = RunDir(result["run_dir"])
    name = run.label() if run.is_run() else run.name
    frame = result.get("frame", "orth")
    cos_title = f"{name}: theory's G1 vs the layer-2 QK update"
    made = {"cosines": plots.plot_cosines(result, at("cosines"), cos_title)}
    for f in [f for f in frames_of(result) if f != frame]:  # cosines_orth, ...
        made[f"cosines_{f}"] = plots.plot_cosines(result, at(f"cosines_{f}"), cos_title, frame=f)
    for key, plot, title in (
        ("terms", plots.plot_terms, "the theorem's all-assignment term along training"),
        ("structure", plots.plot_structure, "associative memory and attenuation"),
        ("assumptions", plots.plot_assumptions, "the theorem's assumptions, measured"),
    ):
        made[key] = plot(result, at(key), f"{name}: {title}")
    one = result.get("one_step")
    rows, cols = result["labels"]["rows"], result["labels"]["cols"]
    at_step = one.get("step") if one and "step" in one else result["steps"][-1]["step"]
    blocks = {k: M for k, items in result["_blocks"].items() for s, M in items if s == at_step}
    if blocks:
        made["blocks_png"] = step_plots.plot_blocks(
            blocks, rows, cols, result["task"]["L"], at(f"blocks_step_{at_step:06d}"),
            f"{name}, step {at_step}: blocks (rows: query, columns: key)", frame=frame,
        )  # fmt: skip
    if one and "families" in one:
        made["one_step"] = step_plots.plot_one_step(
            one, at("one_step"),
            f"{name}: one step on 1-var data from step {one['step']}",
        )  # fmt: skip
    return {key: fig.saved_path for key, fig in made.items()}


def write_outputs(result: dict, out_dir, figures: bool = True, fmt: str = "png") -> dict[str, Path]:
    """Write everything under out_dir (figures as png, pdf or svg: `fmt`); returns name -> path.
    Files are written atomically, with the umask's permissions."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / RunDir.COMPARE_QK_JSON}
    atomic_write_bytes(paths["json"], json.dumps(jsonable(result), indent=1).encode())
    paths["blocks"] = write_blocks(result, out / RunDir.BLOCKS_NPZ)
    paths["summary"] = out / RunDir.SUMMARY_MD
    atomic_write_bytes(paths["summary"], summary_markdown(result).encode())
    if figures:
        paths.update(write_figures(result, out, fmt))
    return paths
