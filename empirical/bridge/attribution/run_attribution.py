"""One window of a run attributed: the path, the targets, the split, the checks.

    result = attribute_window(run_dir, 3300, 3600, AttributionOptions())
    result["targets"]["loss/1var/ind"]     # {"total", "groups", "residual", "residual_rel", ...}

The path: a trained run's training replayed from a checkpoint at or before the window's start,
checked bit for bit against every snapshot it keeps in the range (`replay`); an imported run's
straight lines between its snapshots (`straight`).
"""

from __future__ import annotations

from pathlib import Path

from tqdm.auto import tqdm

from disentangled.errors import UserError
from empirical.bridge.attribution.first_order import first_order
from empirical.bridge.attribution.options import AttributionOptions, check_window
from empirical.bridge.attribution.paths import along_segments, along_steps
from empirical.bridge.attribution.replay import (
    adam_denominators,
    check_replayed,
    learner_weights,
    replay,
    replay_learner,
)
from empirical.bridge.attribution.targets import Targets, float64_weights
from empirical.model.checkpoint import CheckpointError, load_checkpoint
from empirical.runs.rundir import RunDir
from empirical.train.state import load_training_state


class AttributionError(UserError, ValueError):
    """A window, checkpoint or run the attribution cannot use."""


def attribute_window(run_dir, start: int, stop: int, opts: AttributionOptions) -> dict:
    """The attribution of steps start..stop of the run (module docstring): a dict with the
    window, the path and its checks, per target the split (headline rule) and every rule's
    residual, and `_path` (the PathAttribution, for the figures and the npz)."""
    run = RunDir(run_dir).require_run()
    cfg = run.read_two_layer_config("attribute")
    try:
        check_window(start, stop)
    except ValueError as exc:
        raise AttributionError(f"--window {start}:{stop}: {exc}") from None
    kind = opts.path
    if kind == "both":
        raise AttributionError("attribute_window takes one path: 'replay' or 'straight' (the "
                               "command's --path both runs each)")  # fmt: skip
    if kind == "auto":
        kind = "straight" if run.imported.exists() else "replay"
    sets = _eval_sets(run, cfg, opts)
    if kind == "replay":
        checkpoint, ckpt_path = _checkpoint(run, cfg, start, opts.checkpoint)
        (w_a, w_b), checks, adam = _replay_ends(run, cfg, checkpoint, start, stop, opts)
        source = {"kind": "replay", "checkpoint": ckpt_path, "checkpoint_step": checkpoint["step"]}
    else:  # straight
        steps = _snapshots(run, start, stop)
        (w_a, w_b), checks, adam = (_weights(run, start), _weights(run, stop)), [], {}
        source = {"kind": "straight", "snapshots": steps}
    targets = Targets.of(cfg, sets, opts.eval_size, w_a, w_b)
    result = {
        "run_dir": str(run.path), "window": [start, stop], "path": source,
        "replay_checks": checks, "eval_size": opts.eval_size, "null_draws": opts.null_draws,
        "first_order": first_order(cfg, targets, w_a, w_b, adam=adam, draws=opts.null_draws),
    }  # fmt: skip
    if opts.first_order_only:
        return result
    if kind == "replay":
        total = stop - int(checkpoint["step"]) + 1
        replayed = _progress(replay(cfg, checkpoint, stop), opts, total)
        states = ((s, float64_weights(w)) for s, w in replayed if s >= start)
        path = along_steps(states, targets, opts.rule)
    else:
        loaded = ((s, _weights(run, s)) for s in _progress(steps, opts, len(steps)))
        path = along_segments(loaded, targets, opts.nodes)
    rules = {r: {t: v["residual_rel"] for t, v in path.result(r).items()} for r in path.rules}
    return {**result, "rule": path.rule, "targets": path.result(), "rules": rules, "_path": path}


def _eval_sets(run: RunDir, cfg, opts: AttributionOptions) -> dict:
    sets = run.read_eval_sets(cfg)
    if sets is None:
        raise AttributionError(f"{run.path}: no {RunDir.EVAL_SETS}; the loss targets need it")
    if opts.sets:
        unknown = [s for s in opts.sets if s not in sets]
        if unknown:
            raise AttributionError(
                f"--sets {','.join(unknown)}: not an evaluation set of the run; allowed "
                f"{', '.join(sets)}"
            )
        return {s: sets[s] for s in opts.sets}
    return dict(sets)


def _checkpoint(run: RunDir, cfg, start: int, given: str | None) -> tuple[dict, str]:
    """The training checkpoint to replay from (at or before `start`), checked to be the
    run's."""
    path = Path(given) if given else run.last_checkpoint
    make = (
        f"make one by training the run's config again to that step (deterministic): python -m "
        f"empirical train --config {run.config} --run-dir DIR --stop-at C (C <= {start}, a "
        f"multiple of train.checkpoint_every = {cfg.train.checkpoint_every}), then --checkpoint "
        "DIR/checkpoints/last.pt"
    )
    if not path.is_file():
        raise AttributionError(f"no training checkpoint at {path}; {make}")
    try:
        ckpt = load_training_state(path)
    except CheckpointError as exc:
        raise AttributionError(f"{exc}; {make}") from None
    run.check_model_file(ckpt, path, cfg)
    if int(ckpt["step"]) > start:
        raise AttributionError(
            f"the checkpoint {path} is at step {ckpt['step']}, after the window's start {start}; "
            + make
        )
    return ckpt, str(path)


def _replay_ends(run: RunDir, cfg, checkpoint: dict, start: int, stop: int, opts):
    """The replayed weights at start and stop (float64), the replay's checks against every
    snapshot (and checkpoint) the run keeps from the checkpoint's step to `stop`, and AdamW's
    denominators at `start` (`adam_denominators`)."""
    kept = set(run.snapshot_steps())
    checks, ends, adam = [], {}, {}
    for step, learner in replay_learner(cfg, checkpoint, stop):
        if step in kept or step == stop:
            check = check_replayed(run, step, learner_weights(learner))
            if check["file"] is not None:
                checks.append(check)
                if not check["equal"]:
                    raise AttributionError(
                        f"the replay does not reproduce the run: at step {step} it differs from "
                        f"{check['file']} by up to {check['max_abs_diff']:.3g} (another CPU "
                        "kind or torch version, a run trained on a GPU, or a resume that "
                        "changed the config after the checkpoint); use --path straight"
                    )
        if step == start:
            adam = adam_denominators(learner)
        if step in (start, stop):
            ends[step] = float64_weights(learner_weights(learner))
    return (ends[start], ends[stop]), checks, adam


def _snapshots(run: RunDir, start: int, stop: int) -> list[int]:
    steps = [s for s in run.snapshot_steps() if start <= s <= stop]
    if not steps or steps[0] != start or steps[-1] != stop:
        shown = ", ".join(map(str, run.snapshot_steps()[:12]))
        raise AttributionError(
            f"--window {start}:{stop}: the straight path needs snapshots at both ends; the run "
            f"{run.path} has snapshots at {shown}, ..."
        )
    return steps


def _weights(run: RunDir, step: int) -> dict:
    return float64_weights(load_checkpoint(run.snapshot(step))["model_state"])


def _progress(items, opts: AttributionOptions, total: int):
    if not opts.progress:
        return items
    return tqdm(items, total=total, desc="attribute", leave=False)

