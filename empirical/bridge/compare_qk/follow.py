"""compare-qk's per-snapshot analysis, done while the run trains: a snapshot with a successor
on disk is analysed before the training ends. `done` maps `snapshot_key` (both steps, both
files' size and modification time) to `analyse_snapshot`'s (scalars, blocks); `compare_run`
takes an entry only where its key matches the files it finds (the same result, tested).

    done = follow_snapshots(SnapshotInputs.of(run_dir, opts), stop)  # until stop.is_set()
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from empirical.bridge.compare_qk.snapshot import analyse_snapshot, comparison_inputs
from empirical.bridge.compare_qk.updates import decay_factor
from empirical.model.checkpoint import load_model
from empirical.runs.rundir import RunDir


def _signature(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def snapshot_key(step: int, path: Path, next_step: int | None, next_path: Path | None) -> tuple:
    """What identifies one snapshot's analysis: its step and file, and its successor's (a
    snapshot rewritten since, e.g. by a resumed run, has another key)."""
    after = None if next_path is None else (next_step, *_signature(next_path))
    return (step, *_signature(path), after)


@dataclass
class SnapshotInputs:
    """Everything `analyse_snapshot` reads besides the two models: the run's config, the
    comparison's 1-var batch and its G1 predictor (built once, as `compare_run` builds them)."""

    run: RunDir
    cfg: Any
    opts: Any
    held: Any
    batch: Any
    predict: Any

    @classmethod
    def of(cls, run_dir, opts, cfg=None) -> SnapshotInputs:
        """The inputs for the run in `run_dir`; `cfg`: its config, where the caller has read
        it already (run.read_two_layer_config("compare-qk"))."""
        run = RunDir(run_dir).require_run()
        if cfg is None:
            cfg = run.read_two_layer_config("compare-qk")
        return cls(run, cfg, opts, *comparison_inputs(cfg.task, cfg.seed, opts))

    def analyse(self, step: int, model, next_step: int | None, next_model) -> tuple[dict, dict]:
        """analyse_snapshot of the snapshot at `step` and its successor (None: the last)."""
        decay = decay_factor(self.cfg.train, step, next_step) if next_step is not None else None
        return analyse_snapshot(
            model, self.cfg.task, self.batch, self.opts, next_model, self.predict, decay
        )


def follows(opts) -> bool:
    """Whether `follow_snapshots` can work ahead for these options: every snapshot analysed
    (no --steps, no --every), since which ones a thinned list holds is known only at the end."""
    return opts.steps is None and opts.every <= 1


def follow_snapshots(inputs: SnapshotInputs, stop, poll_s: float = 2.0) -> dict:
    """Analyse each snapshot of `inputs.run` with a successor as they appear, until
    `stop.is_set()` (checked every `poll_s` seconds): {snapshot_key: (scalars, blocks)}. A pair
    that cannot be read is left out: compare_run meets it again and reports it."""
    done: dict = {}
    if not follows(inputs.opts):
        return done
    tried: set[int] = set()  # steps analysed or unreadable: each pair is tried once
    models: dict[Path, Any] = {}  # each file read once: a snapshot, then its successor
    while not stop.is_set():
        snaps = inputs.run.snapshots()
        pending = [(a, b) for a, b in zip(snaps, snaps[1:], strict=False) if a[0] not in tried]
        if not pending:
            time.sleep(poll_s)
            continue
        for (step, path), (next_step, next_path) in pending:
            if stop.is_set():
                break
            tried.add(step)
            try:
                key = snapshot_key(step, path, next_step, next_path)
                model = models.pop(path, None) or load_model(path)
                nxt = load_model(next_path)
            except Exception:  # noqa: BLE001 - compare_run reads it again and says what is wrong
                models = {}
                continue
            models = {next_path: nxt}
            done[key] = inputs.analyse(step, model, next_step, nxt)
    return done
