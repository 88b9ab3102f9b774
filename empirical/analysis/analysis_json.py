"""What analysis.json holds: every number of one run's analysis as plain JSON types
(`analysis_json`; `to_jsonable` turns tensors / arrays into lists). The keys are documented in
docs/analysis.md ("Output files"); summary.md is written from it (markdown_summary).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from empirical.analysis.progress import ALL_MEASURES, ProgressHistory, definition_agreement
from empirical.analysis.spikes import comparison_numbers
from empirical.report.stats import accuracy_intervals

PROBE_DISTRIBUTION = (
    "unrestricted (every variable at both operand positions, no held-out pairs), equal "
    "thirds of 0/1/2-var"
)
AUTHORS_DISTRIBUTION = (
    "the authors' measure batches: unrestricted, a third 0-var, two thirds 1-var (variable "
    "first or second equally), no 2-var"
)


def to_jsonable(obj, digits: int = 6):
    """Tensors / arrays -> nested lists, floats rounded to `digits` significant digits,
    NaN / inf -> None."""
    if isinstance(obj, torch.Tensor):
        obj = obj.detach().cpu().numpy()
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, digits) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return float(f"{x:.{digits}g}")
    return obj


def accuracy_at(records: list[dict], step: int | None) -> dict | None:
    """The evaluation sets' accuracies recorded at `step` (None: not evaluated there)."""
    return next((r["acc"] for r in records if r["step"] == step), None)


def probe_data_json(data) -> dict:
    """The probe data's distribution and sizes (ours, and the authors' batches if drawn)."""
    authors = None
    if data.authors is not None:
        authors = {
            "distribution": AUTHORS_DISTRIBUTION,
            "n_eval": len(data.authors.eval),
            "n_probe_train": len(data.authors.train),
            "n_probe_test": len(data.authors.test),
        }
    return {
        "distribution": PROBE_DISTRIBUTION,
        "n_test": len(data.test),
        "n_train": len(data.train),
        "n_second_operand": len(data.second),
        "authors_batches": authors,
    }


def analysis_json(
    *, run_dir, model_path, model_step: int | None, seed: int, task, data, numbers: dict,
    records: list[dict], set_sizes: dict[str, int], phases, history: ProgressHistory | None,
    plateau: dict | None, compare: dict, first_cmp: dict | None, second_cmp: dict | None,
) -> dict:  # fmt: skip
    """analysis.json's content (without "figures" and "seconds", added by the caller):
    `numbers` from analyze_model, the over-training `history`, its phase-2 `plateau`, the
    compared steps and both spike comparisons."""
    acc = accuracy_at(records, model_step)
    return {
        "run_dir": str(run_dir.path),
        "checkpoint": str(model_path),
        "step": model_step,
        "seed": seed,
        "task": {"p": task.p, "K": task.K, "L": task.L, "r1": task.r1, "r2": task.r2},
        "probe_data": probe_data_json(data),
        "model": numbers,
        "accuracy_at_step": acc,
        "accuracy_at_step_ci95": accuracy_intervals(acc, set_sizes) if acc and set_sizes else None,
        "phases": phases.to_dict() if phases is not None else None,
        "measures": {
            name: {"threshold": t, "definition": d} for name, (t, d) in ALL_MEASURES.items()
        },
        "training_dynamics": to_jsonable(history.to_dict()) if history else None,
        "phase2_plateau": to_jsonable(plateau),
        "definition_agreement": to_jsonable(definition_agreement(history)) if history else None,
        "spike_comparisons": {
            "steps": compare,
            "first_spike": to_jsonable(comparison_numbers(first_cmp)),
            "second_spike": to_jsonable(comparison_numbers(second_cmp)),
        },
    }
