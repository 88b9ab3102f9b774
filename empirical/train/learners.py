"""The learners of the training skeleton: what differs between training one model and a
batch of members (empirical.train.engine, run by empirical.train.session).

    learner = SingleLearner(cfg, device)       # one AssignAddTransformer, torch's AdamW
    learner = BatchLearner(cfgs, device)       # M members as one BatchedModel
    losses = learner.train_step(tokens, labels, alive, step)    # [M] losses, on the device

A learner holds the model(s), the forward and loss, the backward and optimiser step, each
member's model and optimiser state for its checkpoint (`model_of`, `optimizer_state`) and
`load` from the members' checkpoints. The step runs eagerly, compiled (train.compile) or as
a CUDA graph (train.cuda_graph).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F

from empirical.model.batched import BatchedModel
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import RunConfig
from empirical.train.constraints import UpdateConstraints
from empirical.train.cuda_graph import GraphedStep, graph_applies
from empirical.train.engine import TrainingError, initial_weights, perturbed
from empirical.train.optim import MemberAdamW, load_optimizer_state, portable_optimizer_state
from empirical.train.schedule import learning_rate, schedule_of
from empirical.train.targets import target_loss


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


class _Step:
    """The training step both learners share: eager, or replayed as a CUDA graph
    (train.cuda_graph on CUDA, empirical/train/cuda_graph.py) while every member is alive.
    A learner provides `losses` and `_backward_and_step`."""

    graphed: GraphedStep | None = None
    constraints: UpdateConstraints | None = None  # train.freeze, train.project_out

    def _start_step(self, graphable: bool) -> None:
        if graphable:
            self.graphed = GraphedStep(self._full_step, self.optimizer, self.device)

    def _lr(self, step: int) -> float:
        """The learning rate of `step` (members that share one: train.lr on the schedule)."""
        return learning_rate(step, self.tc.lr, **schedule_of(self.tc))

    def _set_lr(self, step: int) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr(step)

    def _take_recovery_settings(self) -> None:
        """train.lr and weight_decay into a restored optimiser (a resume may change them)."""
        for group in self.optimizer.param_groups:
            group["lr"], group["weight_decay"] = self.tc.lr, self.tc.weight_decay

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

    def train_step_targets(self, batch, alive: list[bool], step: int) -> torch.Tensor:
        """One optimiser step on a batch labelled per position (`Batch.targets`: the graph
        family), eagerly; returns the loss [1] (empirical.train.targets.target_loss)."""
        self._set_lr(step)
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            losses = self.target_losses(batch)
        self._backward_and_step(losses, alive)
        return losses

    def target_losses(self, batch) -> torch.Tensor:
        raise TrainingError(
            "a task labelled per position (task.family = 'graph') trains one model at a time "
            "(python -m empirical train), not a batch of members"
        )


class SingleLearner(_Step):
    """One AssignAddTransformer trained by torch's AdamW (the plain `train` command)."""

    def __init__(self, cfg: RunConfig, device: torch.device):
        tc = cfg.train
        self.n_members, self.device, self.tc = 1, device, tc
        self.model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed).to(device)
        if tc.init_from:
            self.model.load_state_dict(initial_weights(cfg))
        if tc.init_perturbation:
            names = [n for n, _ in self.model.named_parameters()]
            self.model.load_state_dict(perturbed(cfg, self.model.state_dict(), names))
        names = [n for n, _ in self.model.named_parameters()]
        self.constraints = UpdateConstraints.of([cfg], names)
        graphable = graph_applies(device, tc.cuda_graph, tc.compile) and not self.constraints
        self.optimizer = _adamw(self.model.parameters(), tc, device, graphable)
        self._loss = _compiled(self._loss_of, tc.compile)
        self._start_step(graphable)

    def _loss_of(self, tokens, labels):
        return F.cross_entropy(self.model.forward_fast(tokens).float(), labels)

    def losses(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with self._autocast():
            return self._loss(tokens[0], labels[0]).unsqueeze(0)

    def target_losses(self, batch) -> torch.Tensor:
        weights = dict(self.model.named_parameters(remove_duplicate=False))
        return target_loss(weights, batch, self.model.cfg).unsqueeze(0)

    def _backward_and_step(self, losses: torch.Tensor, alive: list[bool] | None) -> None:
        losses.sum().backward()
        if self.constraints is not None:  # frozen gradients zeroed before the clip
            named = dict(self.model.named_parameters())
            values = {n: p.unsqueeze(0) for n, p in named.items()}
            grads = {n: None if p.grad is None else p.grad.unsqueeze(0) for n, p in named.items()}
            self.constraints.before_step(values, grads)
        if self.tc.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        self.optimizer.step()
        if self.constraints is not None:
            self.constraints.after_step(values)

    def model_of(self, m: int) -> AssignAddTransformer:
        return self.model

    def optimizer_state(self, m: int) -> dict:
        return portable_optimizer_state(self.optimizer.state_dict())

    def load(self, checkpoints: list[dict]) -> None:
        ckpt = checkpoints[0]
        self.model.load_state_dict({k: v.to(self.device) for k, v in ckpt["model_state"].items()})
        load_optimizer_state(self.optimizer, ckpt["optimizer_state"])
        self._take_recovery_settings()


class BatchLearner(_Step):
    """M members as one BatchedModel: one forward and one backward for all, AdamW over the
    stacked weights (members' slices updated exactly as their single runs would be), or
    MemberAdamW when members differ in lr or weight decay; gradient clipping per member."""

    def __init__(self, cfgs: list[RunConfig], device: torch.device):
        tc = cfgs[0].train
        self.n_members, self.device, self.tc = len(cfgs), device, tc
        if cfgs[0].model.recurrent:
            self.target_losses(None)  # the error: one model at a time
        self.model = BatchedModel(cfgs[0].built_model_config(), [c.seed for c in cfgs], device)
        for m, cfg in enumerate(cfgs):
            if cfg.train.init_from:
                self.model.load_member_state(m, initial_weights(cfg))
            if cfg.train.init_perturbation:
                self.model.load_member_state(m, perturbed(cfg, self.model.member_state(m)))
        self.base_lrs = [c.train.lr for c in cfgs]
        decays = [c.train.weight_decay for c in cfgs]
        self.shared = len(set(self.base_lrs)) == 1 and len(set(decays)) == 1
        self.constraints = UpdateConstraints.of(cfgs, list(self.model.names))
        graphable = (
            self.shared
            and graph_applies(device, tc.cuda_graph, tc.compile)
            and not self.constraints
        )
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
            super()._set_lr(step)
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
        values = dict(zip(self.model.names, params, strict=True))
        if self.constraints is not None:  # frozen gradients zeroed before the clip
            self.constraints.before_step(values, {n: p.grad for n, p in values.items()})
        if self.tc.grad_clip is not None:
            _clip_per_member(params, self.tc.grad_clip)
        self.optimizer.step()
        if self.constraints is not None:
            self.constraints.after_step(values)

    def model_of(self, m: int) -> AssignAddTransformer:
        return self.model.copy_member_into(m, self.scratch)

    def optimizer_state(self, m: int) -> dict:
        """Member m's slice of the optimiser, as a single run's AdamW state_dict."""
        full = portable_optimizer_state(self.optimizer.state_dict())
        state = {
            i: {k: (v if k == "step" else v[m]).detach().cpu().clone() for k, v in entry.items()}
            for i, entry in full["state"].items()
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
        if self.shared:
            self._take_recovery_settings()


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
