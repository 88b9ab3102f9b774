"""Accuracy of every evaluation set of a run, at any step; over all snapshots, the run's
metrics log, summary and Figure 2 (for an imported run, which has no training log). The
library side of `python -m empirical evaluate`.

    result = evaluate_run("runs/authors")                 # final model
    result = evaluate_run("runs/authors", step=5401)      # the snapshot at step 5401
    # {"step": 5401, "accuracy": {"0var/ind": ..., ...}, "loss": {...}, "n": {...}}
    records, summary = evaluate_all_steps("runs/authors") # metrics.jsonl, summary.json, png

The evaluation sets are the run's eval_sets.pt (built and saved if absent), loaded once per call.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from disentangled.command_line import UsageError, check_writable_dir
from empirical.model.checkpoint import load_checkpoint, model_from_checkpoint
from empirical.model.device import resolve_device
from empirical.report.files import atomic_write_bytes
from empirical.runs.config import config_fingerprint
from empirical.runs.lock import writer_lock
from empirical.runs.rundir import SNAPSHOT_RE, RunDir, RunDirError
from empirical.task.eval_sets import build_eval_sets, save_eval_sets
from empirical.train.evaluate import SetEvaluator
from empirical.train.options import DEFAULT_BATCH_SIZE
from empirical.train.summary import write_summary


def run_eval_sets(run: RunDir, cfg=None):
    """The run's evaluation sets (EvalSets, on the CPU): eval_sets.pt, checked to be its
    task's and seed's, or built from the run's config and saved there if absent (in memory
    only, with a note, where the directory cannot be written). No writer lock needed: the file
    is a function of the task and seed, written atomically."""

    cfg = run.read_config() if cfg is None else cfg
    sets = run.read_eval_sets(cfg)
    if sets is not None:
        return sets
    sets = build_eval_sets(cfg.task, cfg.seed, device="cpu")
    try:
        save_eval_sets(sets, run.eval_sets)
    except OSError as exc:
        print(f"note: evaluation sets not saved ({exc.strerror or exc}: {run.eval_sets})",
              file=sys.stderr)  # fmt: skip
    return sets


def _step_of(ckpt: dict, path: Path) -> int | None:
    step = ckpt.get("step")
    if isinstance(step, int) and not isinstance(step, bool):
        return step
    m = SNAPSHOT_RE.fullmatch(path.name)
    return int(m.group(1)) if m else None


class _Evaluator:
    """The run's evaluation sets on `device` (empirical.train.evaluate.SetEvaluator: one
    concatenation, one forward per chunk), applied to model files."""

    def __init__(self, sets: dict, device: torch.device, batch_size: int, run: RunDir):
        self.run, self.device = run, device
        on_device = {name: batch.to(device) for name, batch in sets.items()}
        self.sets = SetEvaluator(on_device, batch_size)
        self.sizes = dict(self.sets.sizes)

    def __call__(self, path: Path) -> tuple[int | None, dict, dict]:
        ckpt = load_checkpoint(path)
        self.run.check_model_file(ckpt, path)
        model = model_from_checkpoint(ckpt, path, device=self.device)
        acc, loss, _ = self.sets.evaluate(model)
        return _step_of(ckpt, path), acc, loss


def _evaluator(run: RunDir, batch_size: int, device) -> _Evaluator:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"--batch-size {batch_size}: must be an integer >= 1")
    device = resolve_device(device) if not isinstance(device, torch.device) else device
    return _Evaluator(run_eval_sets(run), device, batch_size, run)


def evaluate_run(
    run_dir: str | os.PathLike | RunDir, step: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE, device: Any = "cpu",
) -> dict[str, Any]:  # fmt: skip
    """{"step", "accuracy": {set: acc}, "loss": {set: loss}, "n": {set: size}} of the run's
    final model (step None) or its snapshot at `step`."""
    run = RunDir(run_dir).require_run()
    path = run.model_path(step)  # RunDirError listing the available steps
    ev = _evaluator(run, batch_size, device)
    found, acc, loss = ev(path)
    step = step if step is not None else found
    return {"step": step, "accuracy": acc, "loss": loss, "n": dict(ev.sizes)}


def has_training_log(run: RunDir) -> bool:
    """Whether the run holds its own training record: a resumable checkpoint, or a metrics
    log with a training loss (what `evaluate --all-steps` must not overwrite)."""
    if run.last_checkpoint.exists():
        return True
    return any(r.get("train_loss") is not None for r in run.read_metrics())


def write_evaluated_log(run: RunDir, cfg, ev, models, **extra) -> list[dict]:
    """Evaluate each (step, model file) with `ev` and write the run's metrics.jsonl from
    them (atomically): records in the training log's format, training loss, lr and time
    null (they were not recorded), plus any `extra` fields. Returns the records."""
    fingerprint = config_fingerprint(cfg)
    records = []
    for step, path in models:
        _, acc, loss = ev(path)
        unknown = {"train_loss": None, "lr": None, "elapsed_s": None}
        record = {"step": step, **unknown, "acc": acc, "loss": loss, "fingerprint": fingerprint}
        records.append({**record, **extra})
    atomic_write_bytes(run.metrics, "".join(json.dumps(r) + "\n" for r in records).encode())
    return records


def evaluate_all_steps(
    run_dir: str | os.PathLike | RunDir, batch_size: int = DEFAULT_BATCH_SIZE,
    device: Any = "cpu", force: bool = False, progress: bool = False,
) -> tuple[list[dict], dict]:  # fmt: skip
    """Evaluate every snapshot of the run; write metrics.jsonl (one record per snapshot,
    train_loss, lr and elapsed_s null), summary.json and training_curves.png, under the run's
    writer lock. Returns (records, summary). Refused on a run with its own training log
    (has_training_log) unless `force`."""
    run = RunDir(run_dir).require_run()
    with writer_lock(run, "RUN_DIR"):
        return _evaluate_all_steps(run, batch_size, device, force, progress)


def _evaluate_all_steps(
    run: RunDir, batch_size: int, device: Any, force: bool, progress: bool
) -> tuple[list[dict], dict]:
    if not force and has_training_log(run):
        raise UsageError(
            f"{run}: holds a training run ({RunDir.CHECKPOINTS}/{RunDir.LAST} or a training log "
            f"in {RunDir.METRICS}); --all-steps would replace its training log. Pass --force "
            "to do it anyway"
        )
    snaps = run.snapshots()
    if not snaps:
        raise RunDirError(f"{run}: no {RunDir.SNAPSHOTS}/step_*.pt to evaluate")
    check_writable_dir(run.path, "RUN_DIR")  # it writes there: checked before evaluating
    cfg = run.read_config()
    ev = _evaluator(run, batch_size, device)
    t0 = time.perf_counter()
    records = write_evaluated_log(
        run, cfg, ev, tqdm(snaps, desc="evaluate", disable=not progress, leave=False)
    )
    summary = write_summary(
        cfg, run.path, records, elapsed_s=None, device=ev.device, sizes=dict(ev.sizes)
    )
    summary["evaluation_s"] = time.perf_counter() - t0
    summary.setdefault("eval_set_sizes", dict(ev.sizes))
    return records, summary


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table of one evaluate_run result."""
    acc, n = result["accuracy"], result.get("n", {})
    width = max([len("set")] + [len(k) for k in acc])
    lines = [f"step {result['step']}", f"{'set':<{width}}  {'n':>6}  accuracy"]
    for name, value in acc.items():
        lines.append(f"{name:<{width}}  {n.get(name, ''):>6}  {100 * value:7.2f}%")
    return "\n".join(lines)
