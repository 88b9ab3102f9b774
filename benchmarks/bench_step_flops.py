"""How close the training step comes to this machine's matmul throughput.

    python benchmarks/bench_step_flops.py [--config configs/authors.toml] [--steps 200]
        [--threads 1] [overrides ...]

Counts the floating-point operations of one training step of our engine (the fast forward,
cross-entropy at the answer, backward; torch.utils.flop_counter.FlopCounterMode, which counts
matrix products: the elementwise work, the sampler and AdamW are extra), times the engine's
real step (bench_engine.timed_steps: sampler, forward, backward, AdamW), and measures the
machine's single-process matmul throughput with the same thread count: a large square
product (the ceiling) and the step's own largest product shape (the MLP's
[batch, d_model] x [d_model, d_mlp]). Prints FLOPs per step, achieved GFLOP/s and both
ceilings, so the gap to the limit is a number.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_engine import timed_steps  # noqa: E402

from empirical.model.transformer import AssignAddTransformer  # noqa: E402
from empirical.runs.config import load_run_config  # noqa: E402
from empirical.task.assign_add.draw import TrainingSampler  # noqa: E402
from empirical.task.pairs import held_out_pairs, training_generator  # noqa: E402


def step_flops(cfg) -> int:
    """Matrix-product FLOPs of one forward + backward of the training loss on one batch."""
    model = AssignAddTransformer(cfg.built_model_config())
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device="cpu")
    batch = sampler.sample(cfg.train.batch_size, training_generator(cfg.seed, "cpu"))
    counter = FlopCounterMode(display=False)
    with counter:
        loss = F.cross_entropy(model.forward_fast(batch.tokens), batch.labels)
        loss.backward()
    return int(counter.get_total_flops())


def matmul_gflops(m: int, k: int, n: int, seconds: float = 1.0) -> float:
    """Sustained GFLOP/s of an [m, k] x [k, n] float32 product on this process's threads."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        reps += 1
    return 2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides")
    ap.add_argument("--config", default=str(ROOT / "configs" / "authors.toml"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = load_run_config(args.config, [*args.overrides, "train.device=cpu"])
    flops = step_flops(cfg)
    timed = timed_steps([cfg], torch.device("cpu"), args.warmup, args.steps)
    seconds = timed["seconds"] / args.steps
    mc = cfg.built_model_config()
    ceiling = matmul_gflops(1024, 1024, 1024)
    own = matmul_gflops(cfg.train.batch_size, mc.d_model, mc.d_mlp)
    achieved = flops / seconds / 1e9
    print(
        f"config {Path(args.config).name}, batch {cfg.train.batch_size}, {args.threads} thread(s)"
    )
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| matmul FLOPs per step (forward + backward) | {flops / 1e6:.0f} M |")
    print(f"| step time (sampler, forward, backward, AdamW) | {1e3 * seconds:.2f} ms |")
    print(f"| achieved | {achieved:.1f} GFLOP/s |")
    print(f"| machine: 1024^3 float32 matmul | {ceiling:.1f} GFLOP/s |")
    print(
        f"| machine: the MLP's [{cfg.train.batch_size}x{mc.d_model}]x[{mc.d_model}x{mc.d_mlp}]"
        f" | {own:.1f} GFLOP/s |"
    )
    print(f"| fraction of the 1024^3 ceiling | {achieved / ceiling:.0%} |")
    print(f"| step time at the ceiling | {1e3 * flops / ceiling / 1e9:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
