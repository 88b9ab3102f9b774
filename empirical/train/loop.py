"""The training loop: AdamW on on-the-fly batches, periodic evaluation, atomic checkpoints.

    result = train_run(cfg, run_dir)            # fresh run (refuses a directory in use)
    result = train_run(cfg, run_dir, resume=True)  # continue from checkpoints/last.pt

Run directory:
    config.toml          the resolved RunConfig
    eval_sets.pt         the seed's evaluation sets and held-out pairs (fixed per seed)
    metrics.jsonl        one line per evaluation (empirical.train.metrics)
    checkpoints/last.pt  resumable state (model, optimiser, RNG, step), replaced atomically
    snapshots/step_XXXXXX.pt  weights-only snapshots for analysis over training
    summary.json         final accuracies, detected phase changes, timing
    training_curves.png  the paper's Figure 2 for this run
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from empirical.config_io import ConfigError, atomic_write_bytes, config_to_toml
from empirical.model import AssignAddTransformer, save_model
from empirical.run_config import RunConfig, TrainConfig, load_run_config
from empirical.task import (
    TrainingSampler,
    build_eval_sets,
    held_out_pairs,
    load_eval_sets,
    save_eval_sets,
)
from empirical.task.pairs import training_generator
from empirical.train.batches import BatchStream
from empirical.train.breakdown import restricted_breakdown
from empirical.train.evaluate import evaluate_sets
from empirical.train.metrics import append_metrics, read_metrics, truncate_metrics
from empirical.train.schedule import learning_rate, schedule_of
from empirical.train.state import load_training_state, save_training_state


class TrainingError(RuntimeError):
    """The run cannot go on (diverged loss, run directory in use by another config, ...)."""


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    final_acc: dict[str, float]
    elapsed_s: float
    stopped_early: bool = False


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device = {name!r} but CUDA is not available; use 'auto' or 'cpu'")
    return device


# fields a resumed run may change (how long, where); everything else must match the saved run
RESUMABLE_CHANGES = {"steps", "device", "threads", "eval_batch_size"}


def resume_view(cfg: RunConfig) -> str:
    """The config as TOML without the fields a resume may change: two configs with equal
    views may continue one another's run."""
    keep = {k: v for k, v in vars(cfg.train).items() if k not in RESUMABLE_CHANGES}
    return config_to_toml(replace(cfg, train=replace(TrainConfig(), **keep)))


def steps_change_refusal(existing: RunConfig, cfg: RunConfig) -> str | None:
    """Why `cfg` may not continue a run started as `existing` although their resume views
    agree (None: it may): a decaying lr schedule is fixed by train.steps."""
    if cfg.train.lr_schedule != "constant" and existing.train.steps != cfg.train.steps:
        return (
            f"it was started with train.steps = {existing.train.steps} and train.lr_schedule = "
            f"'{cfg.train.lr_schedule}', whose decay is fixed by train.steps; it cannot "
            f"continue to train.steps = {cfg.train.steps}"
        )
    return None


def _comparable(cfg: RunConfig, resume: bool) -> str:
    return resume_view(cfg) if resume else config_to_toml(cfg)


def _check_run_dir(cfg: RunConfig, run_dir: Path, resume: bool) -> None:
    """Refuse to mix two configs in one directory, or to restart over an existing run."""
    config_path = run_dir / "config.toml"
    if not config_path.exists():
        if resume:
            raise TrainingError(f"cannot resume {run_dir}: it holds no config.toml (no run there)")
        return
    try:
        existing = load_run_config(config_path)
    except ConfigError as exc:
        raise TrainingError(f"{config_path} is not a readable run config: {exc}") from exc
    if _comparable(existing, resume) != _comparable(cfg, resume):
        raise TrainingError(
            f"{run_dir} already holds a run with a different config ({config_path}); "
            "choose another run directory (--run-dir), or resume it with --resume "
            f"(which may change only train.{{{', '.join(sorted(RESUMABLE_CHANGES))}}})"
        )
    refusal = steps_change_refusal(existing, cfg) if resume else None
    if refusal:
        raise TrainingError(f"cannot resume {run_dir}: {refusal}")
    if not resume and (run_dir / "checkpoints" / "last.pt").exists():
        raise TrainingError(
            f"{run_dir} already holds a run of this config; continue it with --resume {run_dir} "
            "or choose another run directory"
        )


def setup_eval_sets(cfg: RunConfig, run_dir: Path, device: torch.device):
    """The run's evaluation sets on `device`: loaded from eval_sets.pt, or built and saved."""
    path = run_dir / "eval_sets.pt"
    if path.exists():
        sets = load_eval_sets(path)
    else:
        sets = build_eval_sets(cfg.task, cfg.seed, device="cpu")
        save_eval_sets(sets, path)
    return {name: batch.to(device) for name, batch in sets.items()}


