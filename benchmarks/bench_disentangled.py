"""Benchmark: exact population gradient of the disentangled model (p = 11, K = 3, 1-var).

    python benchmarks/bench_disentangled.py [--p 11] [--K 3] [--naive 3000] [--threads 1]

Times, in one run:
1. the exact gradient over every sequence of the population (``population_gradient``:
   enumeration included, compact chunks, scores gathered from the query row r = x_T^T W);
   the peak RSS (resource.getrusage) is read right after it, before anything else runs;
2. a naive per-sequence loop (dense one-hot inputs, eq. (2) evaluated and back-propagated
   one sequence at a time) on the first ``--naive`` sequences, EXTRAPOLATED linearly to the
   whole population; its partial gradient is checked against the fast path on the same
   sequences;
and prints the ratio and a markdown row for the README.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch
import torch.nn.functional as nnf

from disentangled import Basis, SimConfig, forward, initial_W, population_gradient
from disentangled.fast import chunk_forward
from disentangled.gradient import cross_entropy_terms
from disentangled.population import clear_cache, compact_slice, population_size, to_dense


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return kb / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--p", type=int, default=11)
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--beta", type=float, default=4.0)
    ap.add_argument("--xi", type=float, default=1.0)
    ap.add_argument("--naive", type=int, default=3000, help="sequences in the naive loop")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = SimConfig(p=args.p, K=args.K, beta=args.beta)
    basis = Basis.from_config(cfg)
    N = population_size(cfg, "1var")
    # a generic W (W0 plus noise) so that no special structure of W0 helps
    gen = torch.Generator().manual_seed(0)
    W = initial_W(cfg) + 0.1 * torch.randn(basis.dim, basis.dim, generator=gen, dtype=torch.float64)

    rss0 = peak_rss_mb()
    clear_cache()
    t0 = time.perf_counter()
    G = population_gradient(W, cfg, args.xi, "1var")
    t_fast = time.perf_counter() - t0
    rss_fast = peak_rss_mb()

    # naive per-sequence loop on the first n sequences, extrapolated
    n = min(args.naive, N)
    chunk = compact_slice(cfg, "1var", 0, n)
    X = to_dense(chunk, cfg)
    Wn = W.clone().requires_grad_()
    t0 = time.perf_counter()
    for i in range(n):
        logits = forward(Wn, X[i : i + 1], args.xi, basis)
        loss = chunk.weights[i] * nnf.cross_entropy(logits, chunk.labels[i : i + 1])
        loss.backward()
    t_naive_part = time.perf_counter() - t0
    t_naive = t_naive_part * N / n
    Wf = W.clone().requires_grad_()
    _, F = chunk_forward(Wf, chunk, cfg)
    (chunk.weights * cross_entropy_terms(F, chunk.labels, args.xi)).sum().backward()
    agree = float((Wn.grad - Wf.grad).abs().max())

    print(f"config: {cfg}, 1-var population: {N} sequences, torch threads: {args.threads}")
    print(f"exact population gradient (fast path): {t_fast:.3f} s, max|G| = {G.abs().max():.3e}")
    print(f"peak RSS after it: {rss_fast:.0f} MB (at start {rss0:.0f} MB)")
    print(
        f"naive per-sequence loop: {t_naive_part:.3f} s measured on {n} sequences -> "
        f"{t_naive:.1f} s EXTRAPOLATED to all {N} ({t_naive_part / n * 1e6:.0f} us/sequence)"
    )
    print(f"max |naive - fast| gradient on those {n} sequences: {agree:.2e}")
    print(f"speed-up (naive extrapolated / fast measured): {t_naive / t_fast:.0f}x")
    print()
    print(
        "| p | K | 1-var sequences | exact gradient | peak RSS "
        "| naive loop (extrapolated) | speed-up |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {cfg.p} | {cfg.K} | {N} | {t_fast:.2f} s | {rss_fast:.0f} MB | "
        f"{t_naive:.0f} s (from {n} seq.) | {t_naive / t_fast:.0f}x |"
    )
    ok = t_fast <= 10 and rss_fast <= 2048 and agree < 1e-12
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
