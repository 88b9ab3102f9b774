"""Training-step speed of a deeper model: the 3-layer fast forward vs the plain hooked one.

    python benchmarks/bench_depth.py [--steps 20] [--rounds 3] [--threads 1]

One step = forward + cross-entropy + backward + AdamW step (configs/authors.toml's lr, weight
decay and betas), at configs/authors.toml's batch and widths (batch 512, d_model 128, d_mlp 512,
p = 59, K = 12, L = 16), float32, one torch thread, random valid tokens (speed does not depend
on the values). Three models, timed in alternation so drift in machine load hits all alike:
the 3-layer model with the fast forward (`forward_fast`, empirical.model.fast), the same model
with the plain full hooked forward (`forward`, every activation at every position), and the
2-layer model with the fast forward. Prints median wall and process-CPU times per step and the
ratios: the issue's target is a 3-layer fast step >= 5x faster than the plain full forward.
Prints, never asserts: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from empirical.model.device import cpu_model
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config

AUTHORS = Path(__file__).resolve().parents[1] / "configs" / "authors.toml"


def time_steps(model, tokens, labels, fast: bool, train, steps: int, warmup: int):
    """Wall-clock and process-CPU seconds of each timed training step."""
    opt = torch.optim.AdamW(
        model.parameters(), lr=train.lr, weight_decay=train.weight_decay, betas=train.betas
    )
    wall, cpu = [], []
    for i in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = model(tokens, labels, return_type="loss", fast=fast)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= warmup:
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="alternate the three this many times")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    runs = {
        "3-layer fast": (3, True),
        "3-layer full": (3, False),
        "2-layer fast": (2, True),
    }
    cfgs = {n: load_run_config(AUTHORS, [f"model.n_layers={n}"]) for n in (2, 3)}
    train = cfgs[3].train
    model_cfg = cfgs[3].built_model_config()
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model_cfg.d_vocab, (train.batch_size, model_cfg.n_ctx), generator=gen)
    labels = torch.randint(0, model_cfg.d_vocab_out, (train.batch_size,), generator=gen)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for name, (n_layers, fast) in runs.items():
            model = AssignAddTransformer(cfgs[n_layers].built_model_config(), seed=0)
            w, c = time_steps(model, tokens, labels, fast, train, args.steps, args.warmup)
            wall[name] += w
            cpu[name] += c
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    machine = f"{cpu_model()} CPU, {os.cpu_count()} cores"
    print(f"device: {machine}; torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(
        f"configs/authors.toml sizes: batch {train.batch_size}, d_model {model_cfg.d_model}, "
        f"d_mlp {model_cfg.d_mlp}, p={model_cfg.d_vocab_out}, L={model_cfg.n_ctx}, float32, AdamW"
    )
    print(f"1-min load average {load_before:.2f} before, {load_after:.2f} after")
    med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    for name in runs:
        p10 = sorted(wall[name])[len(wall[name]) // 10] * 1e3
        print(
            f"{name}: median {med[name]:7.2f} ms/step wall (p10 {p10:.2f}), "
            f"process CPU {med_cpu[name]:7.2f} ms/step, {len(wall[name])} steps"
        )
    for label, times in (("wall", med), ("CPU", med_cpu)):
        print(
            f"{label}: 3-layer full / 3-layer fast = "
            f"{times['3-layer full'] / times['3-layer fast']:.1f}x (target >= 5x); "
            f"3-layer fast / 2-layer fast = {times['3-layer fast'] / times['2-layer fast']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
