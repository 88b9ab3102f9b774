"""Train several run configs at once as one `BatchedModel`, each in its own run directory.

    train_batch([(cfg_a, dir_a), (cfg_b, dir_b)], progress=True)

Every member is the run `train_run(cfg, run_dir)` would train: the same init (its seed), the
same data stream (its own `TrainingSampler`, held-out pairs and `training_generator(seed)`),
the same AdamW updates, the same evaluations on its own evaluation sets. Its directory ends up
a standard run directory (config.toml, eval_sets.pt, metrics.jsonl, checkpoints/last.pt in
train_run's format, snapshots/, summary.json, training_curves.png): `python -m empirical train
--resume DIR` and the analysis tools work on it.

What the members share: the architecture and the [train] settings but lr and weight decay
(`spec.batch_key`), and the step they start from. The optimiser is one `torch.optim.AdamW`
over the stacked [M, ...] parameters when the members share lr and weight decay: its update
is elementwise, so member m's slice is updated exactly as a single run's AdamW would update it
(bit for bit on CPU). Members that differ in them get `MemberAdamW` (the same update with a
per-member lr and decay, equal to float rounding). Gradient clipping (train.grad_clip) is per
member.

A member whose loss becomes NaN or inf stops alone: it is frozen (out of the loss, no more
evaluations or checkpoints), its checkpoints/last.pt stays its last good state, and
`stopped.json` in its directory says at which step and why; the others train on.

Checkpoints are per member (`DIR/checkpoints/last.pt`, each written atomically, all at the
same step), so a sweep resumes member by member and members can be regrouped on resume.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from empirical.config_io import atomic_write_bytes, config_to_toml
from empirical.model import AssignAddTransformer, save_model
from empirical.run_config import RunConfig
from empirical.sweep.batched import BatchedModel
from empirical.sweep.optim import MemberAdamW
from empirical.sweep.spec import batch_key
from empirical.task import TrainingSampler, held_out_pairs
from empirical.task.pairs import training_generator
from empirical.train.batches import BatchStream
from empirical.train.loop import (
    TrainingError,
    evaluate_and_log,
    resolve_device,
    setup_eval_sets,
)
from empirical.train.metrics import read_metrics, truncate_metrics
from empirical.train.schedule import learning_rate, schedule_of
from empirical.train.state import load_training_state, save_training_state


class _MemberOptimizer:
    """Member m's slice of the batched AdamW, with the `state_dict()` a single run's AdamW
    would have (what `save_training_state` stores)."""

    def __init__(self, optimizer: torch.optim.Optimizer, m: int):
        self.optimizer, self.m = optimizer, m

    def state_dict(self) -> dict:
        full = self.optimizer.state_dict()
        state = {}
        for i, entry in full["state"].items():
            state[i] = {
                k: (v[self.m].detach().cpu().clone() if k != "step" else v.detach().cpu().clone())
                for k, v in entry.items()
            }
        groups = [dict(g) for g in full["param_groups"]]
        if isinstance(self.optimizer, MemberAdamW):
            groups = [{**self.optimizer.member_param_group(self.m), "params": groups[0]["params"]}]
        return {"state": state, "param_groups": groups}


def _stacked_optimizer_state(states: list[dict], device) -> dict:
    """The batched AdamW state_dict whose member m slice is the single-run state `states[m]`."""
    first = states[0]
    state = {}
    for i, entry in first["state"].items():
        state[i] = {}
        for k, v in entry.items():
            if k == "step":
                steps = {float(s["state"][i]["step"]) for s in states}
                if len(steps) != 1:
                    raise TrainingError(f"members at different optimiser steps {sorted(steps)}")
                state[i][k] = v.clone()
            else:
                state[i][k] = torch.stack([s["state"][i][k] for s in states]).to(device)
    return {"state": state, "param_groups": first["param_groups"]}


STOPPED_FILE = "stopped.json"


def member_stopped(run_dir: Path) -> dict | None:
    """What `stopped.json` says about a member that stopped on a non-finite loss (else None)."""
    path = Path(run_dir) / STOPPED_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {"step": None, "reason": f"{path} is unreadable"}


def member_step(run_dir: Path) -> int:
    """The step of a member's resumable checkpoint (0: none)."""
    path = Path(run_dir) / "checkpoints" / "last.pt"
    if not path.exists():
        return 0
    return int(load_training_state(path)["step"])


