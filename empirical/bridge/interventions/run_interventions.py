"""The interventions of one run from one checkpoint, end to end (`python -m empirical
intervene`): the G1 direction at the checkpoint, the members, the continuations, the
statistics and the files.

    text = intervene(RunDir("runs/retrain/ours_seed0"), cfg, out, InterventionOptions(...))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from disentangled.errors import UserError
from empirical.bridge.interventions.conditions import member_configs, write_g1_direction
from empirical.bridge.interventions.continuations import Plan, continue_members, start_model
from empirical.bridge.interventions.outputs import summarise, write_outputs
from empirical.model.checkpoint import CheckpointError
from empirical.runs.rundir import RunDir
from empirical.train.constraints import load_direction
from empirical.train.state import load_training_state


class InterventionError(UserError, ValueError):
    """A checkpoint, set or option the interventions cannot use."""


@dataclass
class InterventionOptions:
    checkpoint: str
    steps: int = 2000
    replicates: int = 20
    conditions: tuple[str, ...] = ("none", "freeze_layer2_qk", "freeze_layer1_embed", "project_g1")
    eval_every: int = 50
    eval_size: int = 1000
    threshold: float = 0.9
    jump_set: str = "1var/ind"
    device: str = "cpu"
    threads: int = 1
    label: str = ""
    fmt: str = "png"
    progress: bool = True
    g1_batch: int = 2048  # compare-qk's 1-var batch for the measured (a, b)
    g1_population: int = 16384  # sequences of the sampled G1 population


def _checkpoint(run: RunDir, cfg, path: str) -> dict:
    if not Path(path).is_file():
        raise InterventionError(f"--checkpoint {path}: no such file")
    try:
        ckpt = load_training_state(path)
    except CheckpointError as exc:
        raise InterventionError(f"--checkpoint {path}: {exc}") from None
    run.check_model_file(ckpt, Path(path), cfg)
    return ckpt


def intervene(run: RunDir, cfg, out: Path, opts: InterventionOptions) -> str:
    """Everything (module docstring); returns summary.md's text."""
    if opts.threads:
        torch.set_num_threads(opts.threads)
    checkpoint = _checkpoint(run, cfg, opts.checkpoint)
    sets = run.read_eval_sets(cfg)
    if sets is None or opts.jump_set not in sets:
        allowed = "none (no eval_sets.pt)" if sets is None else ", ".join(sets)
        raise InterventionError(f"--jump-set {opts.jump_set!r}: the run's sets are {allowed}")
    direction = out / "g1_direction.pt"
    sizes = {"batch_size": opts.g1_batch, "prediction_size": opts.g1_population}
    info = write_g1_direction(cfg, start_model(cfg, checkpoint), direction, **sizes)
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
    stats["g1"] = info
    stats["checkpoint"] = str(opts.checkpoint)
    stats["run_dir"] = str(run.path)
    stats["label"] = opts.label
    return write_outputs(stats, result, out, opts.label, opts.fmt)
