"""Theorem C.1's predicted layer-2 key-query update against a trained run, over its snapshots:
each snapshot analysed (`snapshot.analyse_snapshot`), then the training windows (`windows`)
and the one-step test (`one_step`). Definitions: docs/compare_qk.md.

    result = compare_run("runs/paper/seed0")            # a dict of every number
    write_report(outputs.report(result), "runs/paper/seed0/compare_qk")  # JSON, npz, md, PNGs
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from disentangled.errors import UsageError
from empirical.bridge.compare_qk.coords import coordinates
from empirical.bridge.compare_qk.follow import SnapshotInputs, snapshot_key
from empirical.bridge.compare_qk.frames import FRAMES
from empirical.bridge.compare_qk.metrics import SUBBLOCKS, null_cos95, subblock
from empirical.bridge.compare_qk.observe import one_var_batch
from empirical.bridge.compare_qk.one_step import one_step_experiment
from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.prediction import (
    closed_form_applies,
    make_predictor,
    prediction_kind,
)
from empirical.bridge.compare_qk.windows import default_windows, window_summary
from empirical.model.checkpoint import load_model
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import RunDir, RunDirError
from empirical.task.eval_sets import build_eval_sets
from empirical.task.pairs import held_out_pairs


def first_zero_var_step(records: list[dict], snap_steps: list[int], level: float = 0.9):
    """The first snapshot at or after the first evaluation with 0var/ind >= level."""
    for r in records:
        if r.get("acc", {}).get("0var/ind", 0.0) >= level:
            later = [s for s in snap_steps if s >= r["step"]]
            return later[0] if later else None
    return None


def one_step_default(records, phases, snap_steps) -> tuple[int | None, str]:
    """(step, rule) of the one-step test by default: the last snapshot before the first
    spike's jump (the model has learned 0-var addition, the routing is still missing: the
    theorem's starting point), else the first snapshot with 0var/ind >= 0.9."""
    spike = (phases or {}).get("first_spike")
    if spike:
        jump = spike.get("jump_start_step", spike["start_step"])
        before = [s for s in snap_steps if s <= jump]
        if before:
            return before[-1], f"last snapshot at or before the first spike's jump ({jump})"
    return first_zero_var_step(records, snap_steps), "first snapshot with 0var/ind >= 0.9"


def _metrics_at(records, step):
    return next((r.get("acc", {}) for r in records if r["step"] == step), {})


@dataclass
class RunSnapshots:
    """A run's snapshots and what the comparison reads besides them: its config, metrics and
    detected phases."""

    run: RunDir
    cfg: object
    steps: list[int]
    by_step: dict[int, Path]
    records: list[dict]
    phases: dict | None

    def next_step(self, step: int) -> int | None:
        later = [s for s in self.steps if s > step]
        return later[0] if later else None


def chosen_steps(opts: Options, snap_steps: list[int]) -> list[int]:
    """The snapshots to analyse: --steps (each must be a snapshot), every --every-th."""
    if opts.steps is None:
        return snap_steps[:: max(opts.every, 1)]
    missing = [s for s in opts.steps if s not in snap_steps]
    if missing:
        raise UsageError(f"--steps: no snapshot at steps {missing}; available: {snap_steps}")
    return sorted(set(opts.steps))[:: max(opts.every, 1)]


def check_options(task, opts: Options, snap_steps: list[int]) -> str:
    """UsageError for options this run cannot have (before any work); returns the prediction's
    kind (`prediction.prediction_kind`)."""
    if opts.one_step and opts.one_step_at is not None and opts.one_step_at not in snap_steps:
        raise UsageError(
            f"--one-step-at {opts.one_step_at}: no snapshot there; available {snap_steps}"
        )
    if opts.all_assigned and not closed_form_applies(task.K, task.L):
        raise UsageError(
            f"--all-assigned: K = {task.K} variables do not fit in the {task.L - 4} assignment "
            "positions"
        )
    kind = prediction_kind(task, opts)  # a bad --prediction fails before the work
    if opts.frame not in FRAMES:
        raise UsageError(f"--frame must be one of {FRAMES}, got {opts.frame!r}")
    return kind


