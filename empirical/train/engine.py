"""The pieces of the one training skeleton (single run and batch of members alike): the
checks, loss windows, divergence rule and the run directory's bookkeeping. The learners are
empirical.train.learners; empirical.train.session runs them, phase by phase.

    results = run_training(trainees, SingleLearner(cfg, device))        # one run
    results = run_training(trainees, BatchLearner(cfgs, device))        # M members at once

A *trainee* is a run config and its run directory. A checkpoint (train/state.py) holds
everything the metrics depend on (model, optimiser, data generator, torch's RNG, step, the
loss windows), so a run killed and resumed writes the metrics an uninterrupted run writes.
A member stops (stopped.json) on a non-finite loss, or when a checkpoint window's mean loss
exceeds both `train.divergence_factor` times the median of the earlier windows' means and
ln(p); when every member has stopped, a TrainingError says so. docs/training.md, "How a
step runs".
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import torch

from disentangled.errors import UserError
from empirical.model.checkpoint import CheckpointError, check_depth, load_model
from empirical.model.device import resolve_device as model_device
from empirical.model.transformer import AssignAddTransformer
from empirical.report.files import append_text, atomic_write_bytes
from empirical.runs.config import RunConfig, config_fingerprint
from empirical.runs.metrics_log import read_metrics
from empirical.runs.rundir import RunDir
from empirical.task.pairs import cpu_generator, derive_seed
from empirical.train.state import load_training_state


class TrainingError(UserError, RuntimeError):
    """The run cannot go on (diverged loss, run directory in use by another config, ...)."""


def resolve_device(name: str) -> torch.device:
    """`train.device` as a torch device ("auto": CUDA when available)."""
    return model_device(name, "train.device", TrainingError)


@dataclass
class Trainee:
    """One run of a training session: its config and its directory."""

    cfg: RunConfig
    run: RunDir


def perturbed(cfg: RunConfig, state: dict[str, torch.Tensor],
              names: list[str] | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
    """`state` with `train.init_perturbation` s applied (unchanged when s = 0): every weight w
    of the tensors `names` (default: all floating ones) becomes w (1 + s z), z standard normal
    in float64 from a generator of its own (train.init_perturbation_seed), the tensors in
    sorted order; rounded back to the tensor's dtype."""
    scale = cfg.train.init_perturbation
    if not scale:
        return state
    gen = cpu_generator(cfg.train.init_perturbation_seed, "init_perturbation")
    chosen = set(names) if names is not None else {n for n, v in state.items()
                                                   if v.is_floating_point()}  # fmt: skip
    out = dict(state)
    for name in sorted(chosen):
        w = state[name]
        z = torch.randn(w.shape, generator=gen, dtype=torch.float64)
        out[name] = (w.double() * (1.0 + scale * z.to(w.device))).to(w.dtype)
    return out


def initial_weights(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """The weights of `train.init_from` (a model file), checked to fit `cfg`'s model."""
    path = Path(cfg.train.init_from)
    try:
        model = load_model(path)
    except CheckpointError as exc:
        raise CheckpointError(f"train.init_from = {str(path)!r}: {exc}") from None
    want = cfg.built_model_config()
    check_depth(model.cfg.n_layers, cfg.model.n_layers, path, "train.init_from =")
    if model.cfg.tied_layers != want.tied_layers:
        raise CheckpointError(
            f"train.init_from = {str(path)!r}: its model has tied_layers = "
            f"{model.cfg.tied_layers}, this run's model.tied_layers = {want.tied_layers}"
        )
    mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    need = {k: tuple(v.shape) for k, v in AssignAddTransformer(want, seed=0).state_dict().items()}
    if mine != need:
        raise CheckpointError(
            f"train.init_from = {str(path)!r}: its weights do not fit this run's model "
            f"(d_vocab {model.cfg.d_vocab} vs {want.d_vocab}, d_model {model.cfg.d_model} vs "
            f"{want.d_model}, ...)"
        )
    return {k: v.detach().to(want.torch_dtype) for k, v in model.state_dict().items()}


def check_resumable(cfg: RunConfig, run: RunDir, ckpt: dict) -> None:
    """Refuse to resume from a checkpoint of another run, or with a metrics log that is
    missing (the history would have holes) or has a bad line (MetricsError)."""
    saved = ckpt["model_config"]
    found = saved.get("n_layers", 2) if isinstance(saved, dict) else cfg.model.n_layers
    check_depth(found, cfg.model.n_layers, run.last_checkpoint, "checkpoint")
    run.check_model_file(ckpt, run.last_checkpoint, cfg)
    if not run.metrics.exists():
        raise TrainingError(
            f"cannot resume {run}: {run.metrics} is missing, and resuming would write a history "
            f"with holes (nothing before step {int(ckpt['step'])}). Put it back, or rebuild it "
            f"from the snapshots and the checkpoint: `python -m empirical repair {run}` "
            "(training losses unknown)"
        )
    read_metrics(run.metrics, config_fingerprint(cfg))


def preflight(trainee: Trainee, step: int, rebuild_eval_sets: bool = False):
    """Every check of a trainee's directory, before anything is written to it: its
    checkpoint (at `step` > 0: this run's, with a complete metrics log) and its evaluation
    sets (this task's and seed's, unless they are to be rebuilt). Returns (checkpoint dict
    or None, EvalSets or None: to be built)."""
    cfg, run = trainee.cfg, trainee.run
    ckpt = None
    if step > 0:
        ckpt = load_training_state(run.last_checkpoint)
        check_resumable(cfg, run, ckpt)
    elif cfg.train.init_from:
        initial_weights(cfg)  # a missing or misfitting file: an error before anything is written
    sets = None if rebuild_eval_sets else run.read_eval_sets(cfg)
    return ckpt, sets


@dataclass
class LossWindows:
    """A member's running training-loss sums, all restored on resume: since the start, since
    the last evaluation (metrics' train_loss) and since the last checkpoint (divergence),
    plus the mean of every earlier checkpoint window."""

    total: float = 0.0
    eval_sum: float = 0.0
    eval_n: int = 0
    ckpt_sum: float = 0.0
    ckpt_n: int = 0
    history: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "train_loss_sum": self.total,
            "eval_window_sum": self.eval_sum,
            "eval_window_n": self.eval_n,
            "checkpoint_window_sum": self.ckpt_sum,
            "checkpoint_window_n": self.ckpt_n,
            "checkpoint_window_means": list(self.history),
        }

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> LossWindows:
        return cls(
            total=float(ckpt.get("train_loss_sum", 0.0)),
            eval_sum=float(ckpt.get("eval_window_sum", 0.0)),
            eval_n=int(ckpt.get("eval_window_n", 0)),
            ckpt_sum=float(ckpt.get("checkpoint_window_sum", 0.0)),
            ckpt_n=int(ckpt.get("checkpoint_window_n", 0)),
            history=[float(x) for x in ckpt.get("checkpoint_window_means", [])],
        )


