"""TensorBoard event files of a run, written beside metrics.jsonl (`train.tensorboard = true`).

    python -m empirical train --config configs/quick.toml train.tensorboard=true
    tensorboard --logdir runs/quick          # every run under it, one curve per run

Every metrics record is also written as scalars at its step, named as `empirical.load_metrics`'
columns (`train_loss`, `lr`, `acc/<set>`, `loss/<set>`), flushed after every record;
metrics.jsonl stays the record of the run. Needs the `tensorboard` extra (pip install -e
".[tensorboard]"); without it a run asking for it is refused before it trains.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
from collections import OrderedDict
from pathlib import Path

from empirical.config.io import ConfigError

MAX_OPEN = 16  # writers kept open at once (a sweep has one run directory per member)
_writers: OrderedDict[Path, object] = OrderedDict()
_atexit_registered = False


def tensorboard_available() -> bool:
    """Whether SummaryWriter can be used here (the `tensorboard` package is installed);
    checked without importing it or torch."""
    return importlib.util.find_spec("tensorboard") is not None


def require_tensorboard() -> None:
    """A ConfigError naming the extra to install unless SummaryWriter can be used here."""
    if not tensorboard_available():
        raise ConfigError(
            "train.tensorboard = true needs the tensorboard package: "
            'pip install -e ".[tensorboard]" (or pip install tensorboard), or set '
            "train.tensorboard=false"
        )


def scalars(record: dict) -> dict[str, float]:
    """The TensorBoard scalars of one metrics record: {name: value}, finite numbers only."""
    items = [(name, record.get(name)) for name in ("train_loss", "lr")]
    for table in ("acc", "loss"):
        items += [(f"{table}/{name}", v) for name, v in (record.get(table) or {}).items()]
    return {n: float(v) for n, v in items if isinstance(v, (int, float)) and math.isfinite(v)}


def log_record(run_dir: str | os.PathLike, record: dict) -> None:
    """Write `record`'s scalars at its step to the event file of `run_dir`, and flush."""
    writer = _writer(Path(run_dir))
    step = int(record["step"])
    for name, value in scalars(record).items():
        writer.add_scalar(name, value, global_step=step)
    writer.flush()


def close_all() -> None:
    """Close every open writer (each has flushed already; this ends their threads)."""
    while _writers:
        _, writer = _writers.popitem(last=False)
        writer.close()


def _writer(run_dir: Path):
    """The open SummaryWriter of `run_dir` (opened on first use; the least recently used
    one is closed when more than MAX_OPEN are open)."""
    global _atexit_registered
    key = run_dir.resolve()
    if key in _writers:
        _writers.move_to_end(key)
        return _writers[key]
    require_tensorboard()
    from torch.utils.tensorboard import SummaryWriter

    if not _atexit_registered:
        atexit.register(close_all)
        _atexit_registered = True
    _writers[key] = SummaryWriter(log_dir=str(run_dir))
    while len(_writers) > MAX_OPEN:
        _, oldest = _writers.popitem(last=False)
        oldest.close()
    return _writers[key]
