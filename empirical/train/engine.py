"""One training skeleton for a single run and for a batch of members: its pieces (the
learners, checks, loss windows, divergence rule); empirical.train.session runs them, phase by
phase.

    results = run_training(trainees, SingleLearner(cfg, device))        # one run
    results = run_training(trainees, BatchLearner(cfgs, device))        # M members at once

A *trainee* is a run config and its run directory. The skeleton owns everything the two kinds
of training share, written once: each member's data stream and evaluation sets, resuming from
`checkpoints/last.pt`, the schedule of evaluations (metrics.jsonl), snapshots and checkpoints,
the running training-loss windows, the detection of a non-finite or exploding loss, the
progress bar, and the summary at the end. A *learner* is what differs: the model(s), the
forward and loss, the backward and the optimiser step (`SingleLearner`: one
AssignAddTransformer and torch's AdamW; `BatchLearner`: a BatchedModel of M members and AdamW
over the stacked weights, or MemberAdamW when members differ in lr or weight decay).

No host synchronisation in the step: losses are accumulated on the device (float64 sums in
step order, the same numbers as adding `loss.item()` on the host), and the first non-finite
loss of each member is recorded on the device; both are read only where something is written
(an evaluation, a snapshot, a checkpoint), so nothing non-finite is ever written.

What a checkpoint holds (train/state.py) is everything the metrics depend on: the model, the
optimiser, the data generator, torch's RNG, the step, the running loss sums of the current
evaluation window and checkpoint window, and the mean loss of every earlier checkpoint window,
so a run killed and resumed writes the metrics an uninterrupted run writes, field for field
(but wall-clock time), for any evaluation / checkpoint cadence.

Divergence: a member stops (stopped.json in its directory; no checkpoint written) when a loss
is non-finite, or when at a checkpoint the mean training loss of the window since the previous
checkpoint exceeds both `train.divergence_factor` times the median of the earlier windows'
means and ln(p) (the loss of a uniform guess); its checkpoints/last.pt is then the last good
state. When every member has stopped, a TrainingError says so.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from disentangled.command_line import UserError
from empirical.config_io import append_text, atomic_write_bytes
from empirical.metrics_log import read_metrics
from empirical.model import AssignAddTransformer, CheckpointError
from empirical.model.batched import BatchedModel
from empirical.run_config import RunConfig, config_fingerprint
from empirical.rundir import RunDir
from empirical.task.pairs import derive_seed
from empirical.train.cuda_graph import GraphedStep, graph_applies
from empirical.train.optim import MemberAdamW
from empirical.train.schedule import learning_rate, schedule_of
from empirical.train.state import load_training_state


class TrainingError(UserError, RuntimeError):
    """The run cannot go on (diverged loss, run directory in use by another config, ...)."""


def resolve_device(name: str) -> torch.device:
    """`train.device` as a torch device ("auto": CUDA when available)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise TrainingError(
            f"train.device = {name!r} is not a device; allowed 'auto', 'cpu', 'cuda', 'cuda:N'"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise TrainingError(
                f"train.device = {name!r} but CUDA is not available; use 'auto' or 'cpu'"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise TrainingError(
                f"train.device = {name!r}: this machine has {torch.cuda.device_count()} "
                "CUDA device(s)"
            )
    return device


@dataclass
class Trainee:
    """One run of a training session: its config and its directory."""

    cfg: RunConfig
    run: RunDir


# -- learners: what differs between one model and a batch --------------------------------


def _autocast(tc, device: torch.device, cache: bool = True):
    """bf16 autocast when train.autocast asks for it (`cache`: autocast's weight cache, off
    inside a CUDA graph capture)."""
    if tc.autocast == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cache)
    return contextlib.nullcontext()


def _compiled(fn: Callable, mode: str) -> Callable:
    if mode == "none":
        return fn
    return torch.compile(fn, mode=None if mode == "default" else mode, dynamic=False)


def _adamw(params, tc, device: torch.device, graphed: bool = False) -> torch.optim.AdamW:
    """torch's AdamW; on CUDA its fused kernel (one launch per step instead of a few per
    parameter: the small model's step is launch-bound there), `capturable` when the step is
    replayed as a CUDA graph. On the CPU the default implementation, which a batched
    member's slice reproduces bit for bit."""
    extra = {}
    if device.type == "cuda":
        extra = {"fused": True, "capturable": True} if graphed else {"fused": True}
    return torch.optim.AdamW(
        params, lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas, **extra
    )


_DEVICE_FLAGS = ("fused", "capturable", "foreach")


def portable_optimizer_state(state: dict) -> dict:
    """An optimiser state_dict as a CPU run's AdamW holds it: the learning rate a float, no
    fused / capturable / foreach flags (they say how this device ran it, and a checkpoint
    written on CUDA must resume on a CPU and back)."""
    defaults = {"fused": None, "capturable": False, "foreach": None}
    groups = []
    for group in state["param_groups"]:
        group = dict(group)
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"] = float(group["lr"])
        for flag in _DEVICE_FLAGS:
            if flag in group:
                group[flag] = defaults[flag]
        groups.append(group)
    return {"state": state["state"], "param_groups": groups}


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """`optimizer.load_state_dict(state)`, keeping the optimiser's own device flags (so its
    step counters land where its kernels read them: on the GPU for fused AdamW)."""
    own = optimizer.param_groups
    groups = []
    for i, group in enumerate(state["param_groups"]):
        mine = own[min(i, len(own) - 1)]
        groups.append({**group, **{f: mine[f] for f in _DEVICE_FLAGS if f in mine}})
    optimizer.load_state_dict({"state": state["state"], "param_groups": groups})


def check_depth(found: int, cfg: RunConfig, path, what: str) -> None:
    """Refuse a model file (`what` `path`) whose model has `found` layers when the run's
    config has another model.n_layers."""
    if found != cfg.model.n_layers:
        raise CheckpointError(
            f"{what} {str(path)!r}: holds a {found}-layer model, but this run's config has "
            f"model.n_layers = {cfg.model.n_layers}"
        )


def initial_weights(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """The weights of `train.init_from` (a model file), checked to fit `cfg`'s model."""
    from empirical.model import CheckpointError, load_model

    path = Path(cfg.train.init_from)
    try:
        model = load_model(path)
    except CheckpointError as exc:
        raise CheckpointError(f"train.init_from = {str(path)!r}: {exc}") from None
    want = cfg.built_model_config()
    check_depth(model.cfg.n_layers, cfg, path, "train.init_from =")
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


class _Step:
    """The training step both learners share: eager, or replayed as a CUDA graph
    (train.cuda_graph on CUDA, empirical/train/cuda_graph.py) while every member is alive.
    A learner provides `losses`, `_set_lr` and `_backward_and_step`."""

    graphed: GraphedStep | None = None

    def _start_step(self, graphable: bool) -> None:
        if graphable:
            self.graphed = GraphedStep(self._full_step, self.optimizer, self.device)

    def _lr(self, step: int) -> float:
        """The learning rate of `step` (members that share one: train.lr on the schedule)."""
        return learning_rate(step, self.tc.lr, **schedule_of(self.tc))

    def _full_step(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        losses = self.losses(tokens, labels)
        self._backward_and_step(losses, None)
        return losses

    def train_step(
        self, tokens: torch.Tensor, labels: torch.Tensor, alive: list[bool], step: int
    ) -> torch.Tensor:
        """One optimiser step of every alive member on its batch (tokens [M, B, L], labels
        [M, B]) at the learning rate of `step`; returns the losses [M] (on the device)."""
        if self.graphed is not None:
            if all(alive):
                return self.graphed(tokens, labels, self._lr(step))
            self.graphed = None  # a member stopped: the masked update runs eagerly from here
        self._set_lr(step)
        self.optimizer.zero_grad(set_to_none=True)
        losses = self.losses(tokens, labels)
        self._backward_and_step(losses, alive)
        return losses

    def _autocast(self):
        return _autocast(self.tc, self.device, cache=self.graphed is None)


class SingleLearner(_Step):
    """One AssignAddTransformer trained by torch's AdamW (the plain `train` command)."""

    def __init__(self, cfg: RunConfig, device: torch.device):
        tc = cfg.train
        self.n_members, self.device, self.tc = 1, device, tc
        self.model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed).to(device)
        if tc.init_from:
            self.model.load_state_dict(initial_weights(cfg))
        graphable = graph_applies(device, tc.cuda_graph, tc.compile)
        self.optimizer = _adamw(self.model.parameters(), tc, device, graphable)
        self._loss = _compiled(self._loss_of, tc.compile)
        self._start_step(graphable)

    def _loss_of(self, tokens, labels):
        return F.cross_entropy(self.model.forward_fast(tokens).float(), labels)

    def losses(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with self._autocast():
            return self._loss(tokens[0], labels[0]).unsqueeze(0)

    def _set_lr(self, step: int) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr(step)

    def _backward_and_step(self, losses: torch.Tensor, alive: list[bool] | None) -> None:
        losses.sum().backward()
        if self.tc.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        self.optimizer.step()

    def model_of(self, m: int) -> AssignAddTransformer:
        return self.model

    def optimizer_state(self, m: int) -> dict:
        return portable_optimizer_state(self.optimizer.state_dict())

    def load(self, checkpoints: list[dict]) -> None:
        ckpt = checkpoints[0]
        self.model.load_state_dict({k: v.to(self.device) for k, v in ckpt["model_state"].items()})
        load_optimizer_state(self.optimizer, ckpt["optimizer_state"])
        for group in self.optimizer.param_groups:  # a resume may change the recovery settings
            group["lr"], group["weight_decay"] = self.tc.lr, self.tc.weight_decay


class BatchLearner(_Step):
    """M members as one BatchedModel: one forward and one backward for all, AdamW over the
    stacked weights (members' slices updated exactly as their single runs would be), or
    MemberAdamW when members differ in lr or weight decay; gradient clipping per member."""

    def __init__(self, cfgs: list[RunConfig], device: torch.device):
        tc = cfgs[0].train
        self.n_members, self.device, self.tc = len(cfgs), device, tc
        self.model = BatchedModel(cfgs[0].built_model_config(), [c.seed for c in cfgs], device)
        for m, cfg in enumerate(cfgs):
            if cfg.train.init_from:
                self.model.load_member_state(m, initial_weights(cfg))
        self.base_lrs = [c.train.lr for c in cfgs]
        decays = [c.train.weight_decay for c in cfgs]
        self.shared = len(set(self.base_lrs)) == 1 and len(set(decays)) == 1
        graphable = self.shared and graph_applies(device, tc.cuda_graph, tc.compile)
        params = self.model.params()
        if self.shared:
            self.optimizer = _adamw(params, tc, device, graphable)
        else:
            self.optimizer = MemberAdamW(params, self.base_lrs, decays, betas=tc.betas)
        self.scratch = AssignAddTransformer(cfgs[0].built_model_config(), seed=0).to(device)
        self._loss = _compiled(self._losses_of, tc.compile)
        self._start_step(graphable)

    def _losses_of(self, tokens, labels):
        logits = self.model.forward_fast(tokens).float()
        if self.device.type == "cuda":  # one launch for every member's loss
            M, B = labels.shape
            flat = F.cross_entropy(logits.reshape(M * B, -1), labels.reshape(-1), reduction="none")
            return flat.view(M, B).mean(1)
        # on the CPU, per member exactly a single run's loss (same reduction order)
        return torch.stack([F.cross_entropy(logits[m], labels[m]) for m in range(self.n_members)])

    def losses(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with self._autocast():
            return self._loss(tokens, labels)

    def _set_lr(self, step: int) -> None:
        if self.shared:
            for group in self.optimizer.param_groups:
                group["lr"] = self._lr(step)
        else:
            self.optimizer.set_lr_scale(learning_rate(step, 1.0, **schedule_of(self.tc)))

    def _backward_and_step(self, losses: torch.Tensor, alive: list[bool] | None) -> None:
        params = self.model.params()
        if alive is None or all(alive):
            losses.sum().backward()
        else:
            mask = torch.tensor(alive, device=losses.device)
            torch.where(mask, losses, torch.zeros_like(losses)).sum().backward()
            for p in params:
                if p.grad is not None:
                    p.grad[~mask] = 0.0
        if self.tc.grad_clip is not None:
            _clip_per_member(params, self.tc.grad_clip)
        self.optimizer.step()

    def model_of(self, m: int) -> AssignAddTransformer:
        return self.model.copy_member_into(m, self.scratch)

    def optimizer_state(self, m: int) -> dict:
        """Member m's slice of the optimiser, as a single run's AdamW state_dict."""
        full = portable_optimizer_state(self.optimizer.state_dict())
        state = {}
        for i, entry in full["state"].items():
            state[i] = {
                k: (v[m].detach().cpu().clone() if k != "step" else v.detach().cpu().clone())
                for k, v in entry.items()
            }
        groups = [dict(g) for g in full["param_groups"]]
        if isinstance(self.optimizer, MemberAdamW):
            groups = [{**self.optimizer.member_param_group(m), "params": groups[0]["params"]}]
        return {"state": state, "param_groups": groups}

    def load(self, checkpoints: list[dict]) -> None:
        for m, ckpt in enumerate(checkpoints):
            self.model.load_member_state(m, ckpt["model_state"])
        first = checkpoints[0]["optimizer_state"]
        state = {}
        for i, entry in first["state"].items():
            state[i] = {}
            for k, v in entry.items():
                if k == "step":
                    steps = {float(c["optimizer_state"]["state"][i]["step"]) for c in checkpoints}
                    if len(steps) != 1:
                        raise TrainingError(f"members at different optimiser steps {sorted(steps)}")
                    state[i][k] = v.clone()
                else:
                    stacked = [c["optimizer_state"]["state"][i][k] for c in checkpoints]
                    state[i][k] = torch.stack(stacked).to(self.device)
        load_optimizer_state(
            self.optimizer, {"state": state, "param_groups": first["param_groups"]}
        )
        if self.shared:  # a resume may change the recovery settings
            for group in self.optimizer.param_groups:
                group["lr"], group["weight_decay"] = self.tc.lr, self.tc.weight_decay


@torch.no_grad()
def _clip_per_member(params: list[torch.Tensor], max_norm: float) -> None:
    """`clip_grad_norm_` applied to each member's gradients on their own."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    M = grads[0].shape[0]
    norms = torch.stack([g.reshape(M, -1).norm(dim=1) for g in grads], dim=1)  # [M, n]
    total = norms.norm(dim=1)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(M, *([1] * (g.ndim - 1))).to(g.dtype))


# -- the skeleton -------------------------------------------------------------------------


def check_resumable(cfg: RunConfig, run: RunDir, ckpt: dict) -> None:
    """Refuse to resume from a checkpoint of another run, or with a metrics log that is
    missing (the history would have holes) or has a bad line (MetricsError)."""
    saved = ckpt["model_config"]
    found = saved.get("n_layers", 2) if isinstance(saved, dict) else cfg.model.n_layers
    check_depth(found, cfg, run.last_checkpoint, "checkpoint")
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


def _write_stopped(run: RunDir, step: int, loss: float, lr: float, why: str) -> str:
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
