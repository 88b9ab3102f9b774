"""A run's `summary.json` and Figure 2, written when training ends (or on demand)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from empirical.config_io import atomic_write_bytes, to_dict
from empirical.train.metrics import read_metrics
from empirical.train.phases import detect_phases
from empirical.train.plots import plot_training_curves

TARGET = 0.99


def first_step_all_above(records: list[dict], target: float = TARGET) -> int | None:
    """The first evaluated step at which every evaluation set is >= target (None: never)."""
    for r in records:
        if r["acc"] and min(r["acc"].values()) >= target:
            return int(r["step"])
    return None


def write_summary(
    cfg,
    run_dir: Path,
    records: list[dict] | None = None,
    elapsed_s=None,
    device=None,
    breakdown=None,
):
    run_dir = Path(run_dir)
    records = read_metrics(run_dir / "metrics.jsonl") if records is None else records
    final = records[-1]
    phases = detect_phases(records)
    below = {k: v for k, v in final["acc"].items() if v < TARGET}
    summary = {
        "name": cfg.name,
        "seed": cfg.seed,
        "final_step": final["step"],
        "final_acc": final["acc"],
        "final_loss": final["loss"],
        "all_sets_at_least_99": not below,
        "sets_below_99": below,
        "first_step_all_sets_at_least_99": first_step_all_above(records),
        "phases": phases.to_dict(),
        "accuracy_by_operand_variable": breakdown,
        "elapsed_s": elapsed_s,
        "steps_per_s": (final["step"] / elapsed_s) if elapsed_s else None,
        "device": str(device) if device is not None else None,
        "device_name": _device_name(device),
        "torch_threads": torch.get_num_threads(),
        "config": to_dict(cfg),
    }
    atomic_write_bytes(run_dir / "summary.json", json.dumps(summary, indent=2).encode())
    plot_training_curves(
        records,
        phases,
        run_dir / "training_curves.png",
        f"Assign-and-add training ({cfg.name}, seed {cfg.seed}): accuracy per evaluation set",
    )
    return summary


def _device_name(device) -> str | None:
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
