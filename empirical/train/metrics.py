"""The run's metrics log: one JSON object per line (`metrics.jsonl`), one line per evaluation.

{"step": 250, "train_loss": 4.1, "lr": 0.001, "elapsed_s": 12.3,
 "acc": {"0var/ind": 0.41, ...}, "loss": {"0var/ind": 3.2, ...}}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append_metrics(path: str | os.PathLike, record: dict[str, Any]) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every complete line of the log (a torn last line from a crash is skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def truncate_metrics(path: str | os.PathLike, last_step: int) -> None:
    """Keep the records with step <= last_step (resuming from a checkpoint at last_step)."""
    from empirical.config_io import atomic_write_bytes

    path = Path(path)
    kept = [r for r in read_metrics(path) if r["step"] <= last_step]
    atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in kept).encode())


def accuracy_series(records: list[dict[str, Any]], name: str) -> tuple[list[int], list[float]]:
    """(steps, accuracies) of evaluation set `name` over the log."""
    steps = [r["step"] for r in records if name in r.get("acc", {})]
    accs = [r["acc"][name] for r in records if name in r.get("acc", {})]
    return steps, accs
