"""One training skeleton for a single run and for a batch of members.

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from disentangled.command_line import UserError
from empirical.config_io import append_text, atomic_write_bytes, config_to_toml
from empirical.metrics_log import append_metrics, read_metrics, truncate_metrics
from empirical.model import AssignAddTransformer, CheckpointError, save_model
from empirical.model.batched import BatchedModel
from empirical.run_config import RunConfig, config_fingerprint
from empirical.rundir import RunDir
from empirical.task import TrainingSampler, build_eval_sets, held_out_pairs
from empirical.task import save_eval_sets as _save_eval_sets
from empirical.task.pairs import derive_seed, training_generator
from empirical.train.batches import BatchStream
from empirical.train.breakdown import restricted_breakdown
from empirical.train.cuda_graph import GraphedStep, graph_applies
from empirical.train.evaluate import evaluate_sets
from empirical.train.optim import MemberAdamW
from empirical.train.schedule import learning_rate, schedule_of
from empirical.train.state import load_training_state, save_training_state


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


def initial_weights(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """The weights of `train.init_from` (a model file), checked to fit `cfg`'s model."""
    from empirical.model import CheckpointError, load_model

    path = Path(cfg.train.init_from)
    try:
        model = load_model(path)
    except CheckpointError as exc:
        raise CheckpointError(f"train.init_from = {str(path)!r}: {exc}") from None
    want = cfg.built_model_config()
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


def evaluate_and_log(
    model, sets, tc, metrics_path, step, train_loss, lr, elapsed, fingerprint=None
):
    """Evaluate every set and append one record to metrics.jsonl (with the run's config
    `fingerprint`, if given); returns the record."""
    acc, loss = evaluate_sets(model, sets, tc.eval_batch_size)
    record = {
        "step": step,
        "train_loss": None if train_loss is None or math.isnan(train_loss) else train_loss,
        "lr": lr,
        "elapsed_s": round(elapsed, 3),
        "acc": acc,
        "loss": loss,
    }
    if fingerprint:
        record["fingerprint"] = fingerprint
    append_metrics(metrics_path, record)
    return record


@dataclass
class SessionResult:
    """What a training session ended with, per member."""

    step: int
    records: list[dict]  # each member's last metrics record
    stopped: list[str | None]  # each member's stop reason (None: it trained on)
    elapsed: list[float]
    finished: bool  # reached train.steps (not stopped early by stop_at)


