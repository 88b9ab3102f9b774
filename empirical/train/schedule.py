"""Learning-rate schedule: linear warm-up to `lr`, then constant (the paper's AdamW run)."""

from __future__ import annotations


def learning_rate(step: int, lr: float, warmup_steps: int) -> float:
    """Learning rate used for optimiser step number `step` (0-based)."""
    if warmup_steps > 0 and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    return lr