def analyse_snapshots(
    snaps: RunSnapshots, inputs: SnapshotInputs, chosen: list[int], done: dict, t0: float
) -> tuple[list[dict], dict[str, list], dict]:
    """(per-snapshot records, {block name: [(step, block)]}, the blocks' labels) of the
    chosen snapshots, each with its successor; an entry of `done` (analysed ahead) is taken
    where its key matches the files found now. Each file is read once."""
    opts, task = inputs.opts, inputs.cfg.task
    records, all_blocks, labels = [], {}, None
    cached_step, cached = None, None  # the last snapshot's next: read each file once
    for i, step in enumerate(chosen):
        next_step = snaps.next_step(step)
        key = snapshot_key(step, snaps.by_step[step], next_step, snaps.by_step.get(next_step))
        model = None
        if key in done:  # analysed ahead, from these very files
            scal, blocks = done[key]
            scal = dict(scal)
        else:
            model = cached if cached_step == step else load_model(snaps.by_step[step])
            nxt = load_model(snaps.by_step[next_step]) if next_step is not None else None
            cached_step, cached = next_step, nxt
            scal, blocks = inputs.analyse(step, model, next_step, nxt)
        scal |= {"step": step, "next_step": next_step,
                 "metrics_acc": _metrics_at(snaps.records, step)}  # fmt: skip
        records.append(scal)
        for k, v in blocks.items():
            all_blocks.setdefault(k, []).append((step, v))
        if labels is None:
            model = load_model(snaps.by_step[step]) if model is None else model
            raw = coordinates(model, task.p, task.K, task.L)
            labels = {"rows": raw.rows, "cols": raw.cols}
        if opts.progress:
            c = scal["comparison"][opts.frame]["grad_ce"]["cos"]
            print(f"[compare-qk] step {step:6d} ({i + 1}/{len(chosen)}, {time.time() - t0:5.0f}s) "
                  f"a={scal['a']:.3f} cos({opts.frame} grad_ce): all {c['all']:+.3f} "
                  f"bar_v {c['barv_barv']:+.3f}", flush=True)  # fmt: skip
    return records, all_blocks, labels


def one_step_at(snaps: RunSnapshots, opts: Options, sets: dict | None, held) -> dict:
    """The one-step test's result at --one-step-at or the default snapshot
    (`one_step_default`), or {"skipped": why}. sets: the run's saved evaluation sets (None:
    built from its config); held: the held-out pairs of the comparison's G1."""
    at, rule = opts.one_step_at, "--one-step-at"
    if at is None:
        at, rule = one_step_default(snaps.records, snaps.phases, snaps.steps)
    if at is None:
        return {"skipped": "no snapshot with 0var/ind >= 0.9 (use --one-step-at)"}
    if at not in snaps.by_step:
        raise UsageError(f"--one-step-at {at}: no snapshot there; available {snaps.steps}")
    task, seed = snaps.cfg.task, snaps.cfg.seed
    if sets is None:
        sets = build_eval_sets(task, seed)
    t1 = time.time()
    held_os = held_out_pairs(task, seed) if opts.one_step_distribution == "train" else None
    batch_os = one_var_batch(
        task, opts.batch_size, opts.seed, opts.one_step_order, opts.one_step_distribution,
        held_os, opts.all_assigned,
    )  # fmt: skip
    # G1 of the comparison's distribution (default: the run's own) in the one-step data's
    # operand order
    pred_os = make_predictor(task, opts, opts.one_step_order, held_out=held)
    res = one_step_experiment(
        load_model(snaps.by_step[at]), task, batch_os, sets, opts, opts.one_step_order, pred_os
    )
    res |= {"step": at, "rule": rule, "metrics_acc": _metrics_at(snaps.records, at),
            "elapsed_one_step_s": time.time() - t1}  # fmt: skip
    if opts.progress:
        print(f"[compare-qk] one-step test at step {at}: {time.time() - t1:.0f}s", flush=True)
    return res


def compare_run(run_dir, opts: Options | None = None, done: dict | None = None) -> dict:
    """Every number of the comparison for the run in `run_dir` (see the module docstring).
    `done`: snapshot analyses made ahead (`empirical.bridge.compare_qk.follow`), used where their
    files are still the ones found here."""
    opts = opts or Options()
    run = RunDir(run_dir).require_run()
    cfg = run.read_two_layer_config("compare-qk")
    task = cfg.task
    found = run.snapshots()
    if not found:
        raise RunDirError(f"{run}: no snapshots (train with train.snapshot_every > 0)")
    snap_steps = [s for s, _ in found]
    by_step = dict(found)
    chosen = chosen_steps(opts, snap_steps)
    kind = check_options(task, opts, snap_steps)
    records = run.read_metrics()
    saved_sets = run.read_eval_sets(cfg) if opts.one_step else None  # checked before the work
    phases = detect_phases(records).to_dict() if records else None
    snaps = RunSnapshots(run, cfg, snap_steps, by_step, records, phases)
    inputs = SnapshotInputs.of(run.path, opts, cfg=cfg)  # the config read once
    t0 = time.time()
    result = {
        "run_dir": str(run.path),
        "task": {"p": task.p, "K": task.K, "L": task.L},
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k != "progress"},
        "prediction": kind,
        "frame": opts.frame,
        "phases": phases,
        "snapshot_steps": snap_steps,
        "labels": None,
        "steps": [],
    }
    result["steps"], all_blocks, result["labels"] = analyse_snapshots(
        snaps, inputs, chosen, done or {}, t0
    )
    wins = opts.windows if opts.windows is not None else default_windows(phases, chosen)
    result["windows_source"] = "options" if opts.windows is not None else "phases"
    result["windows"] = window_summary(result["steps"], wins, opts.frame)
    rows, cols = result["labels"]["rows"], result["labels"]["cols"]
    result["null95"] = {
        k: null_cos95(subblock(np.zeros((len(rows), len(cols))), rows, cols, k).size)
        for k in SUBBLOCKS
    }
    result["_blocks"] = all_blocks
    if opts.one_step:
        result["one_step"] = one_step_at(snaps, opts, saved_sets, inputs.held)
    result["elapsed_s"] = time.time() - t0
    return result
