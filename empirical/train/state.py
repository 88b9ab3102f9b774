"""Resumable training checkpoints: model + optimiser + RNG + step + run config, atomically.

A training checkpoint is a model checkpoint (empirical.model.save_model) with extra entries,
so `load_model(path)` works on it too. `checkpoints/last.pt` is replaced atomically: a kill
during a write leaves the previous one intact.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from empirical.config.io import to_dict
from empirical.model.checkpoint import CheckpointError, load_checkpoint, save_model
from empirical.runs.config import config_fingerprint


def save_training_state(
    path: str | os.PathLike, model, optimizer_state: dict, data_generator: torch.Generator,
    step: int, run_config, elapsed_s: float, loss_windows: dict[str, Any],
) -> None:  # fmt: skip
    """Write everything a resume needs, atomically: the model, `optimizer_state` (a
    state_dict), the data generator's and torch's RNG states, the step, the run config and its
    fingerprint, the elapsed time and the training-loss sums (`loss_windows`: LossWindows)."""
    extra = {
        "step": int(step),
        "config_fingerprint": config_fingerprint(run_config),
        "optimizer_state": optimizer_state,
        "data_rng_state": data_generator.get_state().cpu(),
        "torch_rng_state": torch.get_rng_state(),
        "run_config": to_dict(run_config),
        "elapsed_s": float(elapsed_s),
        **loss_windows,
    }
    save_model(model, path, extra=extra)


def load_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint dict, checked to hold everything a resume needs."""
    ckpt = load_checkpoint(path)
    needed = ("step", "optimizer_state", "data_rng_state", "torch_rng_state", "run_config")
    missing = [k for k in needed if k not in ckpt]
    if missing:
        raise CheckpointError(
            f"checkpoint {Path(path)}: not a training checkpoint (missing {', '.join(missing)})"
        )
    return ckpt
