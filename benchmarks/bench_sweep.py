"""Throughput of batched multi-model training (empirical.experiments.sweep) against sequential runs.

    python benchmarks/bench_sweep.py                       # N = 8, configs/paper.toml, CPU
    python benchmarks/bench_sweep.py --n 32 --device cuda  # the GPU comparison
    python benchmarks/bench_sweep.py --n 8 task.p=31 model.d_model=64 model.d_mlp=256 \\
        train.batch_size=256                               # the CPU sweep configs' model

    python benchmarks/bench_sweep.py --n 8 --local-jobs 2   # + N members as 2 local jobs

Times the training step of train_run and of train_batch, through the engine's own learners
(benchmarks/bench_engine.py's timed_steps: sample each member's batch, fast forward,
cross-entropy, backward, AdamW step; no evaluation or checkpoints, which cost the same per
member either way): N members as one BatchLearner, against the same N configs trained one
after the other as SingleLearners. Batches are drawn train.sample_chunk steps at
a time (override it: train.sample_chunk=10 on a GPU). Members differ in seed and
task.held_out_fraction, as in a pair-fraction sweep. Reports member-steps per second.

--local-jobs J adds the local-executor mode (empirical.experiments.sweep.cluster, submitit): the N
members split into J batched models, each timed in its own process, all at once (J jobs of
`sweep --executor local --members-per-job N/J`); its rate is the N x steps member-steps over
the span from the first job's timed start to the last job's end (process start-up and
imports excluded: they are paid once per job). Ends with a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

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
    """The configs trained one after the other as single runs (the engine's SingleLearner)."""
    from bench_engine import timed_steps

    total = sum(timed_steps([cfg], device, warmup, steps)["seconds"] for cfg in cfgs)
    return len(cfgs) * steps / total


def bench_batched(
    cfgs, device, warmup: int, steps: int, stamps: list | None = None, barrier=None
) -> float:
    """The configs as one batched model (the engine's BatchLearner). stamps: receives the
    timed region's wall-clock window (for concurrent jobs); barrier: see timed_steps."""
    from bench_engine import timed_steps

    timed = timed_steps(cfgs, device, warmup, steps, barrier)
    if stamps is not None:
        stamps.append(timed["window"])
    return len(cfgs) * steps / timed["seconds"]


def bench_job(
    cfg_dicts: list[dict], device_name: str, warmup: int, steps: int, threads: int, sync_dir: str
):
    """One local-executor job: its members as one batched model; returns (members, timed
    wall-clock window). The jobs start their timed steps together (a file barrier in
    sync_dir). Module-level: submitit pickles it by reference."""
    import uuid

    from empirical.config.io import from_dict
    from empirical.runs.config import RunConfig
    from empirical.train.loop import resolve_device

    if threads:
        torch.set_num_threads(threads)
    cfgs = [from_dict(RunConfig, d) for d in cfg_dicts]
    stamps: list = []
    folder = Path(sync_dir)
    jobs = int((folder / "jobs").read_text())

    def barrier() -> None:
        (folder / f"ready-{uuid.uuid4().hex}").touch()
        deadline = time.time() + 600
        while len(list(folder.glob("ready-*"))) < jobs and time.time() < deadline:
            time.sleep(0.01)

    bench_batched(cfgs, resolve_device(device_name), warmup, steps, stamps, barrier)
    return len(cfgs), stamps[0]


def bench_local_jobs(cfgs, device_name: str, jobs: int, warmup: int, steps: int, threads: int):
    """N members as `jobs` concurrent local-executor jobs: aggregate member-steps/s."""
    import os
    import tempfile

    from empirical.config.io import to_dict
    from empirical.experiments.sweep.options import require_submitit

    submitit = require_submitit()
    here = str(Path(__file__).resolve().parent)  # the jobs import this module by name
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    import bench_sweep as me  # this file under its module name (not __main__)

    size = -(-len(cfgs) // jobs)
    parts = [cfgs[i : i + size] for i in range(0, len(cfgs), size)]
    with tempfile.TemporaryDirectory() as folder:
        sync_dir = Path(folder) / "sync"
        sync_dir.mkdir()
        (sync_dir / "jobs").write_text(str(len(parts)))
        executor = submitit.LocalExecutor(folder=folder)
        gpus = torch.cuda.device_count() if device_name != "cpu" else 0
        executor.update_parameters(timeout_min=60, gpus_per_node=gpus)
        with executor.batch():
            handles = [
                executor.submit(
                    me.bench_job,
                    [to_dict(c) for c in part],
                    device_name,
                    warmup,
                    steps,
                    threads,
                    str(sync_dir),
                )
                for part in parts
            ]
        results = [h.result() for h in handles]
    start = min(w[0] for _, w in results)
    end = max(w[1] for _, w in results)
    return sum(n for n, _ in results) * steps / (end - start)


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
    ap.add_argument(
        "--local-jobs",
        type=int,
        nargs="*",
        default=[],
        metavar="J",
        help="also time the N members as J concurrent local-executor jobs (needs submitit)",
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from empirical.runs.config import load_run_config
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
    table = []
    for n in args.n:
        cfgs = member_configs(base, n)
        seq, bat = [], []
        local: dict[int, list[float]] = {j: [] for j in args.local_jobs}
        for _ in range(args.repeats):
            seq.append(bench_sequential(cfgs, device, args.warmup, args.steps))
            bat.append(bench_batched(cfgs, device, args.warmup, args.steps))
            for j in args.local_jobs:
                local[j].append(
                    bench_local_jobs(cfgs, str(device), j, args.warmup, args.steps, args.threads)
                )
        s, b = max(seq), max(bat)
        table.append((n, "sequential (single runs)", s, s))
        table.append((n, "batched (one process)", b, s))
        for j, rates in local.items():
            table.append((n, f"local executor, {j} jobs of {-(-n // j)}", max(rates), s))
            print(
                f"N={n:>3}: {j} local jobs {max(rates):8.1f} member-steps/s (best of "
                f"{args.repeats}: " + ", ".join(f"{v:.1f}" for v in rates) + ")"
            )
        print(
            f"N={n:>3}: sequential {s:8.1f} member-steps/s ({s / n:7.2f} steps/s per run), "
            f"batched {b:8.1f} member-steps/s ({b / n:7.2f} batch steps/s); "
            f"speed-up x{b / s:.2f}  [best of {args.repeats}: seq "
            + ", ".join(f"{v:.1f}" for v in seq)
            + "; batched "
            + ", ".join(f"{v:.1f}" for v in bat)
            + "]"
        )
    print("\n| N | mode | member-steps/s | vs sequential |\n| --- | --- | --- | --- |")
    for n, mode, rate, seq_rate in table:
        print(f"| {n} | {mode} | {rate:.1f} | x{rate / seq_rate:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
