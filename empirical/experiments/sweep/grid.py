"""Many named configs x seeds trained at once (docs/sweep.md, "Grids"): a run config plus a
`[grid]` table of named variants (spec.GridSpec), each a list of run-config overrides; every
(variant, seed) is a member, trained as in a sweep. The results (every set's final accuracy per
member and per variant, the spikes, the first step at which every set reached the target) go
to `grid.json`, `grid.md` and a heat map `grid.png` (`grid_report`).

    base, spec = load_grid_config("configs/explore_generalization.toml")   # spec.py
    results = run_grid(base, spec, "runs/grid/explore_generalization")
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from empirical.experiments.sweep.cluster import LOWEST_SET, submit_members
from empirical.experiments.sweep.runner import run_members, sweep_dir_lock
from empirical.experiments.sweep.spec import GridSpec, Member, expand_grid
from empirical.report.figures import save_figure
from empirical.report.writer import Figure, Json, Report, write_report
from empirical.runs.config import RunConfig
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import SweepDir
from empirical.runs.set_timeline import set_timeline
from empirical.task.assign_add.config import EVAL_SET_NAMES
from empirical.train.summary import first_step_all_above


def run_grid(
    base: RunConfig, spec: GridSpec, out_dir: str | Path, *, progress: bool = True,
    log: Callable[[str], None] | None = print, train: bool = True, executor=None,
    member_figures: bool = True,
) -> dict:  # fmt: skip
    """Train every unfinished member, then write grid.json, grid.md and grid.png.
    train=False: only (re)write them from the member directories. executor
    (cluster.ExecutorOptions): train each batch as a job; the files are written when the jobs
    are waited for (else {} is returned: gather them later with train=False). Writes under
    the grid directory's writer lock and the members' (runner.sweep_dir_lock, run_members).
    member_figures=False: the members trained write no training_curves.png."""
    out = SweepDir(out_dir)
    with sweep_dir_lock(out, train):
        return _run_grid(base, spec, out, progress=progress, log=log, train=train,
                         executor=executor, member_figures=member_figures)  # fmt: skip


def _run_grid(
    base: RunConfig, spec: GridSpec, out: SweepDir, *, progress: bool,
    log: Callable[[str], None] | None, train: bool, executor, member_figures: bool,
) -> dict:  # fmt: skip
    say = log or (lambda _text: None)
    members = expand_grid(base, spec)
    timings: list[dict] = []
    failed: dict[str, str] = {}

    def announce(plan) -> None:  # every member directory is checked by now
        out.path.mkdir(parents=True, exist_ok=True)
        say(f"grid {base.name}: {len(spec.variants)} variants x {len(spec.seeds)} seeds = "
            f"{len(members)} members in {out}; {len(plan.skipped) + len(plan.stopped)} done "
            f"or stopped, {len(plan.batches)} batch(es) to train")

    if not train or executor is not None:
        plan = run_members(members, out, spec.max_batch, log=say, train=False)
    if train:
        if executor is not None:
            announce(plan)
            sub = submit_members(
                members, out, spec.max_batch, executor, log=say, metric=LOWEST_SET,
                name=base.name, figures=member_figures,
            )  # fmt: skip
            if not sub.waited:
                say("when the jobs have finished, gather the tables: the same command with "
                    "--summarize instead of --executor")
                return {}
            timings = sub.timings
            failed = sub.failed
        else:
            timings = run_members(
                members, out, spec.max_batch, progress=progress, log=say,
                metric=lambda _m, acc: min(acc.values()), metric_name="lowest set",
                announce=announce, figures=member_figures,
            ).timings  # fmt: skip
    elif not out.members_dir.exists():
        return {}
    elif out.grid_json.exists():  # --summarize keeps the timings of the run that trained
        try:
            timings = json.loads(out.grid_json.read_text()).get("batch_timings", [])
        except (json.JSONDecodeError, OSError):
            timings = []
    results = collect_grid(members, spec, out.path)
    results["batch_timings"] = timings
    if failed:  # jobs that failed (their members stay resumable)
        results["failed_jobs"] = failed
    paths = write_report(grid_report(results), out.path)
    say(f"wrote {', '.join(map(str, paths.values()))}")
    return results


def collect_grid(members: list[Member], spec: GridSpec, out_dir: Path) -> dict:
    rows = []
    for m in members:
        run = SweepDir(out_dir).member(m.dirname)
        stop = run.read_stopped()
        records = run.read_metrics()
        last = records[-1] if records else None
        phases = detect_phases(records).to_dict() if records else {}
        rows.append({
            "member": m.dirname, "variant": m.value, "seed": m.seed,
            "step": last["step"] if last else 0,
            "finished": bool(last) and last["step"] == m.cfg.train.steps and stop is None,
            "stopped": stop["reason"] if stop else None,
            "final_acc": last["acc"] if last else {},
            "first_step_all_above_target": first_step_all_above(records, spec.target),
            "first_spike": _jump(phases.get("first_spike")),
            "second_spike": _jump(phases.get("second_spike")),
            "first_90": {name: t["first_90"] for name, t in set_timeline(records).items()},
        })  # fmt: skip
    sets = sorted({k for r in rows for k in r["final_acc"]}, key=_set_order)
    variants = []
    for name, overrides in spec.variants.items():
        mine = [r for r in rows if r["variant"] == name and r["final_acc"]]
        acc = {}
        for s in sets:
            vals = [r["final_acc"][s] for r in mine if s in r["final_acc"]]
            if vals:
                acc[s] = {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals)}
        variants.append({
            "variant": name, "overrides": overrides, "members": [r["member"] for r in mine],
            "steps": sorted({r["step"] for r in mine}), "acc": acc,
            "min_set_mean": min((a["mean"] for a in acc.values()), default=math.nan),
            "first_spike": _spread([r["first_spike"] for r in mine]),
            "second_spike": _spread([r["second_spike"] for r in mine]),
            "first_90": {s: _spread([r.get("first_90", {}).get(s) for r in mine]) for s in sets},
        })  # fmt: skip
    return {
        "name": members[0].cfg.name.split(".")[0] if members else "grid",
        "target": spec.target, "seeds": spec.seeds, "sets": sets, "variants": variants,
        "members": rows,
    }  # fmt: skip


def _jump(rise: dict | None) -> int | None:
    """The step a detected spike's largest jump ends at (None: no spike detected)."""
    return None if not rise else rise.get("jump_end_step", rise.get("end_step"))