def restore_data_generator(
    generator: torch.Generator, state: torch.Tensor, seed: int, step: int
) -> bool:
    """Put a checkpoint's data-generator state back. A run moved between a CPU and a GPU
    (train.device is a resumable change) has a state of the other kind of generator, which
    cannot be set: the data stream then continues from a generator seeded by (seed, step),
    another realisation of the same distribution, as a run on another device draws anyway.
    Returns whether it was re-seeded."""
    state = state.cpu()
    if state.numel() == generator.get_state().numel():
        generator.set_state(state)
        return False
    generator.manual_seed(derive_seed(seed, "train", "resumed", generator.device.type, step))
    return True


def exploding(mean: float, history: list[float], factor: float, p: int) -> bool:
    """Whether a checkpoint window's mean loss counts as diverged (see the module docstring)."""
    if not math.isfinite(mean):
        return True
    if not factor or not history:
        return False
    return mean > factor * statistics.median(history) and mean > math.log(p)


def checkpoint_step(run: RunDir) -> int:
    """The step of a run's resumable checkpoint (0: none)."""
    if not run.last_checkpoint.exists():
        return 0
    try:
        step = load_training_state(run.last_checkpoint)["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(f"checkpoint {run.last_checkpoint}: step {step!r} is no step")
    except CheckpointError as exc:
        raise CheckpointError(
            f"{exc}; the run cannot resume from it: put the file back from a copy, or move "
            f"{run} away and train the run again (its snapshots and metrics stay readable)"
        ) from None
    return step


def remove_stale_temporaries(run: RunDir) -> list[str]:
    """Delete the `.NAME.*.tmp` files an atomic write killed midway left in the run directory
    and its checkpoints/snapshots (the file they were replacing is intact); returns them."""
    removed = []
    for folder in (run.path, run.checkpoints_dir, run.snapshots_dir):
        if folder.is_dir():
            for path in folder.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(str(path))
    return removed


def record_history(run: RunDir, event: str, step: int, changes: dict | None = None) -> None:
    """Append one line to the run's config_history.jsonl: a start or a resume, and what the
    resume changed ({"train.lr": [old, new], ...})."""
    entry = {
        "event": event,
        "step": int(step),
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "changes": changes or {},
    }
    append_text(run.config_history, json.dumps(entry) + "\n")


def write_stopped(run: RunDir, step: int, loss: float, lr: float, why: str) -> str:
    last = run.last_checkpoint
    if last.exists():
        good = f"its last good checkpoint is {last} (step {checkpoint_step(run)})"
    else:
        good = "it has no checkpoint yet (start it again)"
    reason = (
        f"{why} at step {step} (lr {lr:g}); the run stopped and {good} — resume it with a "
        f"lower train.lr, a train.grad_clip or a train.warmup_steps: python -m empirical train "
        f"--resume {run} train.lr=..."
    )
    text = json.dumps({"step": step, "loss": repr(loss), "lr": lr, "reason": reason}, indent=2)
    atomic_write_bytes(run.stopped, text.encode())
    return reason
