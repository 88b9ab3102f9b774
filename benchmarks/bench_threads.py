"""The training step on several torch thread counts, alternating in one process, and whether
the counts give the same weights bit for bit.

    python benchmarks/bench_threads.py [--config configs/authors.toml] [--threads 1 2]
        [--repeats 12] [--steps 40]

Times the engine's step (empirical.train.learners.SingleLearner: sampler, forward, backward,
AdamW) in blocks of `--steps` steps, switching the thread count between blocks `--repeats`
times (so that a machine's slow spells fall on every count), and prints the median and the
minimum ms a step per count. Then trains a fresh model of the config for 20 steps on each count
from the same batches and says whether the weights are equal bit for bit (what lets
`reproduce` widen its training to every core at a wall-clock-dependent step).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from empirical.runs.config import load_run_config  # noqa: E402
from empirical.task.assign_add.draw import TrainingSampler  # noqa: E402
from empirical.task.pairs import held_out_pairs, training_generator  # noqa: E402
from empirical.train.batches import BatchStream  # noqa: E402
from empirical.train.learners import SingleLearner  # noqa: E402


def stream_of(cfg) -> BatchStream:
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device="cpu")
    return BatchStream(sampler, training_generator(cfg.seed, "cpu"), cfg.train.batch_size)


def weights_after(cfg, batches, threads: int) -> dict:
    torch.set_num_threads(threads)
    learner = SingleLearner(cfg, torch.device("cpu"))
    for i, b in enumerate(batches):
        learner.train_step(b.tokens[None], b.labels[None], [True], i)
    return {k: v.clone() for k, v in learner.model.state_dict().items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides")
    ap.add_argument("--config", default=str(ROOT / "configs" / "authors.toml"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args(argv)
    if min(args.threads) < 1 or args.repeats < 1 or args.steps < 1:
        raise SystemExit("--threads, --repeats and --steps must be >= 1")
    cfg = load_run_config(args.config, [*args.overrides, "train.device=cpu"])
    learner = SingleLearner(cfg, torch.device("cpu"))
    stream = stream_of(cfg)
    times: dict[int, list[float]] = {n: [] for n in args.threads}
    step = 0
    for _ in range(args.repeats):
        for n in args.threads:
            torch.set_num_threads(n)
            t0 = time.perf_counter()
            for _ in range(args.steps):
                b = stream.next()
                learner.train_step(b.tokens[None], b.labels[None], [True], step)
                step += 1
            times[n].append((time.perf_counter() - t0) / args.steps * 1e3)
    stream = stream_of(cfg)
    batches = [stream.next() for _ in range(20)]
    reference = weights_after(cfg, batches, args.threads[0])
    same = all(
        all(torch.equal(reference[k], w[k]) for k in reference)
        for w in (weights_after(cfg, batches, n) for n in args.threads[1:])
    )
    print(f"config {Path(args.config).name}, batch {cfg.train.batch_size}, {args.repeats} x "
          f"{args.steps} steps per count, alternating")  # fmt: skip
    print("| threads | median ms / step | min ms / step |")
    print("| --- | --- | --- |")
    for n, values in times.items():
        values = sorted(values)
        print(f"| {n} | {values[len(values) // 2]:.2f} | {values[0]:.2f} |")
    print("weights after 20 steps: " + ("equal bit for bit" if same else "DIFFER") + " on "
          + ", ".join(map(str, args.threads)) + " threads")  # fmt: skip
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