def _spread(steps: list[int | None]) -> dict:
    """Mean, sd, min, max over the members where a spike was detected, and how many had one."""
    found = [s for s in steps if s is not None]
    if not found:
        return {"n": 0, "of": len(steps)}
    mean = sum(found) / len(found)
    sd = (sum((s - mean) ** 2 for s in found) / (len(found) - 1)) ** 0.5 if len(found) > 1 else 0.0
    return {"n": len(found), "of": len(steps), "mean": mean, "sd": sd, "min": min(found),
            "max": max(found), "steps": found}  # fmt: skip


def _spread_text(s: dict) -> str:
    if not s.get("n"):
        return f"none ({s.get('n', 0)}/{s.get('of', 0)})"
    return f"{s['mean']:.0f} ({s['sd']:.0f}) [{s['min']}-{s['max']}], {s['n']}/{s['of']}"


def _median_text(s: dict) -> str:
    if not s.get("n"):
        return f"not reached (0/{s.get('of', 0)})"
    return f"{statistics.median(s['steps']):.0f} [{s['min']}-{s['max']}], {s['n']}/{s['of']}"


def _set_order(name: str) -> tuple:
    return (EVAL_SET_NAMES.index(name), name) if name in EVAL_SET_NAMES else (999, name)


def _pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def grid_markdown(results: dict) -> str:
    sets = results["sets"]
    lines = [
        f"# Grid: final accuracy (%) per evaluation set, mean over seeds {results['seeds']}", "",
        "min over seeds in parentheses; 'all >= target' is each member's first evaluated step "
        f"with every set >= {100 * results['target']:g}%.", "",
        "| variant | steps | " + " | ".join(sets) + " | all >= target |",
        "| --- | --- | " + " | ".join("---" for _ in sets) + " | --- |",
    ]  # fmt: skip
    by_variant = {}
    for r in results["members"]:
        by_variant.setdefault(r["variant"], []).append(r)
    for v in results["variants"]:
        cells = []
        for s in sets:
            a = v["acc"].get(s)
            cells.append("-" if a is None else f"{_pct(a['mean'])} ({_pct(a['min'])})")
        firsts = [str(r["first_step_all_above_target"]) for r in by_variant.get(v["variant"], [])]
        steps = ",".join(map(str, v["steps"])) or "0"
        lines.append(f"| {v['variant']} | {steps} | " + " | ".join(cells)
                     + f" | {', '.join(firsts)} |")
    lines += [
        "", "## Phase changes (empirical.runs.phases): step each spike's largest jump ends at",
        "", "| variant | first spike: mean (sd) [min-max], members with one | second spike |",
        "| --- | --- | --- |",
    ]  # fmt: skip
    for v in results["variants"]:
        cells = [_spread_text(v.get(key) or {}) for key in ("first_spike", "second_spike")]
        lines.append(f"| {v['variant']} | {cells[0]} | {cells[1]} |")
    lines += [
        "", "## First evaluated step at >= 90% per set (summary.json's set_timeline):",
        "median over the members that reached it [min-max], members that reached it", "",
        "| variant | " + " | ".join(sets) + " |",
        "| --- | " + " | ".join("---" for _ in sets) + " |",
    ]  # fmt: skip
    for v in results["variants"]:
        firsts = v.get("first_90") or {}
        cells = [_median_text(firsts.get(s) or {}) for s in sets]
        lines.append(f"| {v['variant']} | " + " | ".join(cells) + " |")
    lines += ["", "## Variants", ""]
    for v in results["variants"]:
        lines.append(f"- `{v['variant']}`: {' '.join(v['overrides']) or '(the base config)'}")
    stopped = [r for r in results["members"] if r["stopped"]]
    if stopped:
        lines += ["", "## Stopped members", ""]
        lines += [f"- {r['member']}: {r['stopped']}" for r in stopped]
    return "\n".join(lines) + "\n"


