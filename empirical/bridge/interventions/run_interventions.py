"""The interventions of one run from one checkpoint, end to end (`python -m empirical
intervene`): the G1 direction at the checkpoint (written to OUT/g1_direction.pt, which
`project_g1` reads), the members, the continuations and their statistics.

    stats, result = intervene(RunDir("runs/retrain/ours_seed0"), cfg, out, InterventionOptions(...))
    write_report(report(stats, result), out)
"""

from __future__ import annotations

from pathlib import Path

from disentangled.errors import UserError
from empirical.bridge.compare_qk.snapshot import g1_direction
from empirical.bridge.interventions.conditions import frozen_entries, member_configs
from empirical.bridge.interventions.continuations import Plan, continue_members, start_model
from empirical.bridge.interventions.options import InterventionOptions
from empirical.bridge.interventions.outputs import summarise
from empirical.model.checkpoint import CheckpointError
from empirical.runs.rundir import RunDir
from empirical.train.constraints import load_direction, save_direction
from empirical.train.state import load_training_state


class InterventionError(UserError, ValueError):
    """A checkpoint, set or option the interventions cannot use."""


def _checkpoint(run: RunDir, cfg, path: str) -> dict:
    if not Path(path).is_file():
        raise InterventionError(f"--checkpoint {path}: no such file")
    try:
        ckpt = load_training_state(path)
    except CheckpointError as exc:
        raise InterventionError(f"--checkpoint {path}: {exc}") from None
    run.check_model_file(ckpt, Path(path), cfg)
    return ckpt


def write_g1_direction(cfg, model, path: Path, **sizes) -> dict:
    """compare-qk's G1 direction at `model` written as a train.project_out file
    (constraints.save_direction); returns where it was measured (a, b, ...)."""
    G, rows, cols, info = g1_direction(cfg, model, **sizes)
    save_direction(
        path, G, rows, cols, f"G1 (dual frame), a = {info['a']:.4g}, b = {info['b']:.4g}"
    )
    return info


def intervene(run: RunDir, cfg, out: Path, opts: InterventionOptions) -> tuple[dict, dict]:
    """Everything (module docstring) but the report: (the statistics, the continuations),
    as `outputs.report` takes them."""
    checkpoint = _checkpoint(run, cfg, opts.checkpoint)
    sets = run.read_eval_sets(cfg)
    if sets is None or opts.jump_set not in sets:
        allowed = "none (no eval_sets.pt)" if sets is None else ", ".join(sets)
        raise InterventionError(f"--jump-set {opts.jump_set!r}: the run's sets are {allowed}")
    direction = out / "g1_direction.pt"
    sizes = {"batch_size": opts.g1_batch, "prediction_size": opts.g1_population}
    model = start_model(cfg, checkpoint)
    info = write_g1_direction(cfg, model, direction, **sizes)
    g1 = load_direction(str(direction), cfg.task.p, cfg.task.K, cfg.task.L).numpy()
    plan = Plan(
        steps=opts.steps, replicates=opts.replicates, conditions=opts.conditions,
        eval_every=opts.eval_every, eval_size=opts.eval_size, jump_set=opts.jump_set,
        threshold=opts.threshold, device=opts.device,
        cosine_steps=tuple(h for h in (10, 100, 500, 2000) if h <= opts.steps),
    )  # fmt: skip
    members = member_configs(cfg, list(plan.conditions), plan.replicates, str(direction))
    result = continue_members(cfg, checkpoint, members, sets, plan, opts.progress)
    stats = summarise(result, plan, g1)
    for name, entry in stats["conditions"].items():
        entry["frozen_entries"] = frozen_entries(model, name)
    stats["g1"] = info
    stats["checkpoint"] = str(opts.checkpoint)
    stats["run_dir"] = str(run.path)
    stats["label"] = opts.label
    return stats, result
