"""Training-batch generation: the vectorized sampler against a plain per-row Python loop.

    python benchmarks/bench_task.py [--batch 512] [--reps 300] [--device cpu]

Both draw from the same distribution (docs/task.md); the reference is an honest per-row
implementation (Python `random`, precomputed allowed-pair list, one tensor at the end).
Prints a markdown table row for the README. Target: <= 2 ms per 512-row batch on 2 CPU
cores and >= 20x the per-row loop. Then the time to build the largest evaluation set,
configs/authors.toml's `fig3/2var_union` (193 580 rows; docs/task.md, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time
from pathlib import Path

import torch

from empirical.runs.config import load_run_config
from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.config import TaskConfig, task_config
from empirical.task.eval_sets import build_eval_set
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.registry import family_of

AUTHORS = Path(__file__).resolve().parents[1] / "configs" / "authors.toml"


class PerRowReference:
    """The same distribution, one sequence at a time."""

    def __init__(self, cfg: TaskConfig, held: torch.Tensor, seed: int = 0):
        self.cfg = cfg
        self.rng = random.Random(seed)
        hs = {tuple(r) for r in held.tolist()}
        p = cfg.p
        self.pairs = [
            (x, y) for x in range(p) for y in range(p) if (min(x, y), max(x, y)) not in hs
        ]
        self.diag = [x for x in range(p) if (x, x) not in hs]
        self.a13, self.a14 = cfg.allowed_vars(0), cfg.allowed_vars(1)
        self.combos = [c for c in cfg.training_2var_combos() if c[0] != c[1] or self.diag]
        self.vocab = family_of(cfg).vocabulary(cfg)

    def row(self):
        cfg, rng, v = self.cfg, self.rng, self.vocab
        u = rng.random()
        if u < cfg.frac_0var:
            v1 = v2 = -1
        elif u < cfg.frac_0var + cfg.frac_1var:
            if rng.random() < 0.5:
                v1, v2 = rng.choice(self.a13), -1
            else:
                v1, v2 = -1, rng.choice(self.a14)
        else:
            v1, v2 = rng.choice(self.combos)
        if v1 >= 0 and v1 == v2:
            x = y = rng.choice(self.diag)
        else:
            x, y = rng.choice(self.pairs)
        ops = [w for w in dict.fromkeys((v1, v2)) if w >= 0]
        n = rng.randint(max(cfg.min_assignments, len(ops)), cfg.max_assignments)
        others = [w for w in range(cfg.K) if w not in ops]
        assigned = ops + rng.sample(others, n - len(ops))
        rng.shuffle(assigned)
        values = {w: rng.randrange(cfg.p) for w in assigned}
        if v1 >= 0:
            values[v1] = x
        if v2 >= 0:
            values[v2] = y
        slots = sorted(rng.sample(range(cfg.region - n), n))
        tokens = [v.pad] * cfg.L
        for j, (s, w) in enumerate(zip(slots, assigned, strict=True)):
            tokens[s + j] = cfg.p + w
            tokens[s + j + 1] = values[w]
        tokens[cfg.L - 4] = v.plus
        tokens[cfg.L - 3] = cfg.p + v1 if v1 >= 0 else x
        tokens[cfg.L - 2] = cfg.p + v2 if v2 >= 0 else y
        tokens[cfg.L - 1] = v.eq
        return tokens, (x + y) % cfg.p

    def batch(self, n: int):
        rows = [self.row() for _ in range(n)]
        return torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])


def times_ms(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = task_config()
    held = held_out_pairs(cfg, 0)
    device = torch.device(args.device)
    sampler = TrainingSampler(cfg, held, device)
    gen = training_generator(0, device)
    ref = PerRowReference(cfg, held)

    # sanity: both produce correct sequences with the same mix
    vocab = family_of(cfg).vocabulary(cfg)
    tok, lab = ref.batch(2000)
    assert all(vocab.label(t) == y for t, y in zip(tok[:300], lab[:300].tolist(), strict=True))
    fast = sampler.sample(20_000, gen)
    ref_tok, _ = ref.batch(20_000)
    for name, t in (("vectorized", fast.tokens.cpu()), ("per-row", ref_tok)):
        nv = (t[:, cfg.L - 3] >= cfg.p).long() + (t[:, cfg.L - 2] >= cfg.p).long()
        shares = [round((nv == k).float().mean().item(), 3) for k in range(3)]
        print(f"# {name}: 0/1/2-var shares {shares}")

    def fast_batch():
        sampler.sample(args.batch, gen)
        if device.type == "cuda":
            torch.cuda.synchronize()

    # interleaved rounds, so that a busy machine slows both sides alike; medians over all
    for _ in range(20):
        fast_batch()
    fast, slow = [], []
    rounds = 5
    for _ in range(rounds):
        fast += times_ms(fast_batch, max(1, args.reps // rounds))
        slow += times_ms(lambda: ref.batch(args.batch), max(2, args.reps // (20 * rounds)))
    fast_ms, ref_ms = statistics.median(fast), statistics.median(slow)
    threads = torch.get_num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    print(f"# torch {torch.__version__}, {threads} threads, {os.cpu_count()} cpus, load {load:.1f}")
    print("| batch | device | vectorized (ms) | per-row loop (ms) | speedup |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {args.batch} | {device.type} | {fast_ms:.2f} | {ref_ms:.1f} | {ref_ms / fast_ms:.0f}x |"
    )
    authors = load_run_config(AUTHORS).task
    built = []  # each build's set: its size is read from the last, not from a fourth build
    builds = times_ms(lambda: built.append(build_eval_set(authors, 0, "fig3/2var_union")[0]), 3)
    rows = len(built[-1])
    print(f"\nbuilding configs/authors.toml's fig3/2var_union ({rows} rows): median "
          f"{statistics.median(builds) / 1e3:.2f} s [{min(builds) / 1e3:.2f}, "
          f"{max(builds) / 1e3:.2f}] over 3 builds")  # fmt: skip


if __name__ == "__main__":
    main()