def plot_grid(results: dict, path: Path | None = None, *, fmt: str | None = None):
    """Heat map of the final accuracy (%) per variant and evaluation set, mean over seeds.
    Returns the Figure; writes it to `path` (png, pdf or svg: the suffix, or `fmt`) and
    closes it when a path is given."""
    sets, variants = results["sets"], results["variants"]
    data = np.array([[v["acc"].get(s, {}).get("mean", np.nan) * 100 for s in sets]
                     for v in variants])
    fig, ax = plt.subplots(figsize=(3.5 + 0.9 * len(sets), 3.0 + 0.45 * len(variants)),
                           layout="constrained")
    im = ax.imshow(data, vmin=0, vmax=100, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(sets)), sets, rotation=45, ha="right")
    ax.set_yticks(range(len(variants)), [v["variant"] for v in variants])
    for i in range(len(variants)):
        for j in range(len(sets)):
            if not np.isnan(data[i, j]):
                ax.text(j, i, f"{data[i, j]:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if data[i, j] < 60 else "black")
    ax.set_xlabel("evaluation set")
    ax.set_ylabel("variant")
    steps = sorted({r["step"] for r in results["members"]})
    ax.set_title(f"{results.get('name', 'grid')}: final accuracy (%) per evaluation set,\nmean "
                 f"over seeds {results['seeds']} (step {', '.join(map(str, steps))})", fontsize=10)
    fig.colorbar(im, ax=ax, label="accuracy (%)")
    return save_figure(fig, path, fmt)


def grid_report(results: dict) -> Report:
    """grid.json, grid.md and the heat map grid.png (SweepDir's names)."""
    return Report({
        SweepDir.GRID_JSON: Json(results, indent=2, plain=True),
        SweepDir.GRID_MD: grid_markdown(results),
        SweepDir.GRID_FIGURE: Figure(lambda: plot_grid(results)),
    }, summary=None)  # fmt: skip