def run_training(
    trainees: list[Trainee],
    learner,
    *,
    progress: bool = True,
    stop_at: int | None = None,
    on_eval: Callable[[int, list[dict]], None] | None = None,
    labels: list[str] | None = None,
    metric: Callable[[int, dict], float] | None = None,
    rebuild_eval_sets: bool = False,
) -> SessionResult:
    """Train every trainee with `learner` (which holds their models) from their common
    checkpoint step (0: fresh) to train.steps; see the module docstring.
    rebuild_eval_sets: build and save eval_sets.pt again instead of loading it.

    stop_at: end after that step (as if killed right after it). on_eval(step, records): after
    each evaluation. labels / metric(m, acc): the progress bar's per-member text and value.
    At the end, each member that trained on gets summary.json and training_curves.png."""
    from empirical.train.summary import write_summary

    session_start = time.perf_counter()
    M = len(trainees)
    cfgs = [t.cfg for t in trainees]
    runs = [t.run for t in trainees]
    tc = cfgs[0].train
    device = learner.device
    labels = labels or [r.name for r in runs]
    starts = [checkpoint_step(r) for r in runs]
    if len(set(starts)) != 1:
        raise TrainingError(f"members at different checkpoint steps {starts}")
    step = starts[0]
    fingerprints = [config_fingerprint(c) for c in cfgs]
    checked = [preflight(t, step, rebuild_eval_sets) for t in trainees]  # before any write
    ckpts = [ckpt for ckpt, _ in checked]
    for t in trainees:
        t.run.path.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(t.run)
        atomic_write_bytes(t.run.config, config_to_toml(t.cfg).encode())
        t.run.checkpoints_dir.mkdir(exist_ok=True)
        if tc.snapshot_every:
            t.run.snapshots_dir.mkdir(exist_ok=True)

    streams, generators = [], []
    for cfg in cfgs:
        sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device=device)
        generators.append(training_generator(cfg.seed, device))
        streams.append(BatchStream(sampler, generators[-1], tc.batch_size, tc.sample_chunk))
    sets = []
    for t, (_, loaded) in zip(trainees, checked, strict=True):
        if loaded is None:
            loaded = build_eval_sets(t.cfg.task, t.cfg.seed, device="cpu")
            _save_eval_sets(loaded, t.run.eval_sets)
        sets.append({name: batch.to(device) for name, batch in loaded.items()})
    windows = [LossWindows() for _ in range(M)]
    elapsed_before = [0.0] * M
    if step > 0:
        learner.load(ckpts)
        for m, ckpt in enumerate(ckpts):
            restore_data_generator(generators[m], ckpt["data_rng_state"], cfgs[m].seed, step)
            windows[m] = LossWindows.from_checkpoint(ckpt)
            elapsed_before[m] = float(ckpt["elapsed_s"])
            truncate_metrics(runs[m].metrics, step, fingerprints[m])
        torch.set_rng_state(ckpts[0]["torch_rng_state"])
    else:
        torch.manual_seed(cfgs[0].seed)
        for r in runs:
            r.metrics.unlink(missing_ok=True)

    alive = [True] * M
    stopped: list[str | None] = [None] * M
    last_records: list[dict] = [{} for _ in range(M)]
    # device-side accumulators (no host sync in the step)
    eval_acc = torch.tensor([w.eval_sum for w in windows], dtype=torch.float64, device=device)
    ckpt_acc = torch.tensor([w.ckpt_sum for w in windows], dtype=torch.float64, device=device)
    total_acc = torch.tensor([w.total for w in windows], dtype=torch.float64, device=device)
    eval_n, ckpt_n = windows[0].eval_n, windows[0].ckpt_n
    first_bad = torch.full((M,), -1, dtype=torch.long, device=device)
    bad_loss = torch.zeros(M, dtype=torch.float64, device=device)

    def lr_of(m: int, at: int) -> float:
        return learning_rate(at, cfgs[m].train.lr, **schedule_of(tc))

    def sync_windows() -> None:
        ev, ck, tot = eval_acc.tolist(), ckpt_acc.tolist(), total_acc.tolist()
        for m, w in enumerate(windows):
            w.eval_sum, w.ckpt_sum, w.total = ev[m], ck[m], tot[m]
            w.eval_n, w.ckpt_n = eval_n, ckpt_n

    def stop_member(m: int, at: int, loss: float, why: str) -> None:
        alive[m] = False
        stopped[m] = _write_stopped(runs[m], at, loss, lr_of(m, max(at - 1, 0)), why)
        bar.write(f"{labels[m]}: {why} at step {at}: stopped")

    def check_finite() -> None:
        """Stop every member whose loss became non-finite since the last check."""
        bad = first_bad.tolist()
        if max(bad) < 0:
            return
        values = bad_loss.tolist()
        for m in range(M):
            if alive[m] and bad[m] >= 0:
                stop_member(m, bad[m], values[m], f"loss became {values[m]}")

    def elapsed_of(m: int) -> float:
        return elapsed_before[m] + time.perf_counter() - t0

    def value_of(m: int, acc: dict) -> float:
        return metric(m, acc) if metric is not None else acc.get("0var/ind", float("nan"))

    def evaluate_all(at: int, first: bool) -> None:
        for m in range(M):
            if not alive[m]:
                continue
            w = windows[m]
            train_loss = None if first or w.eval_n == 0 else w.eval_sum / w.eval_n
            lr = 0.0 if first else lr_of(m, at - 1)
            last_records[m] = evaluate_and_log(
                learner.model_of(m), sets[m], tc, runs[m].metrics, at, train_loss, lr,
                elapsed_of(m), fingerprints[m],
            )  # fmt: skip
        if on_eval is not None:
            on_eval(at, last_records)
        if progress and last_records[0]:
            bar.set_postfix_str(
                " ".join(
                    f"{lab}:{value_of(m, rec['acc']):.2f}"
                    for m, (lab, rec) in enumerate(zip(labels, last_records, strict=True))
                    if rec
                ),
                refresh=False,
            )

    def snapshot_all(at: int) -> None:
        for m in range(M):
            if alive[m]:
                extra = {"step": at, "config_fingerprint": fingerprints[m]}
                save_model(learner.model_of(m), runs[m].snapshot(at), extra)

    def checkpoint_all(at: int) -> None:
        for m in range(M):
            if not alive[m]:
                continue
            w = windows[m]
            mean = w.ckpt_sum / w.ckpt_n if w.ckpt_n else float("nan")
            if w.ckpt_n and exploding(mean, w.history, tc.divergence_factor, cfgs[m].task.p):
                stop_member(
                    m,
                    at,
                    mean,
                    f"mean training loss {mean:.4g} over the {w.ckpt_n} steps to here exploded "
                    f"(> {tc.divergence_factor:g} x the median {statistics.median(w.history):.4g}"
                    " of the earlier checkpoint windows, and above chance)",
                )
                continue
            if w.ckpt_n:
                w.history.append(mean)
            w.ckpt_sum, w.ckpt_n = 0.0, 0
            ckpt_acc[m] = 0.0
            save_training_state(
                runs[m].last_checkpoint,
                learner.model_of(m),
                learner.optimizer_state(m),
                generators[m],
                at,
                cfgs[m],
                elapsed_of(m),
                w.to_dict(),
            )

    spent = {"evaluations": 0.0, "snapshots": 0.0, "checkpoints": 0.0}

    @contextlib.contextmanager
    def timed(what: str):
        start = time.perf_counter()
        yield
        spent[what] += time.perf_counter() - start

    bar = tqdm(total=tc.steps, initial=step, disable=not progress, desc=_bar_title(cfgs, M))
    t0 = time.perf_counter()
    first_step = step
    if step == 0:
        with timed("evaluations"):
            evaluate_all(0, first=True)
        if tc.snapshot_every:
            with timed("snapshots"):
                snapshot_all(0)
    while step < tc.steps:
        batches = [stream.next() for stream in streams]
        tokens = torch.stack([b.tokens for b in batches])
        labels_t = torch.stack([b.labels for b in batches])
        losses = learner.train_step(tokens, labels_t, alive, step)
        detached = losses.detach().double()
        bad = ~torch.isfinite(detached)
        fresh_bad = bad & (first_bad < 0)
        first_bad.masked_fill_(fresh_bad, step + 1)
        bad_loss.copy_(torch.where(fresh_bad, detached, bad_loss))
        step += 1
        eval_acc.add_(detached)
        ckpt_acc.add_(detached)
        total_acc.add_(detached)
        eval_n += 1
        ckpt_n += 1
        bar.update(1)

        at_eval = step % tc.eval_every == 0 or step == tc.steps
        at_snapshot = bool(tc.snapshot_every) and step % tc.snapshot_every == 0
        at_checkpoint = step % tc.checkpoint_every == 0 or step == tc.steps
        if at_eval or at_snapshot or at_checkpoint:
            check_finite()
            if not any(alive):
                bar.close()
                raise TrainingError(_all_stopped(stopped, runs))
            sync_windows()
            if at_eval:
                with timed("evaluations"):
                    evaluate_all(step, first=False)
                eval_acc.zero_()
                eval_n = 0
                for w in windows:
                    w.eval_sum, w.eval_n = 0.0, 0
            if at_snapshot:
                with timed("snapshots"):
                    snapshot_all(step)
            if at_checkpoint:
                with timed("checkpoints"):
                    checkpoint_all(step)
                ckpt_n = 0
                if not any(alive):
                    bar.close()
                    raise TrainingError(_all_stopped(stopped, runs))
        if stop_at is not None and step >= stop_at and step < tc.steps:
            bar.close()
            elapsed = [elapsed_of(m) for m in range(M)]
            return SessionResult(step, last_records, stopped, elapsed, False)
    bar.close()
    elapsed = [elapsed_of(m) for m in range(M)]
    loop_s = time.perf_counter() - t0
    session = {
        "steps": step - first_step,
        "step_mode": _step_mode(learner),
        "setup_s": round(t0 - session_start, 3),
        "training_steps_s": round(loop_s - sum(spent.values()), 3),
        **{f"{what}_s": round(seconds, 3) for what, seconds in spent.items()},
    }
    for m in range(M):
        if alive[m]:
            breakdown = restricted_breakdown(learner.model_of(m), sets[m], cfgs[m].task.L)
            records = read_metrics(runs[m].metrics, fingerprints[m])
            write_summary(
                cfgs[m], runs[m].path, records, elapsed[m], device, breakdown, session=session
            )
    return SessionResult(step, last_records, stopped, elapsed, True)


def _step_mode(learner) -> str:
    """How the last session ran its steps: "cuda_graph", "compiled:<mode>" or "eager"."""
    if learner.graphed is not None and learner.graphed.graph is not None:
        return "cuda_graph"
    if learner.tc.compile != "none":
        return f"compiled:{learner.tc.compile}"
    return "eager"


def _bar_title(cfgs: list[RunConfig], M: int) -> str:
    return f"train {cfgs[0].name} s{cfgs[0].seed}" if M == 1 else f"batch of {M}"


def _all_stopped(stopped: list[str | None], runs: list[RunDir]) -> str:
    if len(runs) == 1:
        return stopped[0] or "the run stopped"
    return "every member stopped: " + "; ".join(
        f"{r.name}: {s}" for r, s in zip(runs, stopped, strict=True) if s
    )
