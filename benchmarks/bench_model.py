"""Training-step speed of the model: fast path vs full (hooked) path, side by side.

    python benchmarks/bench_model.py [--batch 512] [--steps 50] [--device cpu] [--threads N]

One step = forward + cross-entropy + backward + AdamW step (lr 1e-3, weight decay 1.0,
betas (0.9, 0.98)), batch 512, p = 97, K = 5, L = 16, random valid tokens (any id below
d_vocab; speed does not depend on the values). Prints a table and a markdown row for the README.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from empirical.model.config import ModelConfig
from empirical.model.device import cpu_model
from empirical.model.transformer import AssignAddTransformer


def time_steps(
    model, tokens, labels, fast: bool, steps: int, warmup: int
) -> tuple[list[float], list[float]]:
    """Wall-clock and process-CPU seconds of each timed training step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1.0, betas=(0.9, 0.98))
    sync = torch.cuda.synchronize if tokens.is_cuda else (lambda: None)
    wall, cpu = [], []
    for i in range(warmup + steps):
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        loss = model(tokens, labels, return_type="loss", fast=fast)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        if i >= warmup:
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="alternate fast/full this many times")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--p", type=int, default=97)
    ap.add_argument("--K", type=int, default=5)
    ap.add_argument("--L", type=int, default=16)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    cfg = ModelConfig.for_task(args.p, args.K, args.L)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.d_vocab, (args.batch, args.L), generator=gen)
    labels = torch.randint(0, cfg.d_vocab_out, (args.batch,), generator=gen)
    tokens, labels = tokens.to(args.device), labels.to(args.device)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results: dict[str, list[float]] = {"fast": [], "full": []}
    cpu_times: dict[str, list[float]] = {"fast": [], "full": []}
    for _ in range(args.rounds):  # interleave so drift in machine load hits both alike
        for name in ("fast", "full"):
            model = AssignAddTransformer(cfg, seed=0, device=args.device)
            wall, cpu = time_steps(model, tokens, labels, name == "fast", args.steps, args.warmup)
            results[name] += wall
            cpu_times[name] += cpu
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    device = args.device
    if device.startswith("cuda"):
        device = torch.cuda.get_device_name(torch.device(device))
    else:
        device = f"{cpu_model()} CPU, {os.cpu_count()} cores"
    print(f"device: {device}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"batch {args.batch}, p={args.p}, K={args.K}, L={args.L}, {cfg.dtype}, AdamW")
    print(f"1-min load average {load_before:.2f} before, {load_after:.2f} after (other processes")
    print("competing for the cores inflate wall times; process CPU time is less sensitive)")
    med = {k: statistics.median(v) * 1e3 for k, v in results.items()}
    for name in ("fast", "full"):
        v = sorted(results[name])
        lo, hi = v[len(v) // 10] * 1e3, v[(9 * len(v)) // 10] * 1e3
        cpu = statistics.median(cpu_times[name]) * 1e3
        print(
            f"{name:>5}: median {med[name]:7.2f} ms/step ({1e3 / med[name]:6.1f} steps/s), "
            f"p10 {lo:.2f} p90 {hi:.2f} ms, process CPU {cpu:.2f} ms/step, {len(v)} steps"
        )
    p10 = {k: sorted(v)[len(v) // 10] * 1e3 for k, v in results.items()}
    speedup = med["full"] / med["fast"]
    print(f"speedup fast vs full: {speedup:.2f}x (median), {p10['full'] / p10['fast']:.2f}x (p10)")
    print()
    print(
        "| device | threads | batch | fast ms/step, median (p10) | full ms/step, median (p10) "
        "| fast steps/s | speedup | load avg |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {device} | {torch.get_num_threads()} | {args.batch} | "
        f"{med['fast']:.1f} ({p10['fast']:.1f}) | {med['full']:.1f} ({p10['full']:.1f}) | "
        f"{1e3 / med['fast']:.0f} | {speedup:.1f}x | {load_before:.1f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
