"""A run's `summary.json` and Figure 2, written when training ends (or on demand).

summary.json's `final_acc` is {set: accuracy}; `final_acc_ci95` gives each its 95% Wilson
interval [low, high] over the set's `eval_set_sizes` sequences (empirical.report.stats).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from empirical.config.io import to_dict
from empirical.model.device import cpu_model
from empirical.report.figures import figure_path
from empirical.report.files import atomic_write_bytes
from empirical.report.stats import accuracy_intervals
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import RunDir
from empirical.runs.set_timeline import set_timeline
from empirical.task.eval_sets import load_eval_sets
from empirical.task.registry import family_of
from empirical.train.plots import plot_training_curves

TARGET = 0.99


def first_step_all_above(records: list[dict], target: float = TARGET) -> int | None:
    """The first evaluated step at which every evaluation set is >= target (None: never)."""
    for r in records:
        if r["acc"] and min(r["acc"].values()) >= target:
            return int(r["step"])
    return None


def eval_set_sizes(run_dir: str | Path) -> dict[str, int]:
    """Sequences per evaluation set of a run (from its eval_sets.pt; {} if it has none)."""
    run = RunDir(run_dir)
    if not run.eval_sets.is_file():
        return {}

    return {name: len(batch) for name, batch in load_eval_sets(run.eval_sets).items()}


def write_summary(
    cfg, run_dir: Path, records: list[dict] | None = None, elapsed_s=None, device=None,
    breakdown=None, *, sizes: dict[str, int] | None = None, fmt: str = "png",
    session: dict | None = None, figures: bool = True,
):  # fmt: skip
    """Write summary.json and (unless `figures` is False) the training curves (`fmt`: png,
    pdf or svg); returns the summary. `sizes` (sequences per evaluation set, for the
    intervals) default to the run's eval_sets.pt. `session`: where the last training
    session's time went (steps, step mode, seconds of setup, training steps, evaluations,
    snapshots and checkpoints)."""
    run = RunDir(run_dir)
    records = run.read_metrics() if records is None else records
    sizes = eval_set_sizes(run.path) if sizes is None else dict(sizes)
    final = records[-1]
    phases = detect_phases(records, sets=family_of(cfg.task).phase_sets)
    below = {k: v for k, v in final["acc"].items() if v < TARGET}
    intervals = accuracy_intervals(final["acc"], sizes)
    summary = {
        "name": cfg.name,
        "seed": cfg.seed,
        "final_step": final["step"],
        "final_acc": final["acc"],
        "final_acc_ci95": {k: v["ci95"] for k, v in intervals.items()},
        "eval_set_sizes": sizes,
        "final_loss": final["loss"],
        "all_sets_at_least_99": not below,
        "sets_below_99": below,
        "first_step_all_sets_at_least_99": first_step_all_above(records),
        "phases": phases.to_dict(),
        "set_timeline": set_timeline(records),  # per set: >= 90% / 99% steps, its spikes
        "accuracy_by_operand_variable": breakdown,
        "elapsed_s": elapsed_s,
        "steps_per_s": (final["step"] / elapsed_s) if elapsed_s else None,
        "device": str(device) if device is not None else None,
        "device_name": _device_name(device),
        "torch_threads": torch.get_num_threads(),
        "last_session": session,
        "config": to_dict(cfg),
    }
    atomic_write_bytes(run.summary, json.dumps(summary, indent=2).encode())
    if figures:
        write_training_curves(cfg, run.path, records, sizes=sizes, fmt=fmt, phases=phases)
    return summary


def write_training_curves(
    cfg, run_dir: str | Path, records=None, *, sizes=None, fmt: str = "png", phases=None
) -> Path:
    """Figure 2 of the run (training_curves.png, or .pdf / .svg with `fmt`); returns its path."""
    run = RunDir(run_dir)
    records = run.read_metrics() if records is None else records
    sizes = eval_set_sizes(run.path) if sizes is None else sizes
    family = family_of(cfg.task)
    phases = detect_phases(records, sets=family.phase_sets) if phases is None else phases
    path = figure_path(run.training_curves, fmt)
    title = f"{family.title} training ({run.label(cfg)})"
    chance = 1 / cfg.task.n_classes  # a uniform guess over the output classes
    plot_training_curves(records, phases, path, title, sizes=sizes, chance=chance)
    return path


def _device_name(device) -> str | None:
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({cpu_model()}, {torch.get_num_threads()} threads)"