def train_run(
    cfg: RunConfig,
    run_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    stop_at: int | None = None,
) -> TrainResult:
    """Train `cfg` in `run_dir`. `stop_at` ends the session early after that step (as if the
    process were killed right after the checkpoint there); a later `resume=True` continues."""
    run_dir = Path(run_dir)
    tc = cfg.train
    _check_run_dir(cfg, run_dir, resume)
    device = resolve_device(tc.device)
    if tc.threads:
        torch.set_num_threads(tc.threads)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(run_dir / "config.toml", config_to_toml(cfg).encode())
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    if tc.snapshot_every:
        (run_dir / "snapshots").mkdir(exist_ok=True)

    torch.manual_seed(cfg.seed)
    model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed).to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas
    )
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device=device)
    generator = training_generator(cfg.seed, device)
    stream = BatchStream(sampler, generator, tc.batch_size, tc.sample_chunk)
    sets = setup_eval_sets(cfg, run_dir, device)
    metrics_path = run_dir / "metrics.jsonl"

    step, loss_sum, elapsed_before = 0, 0.0, 0.0
    last_path = run_dir / "checkpoints" / "last.pt"
    if resume and last_path.exists():
        ckpt = load_training_state(last_path)
        model.load_state_dict({k: v.to(device) for k, v in ckpt["model_state"].items()})
        optimizer.load_state_dict(ckpt["optimizer_state"])
        generator.set_state(ckpt["data_rng_state"].cpu())
        torch.set_rng_state(ckpt["torch_rng_state"])
        step, loss_sum = ckpt["step"], ckpt["train_loss_sum"]
        elapsed_before = ckpt["elapsed_s"]
        truncate_metrics(metrics_path, step)
    elif metrics_path.exists():
        metrics_path.unlink()

    if step == 0:
        evaluate_and_log(model, sets, tc, metrics_path, 0, float("nan"), 0.0, 0.0)
        if tc.snapshot_every:
            save_model(model, run_dir / "snapshots" / f"step_{0:06d}.pt", {"step": 0})

    model.train()
    t0 = time.perf_counter()
    bar = tqdm(
        total=tc.steps, initial=step, disable=not progress, desc=f"train {cfg.name} s{cfg.seed}"
    )
    window_losses = 0.0
    window_n = 0
    while step < tc.steps:
        lr = learning_rate(step, tc.lr, **schedule_of(tc))
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = stream.next()
        logits = model.forward_fast(batch.tokens)
        loss = F.cross_entropy(logits.float(), batch.labels)
        if not torch.isfinite(loss):
            raise TrainingError(
                f"loss became {loss.item()} at step {step + 1} (lr {lr:g}); the run stopped and "
                f"its last good checkpoint is {last_path if last_path.exists() else 'none yet'}"
                " — lower train.lr or set train.grad_clip"
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        optimizer.step()
        step += 1
        loss_value = loss.item()
        loss_sum += loss_value
        window_losses += loss_value
        window_n += 1
        bar.update(1)

        if step % tc.eval_every == 0 or step == tc.steps:
            elapsed = elapsed_before + time.perf_counter() - t0
            acc = evaluate_and_log(
                model, sets, tc, metrics_path, step, window_losses / window_n, lr, elapsed
            )
            window_losses, window_n = 0.0, 0
            bar.set_postfix(_short_acc(acc), refresh=False)
        if tc.snapshot_every and step % tc.snapshot_every == 0:
            save_model(model, run_dir / "snapshots" / f"step_{step:06d}.pt", {"step": step})
        if step % tc.checkpoint_every == 0 or step == tc.steps:
            elapsed = elapsed_before + time.perf_counter() - t0
            save_training_state(
                last_path, model, optimizer, generator, step, cfg, loss_sum, elapsed
            )
        if stop_at is not None and step >= stop_at and step < tc.steps:
            bar.close()
            records = read_metrics(metrics_path)
            return TrainResult(run_dir, step, records[-1]["acc"], elapsed_before, True)
    bar.close()
    elapsed = elapsed_before + time.perf_counter() - t0
    records = read_metrics(metrics_path)
    from empirical.train.summary import write_summary

    breakdown = restricted_breakdown(model, sets, cfg.task.L)
    write_summary(cfg, run_dir, records, elapsed, device, breakdown)
    return TrainResult(run_dir, step, records[-1]["acc"], elapsed)


def _short_acc(acc: dict[str, float]) -> dict[str, str]:
    out = {}
    for kind in ("0var", "1var", "2var"):
        name = f"{kind}/ind"
        if name in acc:
            out[kind] = f"{acc[name]:.2f}"
    var = [v for k, v in acc.items() if k.endswith("/var")]
    if var:
        out["var-restr"] = f"{sum(var) / len(var):.2f}"
    return out


def evaluate_and_log(model, sets, tc, metrics_path, step, train_loss, lr, elapsed):
    """Evaluate every set and append one record to metrics.jsonl; returns the accuracies."""
    acc, loss = evaluate_sets(model, sets, tc.eval_batch_size)
    record = {
        "step": step,
        "train_loss": None if math.isnan(train_loss) else train_loss,
        "lr": lr,
        "elapsed_s": round(elapsed, 3),
        "acc": acc,
        "loss": loss,
    }
    append_metrics(metrics_path, record)
    return acc


def summary_of(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())
