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

from empirical.config_io import to_dict
from empirical.model import CheckpointError, load_checkpoint, save_model


def save_training_state(
    path: str | os.PathLike,
    model,
    optimizer: torch.optim.Optimizer,
    data_generator: torch.Generator,
    step: int,
    run_config,
    train_loss_sum: float,
    elapsed_s: float,
) -> None:
    extra = {
        "step": int(step),
        "optimizer_state": optimizer.state_dict(),
        "data_rng_state": data_generator.get_state().cpu(),
        "torch_rng_state": torch.get_rng_state(),
        "run_config": to_dict(run_config),
        "train_loss_sum": float(train_loss_sum),
        "elapsed_s": float(elapsed_s),
    }
    save_model(model, path, extra=extra)


def load_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint dict, checked to hold everything a resume needs."""
    ckpt = load_checkpoint(path)
    missing = [
        k
        for k in ("step", "optimizer_state", "data_rng_state", "torch_rng_state", "run_config")
        if k not in ckpt
    ]
    if missing:
        raise CheckpointError(
            f"checkpoint {Path(path)}: not a training checkpoint (missing {', '.join(missing)})"
        )
    return ckpt
