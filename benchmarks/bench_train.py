"""Training throughput: our trainer's step against a plain reference, side by side.

    python benchmarks/bench_train.py [--steps 100] [--rounds 3] [--threads N] [--device cpu]

Ours:      vectorised batch sampler (empirical.task.TrainingSampler) + the exact fast path
           (layer 2 only at the answer position) + AdamW, as in empirical.train.loop.
Reference: the same model and batch size with the full-sequence forward (every position
           through both layers) and per-row Python data generation (benchmarks/bench_task.py's
           PerRowReference, same distribution) + AdamW.

Both use configs/paper.toml (p = 97, K = 5, batch 512). Also times one evaluation of every
evaluation set and projects the default run (train.steps steps, an evaluation every
train.eval_every steps). Prints a markdown table for the README.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_task import PerRowReference  # noqa: E402

from empirical.model.transformer import AssignAddTransformer  # noqa: E402
from empirical.runs.config import load_run_config  # noqa: E402
from empirical.task.assign_add.draw import TrainingSampler  # noqa: E402
from empirical.task.eval_sets import build_eval_sets  # noqa: E402
from empirical.task.pairs import held_out_pairs, training_generator  # noqa: E402
from empirical.train.evaluate import evaluate_sets  # noqa: E402


def make_step(model, opt, next_batch, fast: bool):
    def step():
        tokens, labels = next_batch()
        logits = model.forward_fast(tokens) if fast else model(tokens, last_only=True)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def time_per_step(step, steps: int, warmup: int, sync) -> float:
    for _ in range(warmup):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t) / steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="alternate ours/reference this often")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    cfg = load_run_config(ROOT / "configs" / "paper.toml")
    held = held_out_pairs(cfg.task, cfg.seed)
    bs = cfg.train.batch_size

    def build():
        model = AssignAddTransformer(cfg.built_model_config(), seed=0).to(device)
        opt = torch.optim.AdamW(
            model.parameters(), lr=1e-3, weight_decay=cfg.train.weight_decay, betas=(0.9, 0.98)
        )
        return model, opt

    sampler = TrainingSampler(cfg.task, held, device=device)
    gen = training_generator(0, device)

    def ours_batch():
        b = sampler.sample(bs, gen)
        return b.tokens, b.labels

    reference = PerRowReference(cfg.task, held, seed=0)

    def reference_batch():
        tokens, labels = reference.batch(bs)
        return tokens.to(device), labels.to(device)

    ours_t, ref_t = [], []
    for _ in range(args.rounds):
        model, opt = build()
        ours_t.append(
            time_per_step(make_step(model, opt, ours_batch, True), args.steps, args.warmup, sync)
        )
        model, opt = build()
        ref_steps = max(10, args.steps // 5)
        ref_t.append(
            time_per_step(make_step(model, opt, reference_batch, False), ref_steps, 2, sync)
        )
    ours_s, ref_s = statistics.median(ours_t), statistics.median(ref_t)

    sets = {k: v.to(device) for k, v in build_eval_sets(cfg.task, cfg.seed).items()}
    model, _ = build()
    evaluate_sets(model, sets, cfg.train.eval_batch_size)
    t = time.perf_counter()
    evaluate_sets(model, sets, cfg.train.eval_batch_size)
    sync()
    eval_s = time.perf_counter() - t
    n_eval_seqs = sum(len(v) for v in sets.values())
    steps, every = cfg.train.steps, cfg.train.eval_every
    n_evals = steps // every + 1
    ours_run = steps * ours_s + n_evals * eval_s
    ref_run = steps * ref_s + n_evals * eval_s

    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU {platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads"
    )
    print(f"device: {where}; load average {os.getloadavg()[0]:.2f}; torch {torch.__version__}")
    print(
        f"rounds (ms/step) ours {[round(1e3 * x, 1) for x in ours_t]}, "
        f"reference {[round(1e3 * x, 1) for x in ref_t]}"
    )
    print()
    print("| step (batch 512) | ms/step | steps/s | projected default run |")
    print("| --- | --- | --- | --- |")
    print(
        f"| ours: vectorised sampler + fast path | {1e3 * ours_s:.1f} | {1 / ours_s:.1f} | "
        f"{ours_run / 60:.1f} min |"
    )
    print(
        f"| reference: per-row data + full forward | {1e3 * ref_s:.1f} | {1 / ref_s:.1f} | "
        f"{ref_run / 60:.1f} min |"
    )
    print()
    print(
        f"speed-up per step: {ref_s / ours_s:.1f}x; one evaluation of all {len(sets)} sets "
        f"({n_eval_seqs} sequences): {eval_s:.2f} s, x{n_evals} in a {steps}-step run"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
