"""Repair what a crash, a full disk or a hand edit left in a run directory; the library side of
`python -m empirical repair RUN_DIR [--rebuild-eval-sets]`.

    messages = repair_metrics(RunDir("runs/paper/seed0"))
    messages = rebuild_eval_sets(RunDir("runs/paper/seed0"))

metrics.jsonl with bad lines: every valid line kept, the others dropped and named, the file
as it was kept as metrics.jsonl.bak. metrics.jsonl missing: rebuilt from the snapshots up to
the checkpoint step and the checkpoint itself (`train_loss`, `lr`, `elapsed_s` null,
`"rebuilt": true`). eval_sets.pt unreadable or another task's or seed's: built again from
the run's config. Both under the run directory's writer lock (docs/robustness.md).
"""

from __future__ import annotations

import json

from disentangled.command_line import check_writable_dir
from empirical.report.files import atomic_write_bytes
from empirical.runs.config import config_fingerprint
from empirical.runs.lock import writer_lock
from empirical.runs.metrics_log import scan_metrics
from empirical.runs.rundir import RunDir
from empirical.task.eval_sets import build_eval_sets, save_eval_sets
from empirical.train.engine import checkpoint_step
from empirical.train.evaluate_run import _evaluator, write_evaluated_log
from empirical.train.options import DEFAULT_BATCH_SIZE


def repair_metrics(run: RunDir) -> list[str]:
    """Repair or rebuild the run's metrics.jsonl (see the module docstring), under the run
    directory's writer lock; returns what was done, one line each."""
    run = RunDir(run).require_run()
    with writer_lock(run, "RUN_DIR"):
        return _repair_metrics(run)


def _repair_metrics(run: RunDir) -> list[str]:
    cfg = run.read_config()
    if not run.metrics.exists():
        return _rebuild_metrics(run, cfg)
    scan = scan_metrics(run.metrics, config_fingerprint(cfg))
    dropped = list(scan.bad) + ([(scan.torn, "is incomplete")] if scan.torn else [])
    if not dropped:
        return [f"{run.metrics}: {len(scan.records)} records, every line valid: nothing to repair"]
    check_writable_dir(run.path, "RUN_DIR")
    original = run.metrics.read_bytes()
    atomic_write_bytes(run.metrics_backup, original)
    text = "".join(json.dumps(r) + "\n" for r in scan.records)
    atomic_write_bytes(run.metrics, text.encode())
    lines = [
        f"{run.metrics}: kept {len(scan.records)} valid records, dropped {len(dropped)} "
        f"line(s); the file as it was is in {run.metrics_backup}"
    ]
    lines += [f"  dropped line {n}: it {why}" for n, why in sorted(dropped)]
    return lines


def _rebuild_metrics(run: RunDir, cfg) -> list[str]:
    last = checkpoint_step(run)
    models = [(s, p) for s, p in run.snapshots() if not last or s <= last]
    if last and last not in {s for s, _ in models}:
        models.append((last, run.last_checkpoint))
    if not models:
        return [f"{run.metrics}: missing, and the run has no snapshot or checkpoint to rebuild it"]
    check_writable_dir(run.path, "RUN_DIR")
    ev = _evaluator(run, DEFAULT_BATCH_SIZE, "cpu")
    records = write_evaluated_log(run, cfg, ev, models, rebuilt=True)
    steps = [r["step"] for r in records]
    return [
        f"{run.metrics}: was missing; rebuilt {len(records)} records (steps {steps[0]}..."
        f"{steps[-1]}) from the snapshots and the checkpoint; training losses are unknown (null)"
    ]


def rebuild_eval_sets(run: RunDir) -> list[str]:
    """Build the run's eval_sets.pt again from its config (replacing the file)."""

    run = RunDir(run).require_run()
    with writer_lock(run, "RUN_DIR"):
        cfg = run.read_config()
        check_writable_dir(run.path, "RUN_DIR")
        sets = build_eval_sets(cfg.task, cfg.seed, device="cpu")
        save_eval_sets(sets, run.eval_sets)
    return [f"{run.eval_sets}: rebuilt from {run.config} (seed {cfg.seed}, {len(sets)} sets)"]
