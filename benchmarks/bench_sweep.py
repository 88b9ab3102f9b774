"""Throughput of batched multi-model training (empirical.sweep) against sequential runs.

    python benchmarks/bench_sweep.py                       # N = 8, configs/paper.toml, CPU
    python benchmarks/bench_sweep.py --n 32 --device cuda  # the GPU comparison
    python benchmarks/bench_sweep.py --n 8 task.p=31 model.d_model=64 model.d_mlp=256 \\
        train.batch_size=256                               # the CPU sweep configs' model

Times the training step of train_run and of train_batch (sample each member's batch, fast
forward, cross-entropy, backward, AdamW step; no evaluation or checkpoints, which cost the
same per member either way): N members as one BatchedModel, against the same N configs
trained one after the other as single models. Batches are drawn train.sample_chunk steps at
a time (override it: train.sample_chunk=10 on a GPU). Members differ in seed and
task.held_out_fraction, as in a pair-fraction sweep. Reports member-steps per second.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def member_configs(base, n: int):
    fractions = [round(0.1 + 0.5 * i / max(n - 1, 1), 6) for i in range(n)]
    return [
        dataclasses.replace(
            base, seed=i, task=dataclasses.replace(base.task, held_out_fraction=fractions[i])
        )
        for i in range(n)
    ]


def bench_sequential(cfgs, device, warmup: int, steps: int) -> float:
    from empirical.model import AssignAddTransformer
    from empirical.task import TrainingSampler, held_out_pairs
    from empirical.task.pairs import training_generator
    from empirical.train.batches import BatchStream

    total = 0.0
    for cfg in cfgs:
        tc = cfg.train
        model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed).to(device)
        opt = torch.optim.AdamW(
            model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas
        )
        sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device=device)
        stream = BatchStream(
            sampler, training_generator(cfg.seed, device), tc.batch_size, tc.sample_chunk
        )
        for i in range(warmup + steps):
            if i == warmup:
                sync(device)
                t0 = time.perf_counter()
            batch = stream.next()
            loss = F.cross_entropy(model.forward_fast(batch.tokens).float(), batch.labels)
            assert torch.isfinite(loss)  # train_run's per-step check (a sync, as there)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sync(device)
        total += time.perf_counter() - t0
    return len(cfgs) * steps / total


def bench_batched(cfgs, device, warmup: int, steps: int) -> float:
    from empirical.sweep.batched import BatchedModel
    from empirical.task import TrainingSampler, held_out_pairs
    from empirical.task.pairs import training_generator
    from empirical.train.batches import BatchStream

    tc = cfgs[0].train
    M = len(cfgs)
    model = BatchedModel(cfgs[0].built_model_config(), [c.seed for c in cfgs], device=device)
    opt = torch.optim.AdamW(model.params(), lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas)
    samplers = [
        TrainingSampler(c.task, held_out_pairs(c.task, c.seed), device=device) for c in cfgs
    ]
    streams = [
        BatchStream(s, training_generator(c.seed, device), tc.batch_size, tc.sample_chunk)
        for s, c in zip(samplers, cfgs, strict=True)
    ]
    for i in range(warmup + steps):
        if i == warmup:
            sync(device)
            t0 = time.perf_counter()
        batches = [stream.next() for stream in streams]
        logits = model.forward_fast(torch.stack([b.tokens for b in batches]))
        losses = torch.stack(
            [F.cross_entropy(logits[m].float(), batches[m].labels) for m in range(M)]
        )
        assert bool(torch.isfinite(losses).all())
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
    sync(device)
    return M * steps / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides, e.g. task.p=31")
    ap.add_argument("--config", default=str(ROOT / "configs" / "paper.toml"))
    ap.add_argument("--n", type=int, nargs="+", default=[8], help="members (one or more N)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per member")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: default)")
    ap.add_argument("--repeats", type=int, default=2, help="alternate the two modes this often")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from empirical.run_config import load_run_config
    from empirical.train.loop import resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    base = load_run_config(args.config, args.overrides)
    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"device {device} ({name}), torch {torch.__version__}, threads "
        f"{torch.get_num_threads()}; p={base.task.p} K={base.task.K} "
        f"d_model={base.model.d_model} d_mlp={base.model.d_mlp} "
        f"batch={base.train.batch_size} dtype={base.model.dtype}"
    )
    for n in args.n:
        cfgs = member_configs(base, n)
        seq, bat = [], []
        for _ in range(args.repeats):
            seq.append(bench_sequential(cfgs, device, args.warmup, args.steps))
            bat.append(bench_batched(cfgs, device, args.warmup, args.steps))
        s, b = max(seq), max(bat)
        print(
            f"N={n:>3}: sequential {s:8.1f} member-steps/s ({s / n:7.2f} steps/s per run), "
            f"batched {b:8.1f} member-steps/s ({b / n:7.2f} batch steps/s); "
            f"speed-up x{b / s:.2f}  [best of {args.repeats}: seq "
            + ", ".join(f"{v:.1f}" for v in seq)
            + "; batched "
            + ", ".join(f"{v:.1f}" for v in bat)
            + "]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