def train_batch(
    members: list[tuple[RunConfig, Path]],
    progress: bool = True,
    stop_at: int | None = None,
    on_eval: Callable[[int, list[dict]], None] | None = None,
    labels: list[str] | None = None,
    metric: Callable[[int, dict], float] | None = None,
) -> list[dict]:
    """Train the members (same `batch_key`, same checkpoint step) together; returns each
    member's last metrics record. A member with `checkpoints/last.pt` resumes from it.

    stop_at: end after that step (as if killed after the checkpoint there). on_eval(step,
    records): called after each evaluation. labels / metric(m, acc): the progress bar's
    per-member text and value (default: the member's directory name and 0var/ind)."""
    if not members:
        return []
    cfgs = [cfg for cfg, _ in members]
    dirs = [Path(d) for _, d in members]
    keys = {batch_key(cfg) for cfg in cfgs}
    if len(keys) != 1:
        raise TrainingError("train_batch: members differ in architecture or [train] settings")
    M = len(members)
    tc = cfgs[0].train
    labels = labels or [d.name for d in dirs]
    device = resolve_device(tc.device)
    if tc.threads:
        torch.set_num_threads(tc.threads)
    mc = cfgs[0].built_model_config()

    starts = [member_step(d) for d in dirs]
    if len(set(starts)) != 1:
        raise TrainingError(f"train_batch: members at different steps {starts}")
    step = starts[0]
    resume = step > 0
    for cfg, d in members:
        d.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(d / "config.toml", config_to_toml(cfg).encode())
        (d / "checkpoints").mkdir(exist_ok=True)
        if tc.snapshot_every:
            (d / "snapshots").mkdir(exist_ok=True)

    torch.manual_seed(cfgs[0].seed)
    model = BatchedModel(mc, [cfg.seed for cfg in cfgs], device=device)
    base_lrs = [cfg.train.lr for cfg in cfgs]
    decays = [cfg.train.weight_decay for cfg in cfgs]
    shared_hyper = len(set(base_lrs)) == 1 and len(set(decays)) == 1
    if shared_hyper:
        optimizer = torch.optim.AdamW(
            model.params(), lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas
        )
    else:
        optimizer = MemberAdamW(model.params(), base_lrs, decays, betas=tc.betas)
    samplers = [
        TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device=device) for cfg in cfgs
    ]
    generators = [training_generator(cfg.seed, device) for cfg in cfgs]
    streams = [
        BatchStream(s, g, tc.batch_size, tc.sample_chunk)
        for s, g in zip(samplers, generators, strict=True)
    ]
    alive = [member_stopped(d) is None for d in dirs]
    if not all(alive):
        stopped = [d.name for d, a in zip(dirs, alive, strict=True) if not a]
        raise TrainingError(f"train_batch: member(s) {', '.join(stopped)} stopped earlier")
    sets = [setup_eval_sets(cfg, d, device) for cfg, d in members]
    metrics_paths = [d / "metrics.jsonl" for d in dirs]
    loss_sums = torch.zeros(M, dtype=torch.float64, device=device)
    elapsed_before = [0.0] * M
    if resume:
        opt_states = []
        for m, d in enumerate(dirs):
            ckpt = load_training_state(d / "checkpoints" / "last.pt")
            model.load_member_state(m, ckpt["model_state"])
            opt_states.append(ckpt["optimizer_state"])
            generators[m].set_state(ckpt["data_rng_state"].cpu())  # a CPU ByteTensor
            loss_sums[m] = float(ckpt["train_loss_sum"])
            elapsed_before[m] = float(ckpt["elapsed_s"])
            truncate_metrics(metrics_paths[m], step)
        torch.set_rng_state(ckpt["torch_rng_state"])
        optimizer.load_state_dict(_stacked_optimizer_state(opt_states, device))
    else:
        for path in metrics_paths:
            if path.exists():
                path.unlink()

    # one single model to evaluate / checkpoint / snapshot each member through train_run's code
    scratch = AssignAddTransformer(mc, seed=0).to(device)
    last_records: list[dict] = [{} for _ in range(M)]

    def value_of(m: int, acc: dict) -> float:
        if metric is not None:
            return metric(m, acc)
        return acc.get("0var/ind", float("nan"))

    def evaluate_all(at_step: int, window, lr_step: int | None, elapsed: float) -> None:
        """lr_step: the optimiser step whose learning rate is logged (None: before training)."""
        for m in range(M):
            if not alive[m]:
                continue
            lr = 0.0 if lr_step is None else learning_rate(lr_step, base_lrs[m], **schedule_of(tc))
            model.copy_member_into(m, scratch)
            train_loss = float("nan") if window is None else window[m]
            evaluate_and_log(
                scratch,
                sets[m],
                tc,
                metrics_paths[m],
                at_step,
                train_loss,
                lr,
                elapsed_before[m] + elapsed,
            )
            last_records[m] = read_metrics(metrics_paths[m])[-1]
        if on_eval is not None:
            on_eval(at_step, last_records)

    def snapshot_all(at_step: int) -> None:
        for m, d in enumerate(dirs):
            if not alive[m]:
                continue
            model.copy_member_into(m, scratch)
            save_model(scratch, d / "snapshots" / f"step_{at_step:06d}.pt", {"step": at_step})

    if step == 0:
        evaluate_all(0, None, None, 0.0)
        if tc.snapshot_every:
            snapshot_all(0)

    bar = tqdm(total=tc.steps, initial=step, disable=not progress, desc=f"batch of {M}")

    def postfix() -> None:
        if progress and last_records[0]:
            bar.set_postfix_str(
                " ".join(
                    f"{lab}:{value_of(m, rec['acc']):.2f}"
                    for m, (lab, rec) in enumerate(zip(labels, last_records, strict=True))
                ),
                refresh=False,
            )

    postfix()
    t0 = time.perf_counter()
    window = torch.zeros(M, dtype=torch.float64, device=device)
    window_n = 0
    params = model.params()
    mask = alive_mask(alive, device)
    while step < tc.steps:
        scale = learning_rate(step, 1.0, **schedule_of(tc))
        if shared_hyper:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, tc.lr, **schedule_of(tc))
        else:
            optimizer.set_lr_scale(scale)
        batches = [stream.next() for stream in streams]
        tokens = torch.stack([b.tokens for b in batches])
        logits = model.forward_fast(tokens)
        # per member, exactly train_run's loss (same reduction order)
        losses = torch.stack(
            [F.cross_entropy(logits[m].float(), batches[m].labels) for m in range(M)]
        )
        finite = torch.isfinite(losses)
        if not bool(finite[mask].all()):
            for m in range(M):
                if alive[m] and not bool(finite[m]):
                    alive[m] = False
                    _write_stopped(
                        dirs[m], step + 1, float(losses[m].detach()), scale * base_lrs[m]
                    )
                    bar.write(
                        f"{labels[m]}: loss {float(losses[m].detach())} at step {step + 1}: stopped"
                    )
            if not any(alive):
                bar.close()
                raise TrainingError(
                    f"loss became non-finite at step {step + 1} for every member; each "
                    "member's last good checkpoint is its checkpoints/last.pt — lower "
                    "train.lr or set train.grad_clip"
                )
            mask = alive_mask(alive, device)
        optimizer.zero_grad(set_to_none=True)
        torch.where(mask, losses, torch.zeros_like(losses)).sum().backward()
        if not all(alive):
            for p in params:
                if p.grad is not None:
                    p.grad[~mask] = 0.0
        if tc.grad_clip is not None:
            _clip_per_member(params, tc.grad_clip)
        optimizer.step()
        step += 1
        detached = losses.detach().double()
        loss_sums += detached
        window += detached
        window_n += 1
        bar.update(1)

        if step % tc.eval_every == 0 or step == tc.steps:
            elapsed = time.perf_counter() - t0
            evaluate_all(step, (window / window_n).tolist(), step - 1, elapsed)
            window.zero_()
            window_n = 0
            postfix()
        if tc.snapshot_every and step % tc.snapshot_every == 0:
            snapshot_all(step)
        if step % tc.checkpoint_every == 0 or step == tc.steps:
            elapsed = time.perf_counter() - t0
            sums = loss_sums.tolist()
            for m, (cfg, d) in enumerate(members):
                if not alive[m]:
                    continue
                model.copy_member_into(m, scratch)
                save_training_state(
                    d / "checkpoints" / "last.pt",
                    scratch,
                    _MemberOptimizer(optimizer, m),
                    generators[m],
                    step,
                    cfg,
                    sums[m],
                    elapsed_before[m] + elapsed,
                )
        if stop_at is not None and step >= stop_at and step < tc.steps:
            bar.close()
            return last_records
    bar.close()
    elapsed = time.perf_counter() - t0
    from empirical.train.summary import write_summary

    for m, (cfg, d) in enumerate(members):
        if alive[m]:
            write_summary(
                cfg, d, read_metrics(metrics_paths[m]), elapsed_before[m] + elapsed, device
            )
    return last_records


def alive_mask(alive: list[bool], device) -> torch.Tensor:
    return torch.tensor(alive, dtype=torch.bool).to(device)


def _write_stopped(run_dir: Path, step: int, loss: float, lr: float) -> None:
    text = json.dumps(
        {
            "step": step,
            "loss": repr(loss),
            "lr": lr,
            "reason": f"loss became {loss} at step {step} (lr {lr:g}); checkpoints/last.pt is "
            "the last good state — lower train.lr or set train.grad_clip",
        },
        indent=2,
    )
    atomic_write_bytes(Path(run_dir) / STOPPED_FILE, text.encode())


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
