"""Learning-rate schedule: linear warm-up to `lr`, then constant or cosine decay to 0."""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine")


def learning_rate(
    step: int, lr: float, warmup_steps: int, schedule: str = "constant", total_steps: int = 0,
    warmup_from: int = 0,
) -> float:  # fmt: skip
    """Learning rate used for optimiser step number `step` (0-based). 'cosine' decays from
    `lr` after the warm-up to 0 at `total_steps` (half a cosine period). A recovery warm-up
    (`warmup_from` > 0, set by a resume) ramps from 0 again over the steps that follow it and
    then multiplies the schedule."""
    if warmup_from > 0:
        base = learning_rate(step, lr, 0, schedule, total_steps)
        if warmup_steps > 0 and warmup_from <= step < warmup_from + warmup_steps:
            return base * (step - warmup_from + 1) / warmup_steps
        return base
    if warmup_steps > 0 and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    if schedule == "cosine":
        span = max(total_steps - warmup_steps, 1)
        done = min(max(step - warmup_steps, 0), span) / span
        return lr * 0.5 * (1.0 + math.cos(math.pi * done))
    raise ValueError(f"unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")


def schedule_of(tc) -> dict:
    """The keyword arguments of `learning_rate` that a TrainConfig fixes (besides lr)."""
    return {
        "warmup_steps": tc.warmup_steps,
        "schedule": tc.lr_schedule,
        "total_steps": tc.steps,
        "warmup_from": tc.warmup_from,
    }
