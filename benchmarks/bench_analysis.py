"""Speed of the analysis on a random-weight model of the default size, or on a real run.

    python benchmarks/bench_analysis.py [--snapshots 81] [--threads 1 2] [--reps 5] [--full]
    python benchmarks/bench_analysis.py --run runs/authors [--threads 1]

With --run: the whole `python -m empirical analyze RUN_DIR` (every snapshot, ours and the
authors' measures, the spike comparisons, every figure) on that run, written to a temporary
directory (the run is not touched), with the time of each part and per snapshot.

Times (medians over --reps) the seven progress measures plus the second-spike scores of one
snapshot (what `analyze` does per snapshot), the Section-5 analyses of one model, and with
--full the whole `python -m empirical analyze` path (all figures) on a fake run directory of
--snapshots random-weight snapshots of the default config (p = 97, K = 5, d_model = 128,
d_mlp = 512; one snapshot every 250 steps over 20 000 steps gives 81). Prints a table and a
markdown row for docs/analysis.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from empirical.analysis.common import torch_threads
from empirical.analysis.model_analysis import analyze_model
from empirical.analysis.probe_data import make_probe_data
from empirical.analysis.progress import progress_measures
from empirical.analysis.run_analysis import analyze_run
from empirical.config.io import config_to_toml
from empirical.model.checkpoint import save_model
from empirical.model.device import cpu_model
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import RunConfig


def median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fake_run(root: Path, cfg: RunConfig, n_snapshots: int, every: int) -> Path:
    """A run directory with random-weight snapshots and a plausible metrics log."""
    run = root / "run"
    (run / "snapshots").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "config.toml").write_text(config_to_toml(cfg))
    model = None
    lines = []
    for i in range(n_snapshots):
        step = i * every
        model = AssignAddTransformer(cfg.built_model_config(), seed=i)
        save_model(model, run / "snapshots" / f"step_{step:06d}.pt", {"step": step})
        frac = i / max(n_snapshots - 1, 1)
        acc = {"0var/ind": min(1.0, 2 * frac), "1var/ind": frac, "2var/ind": frac**2}
        acc |= {"1var/var": frac**3, "2var/var": frac**4}
        lines.append(json.dumps({"step": step, "train_loss": 1.0, "acc": acc, "loss": {}}))
    save_model(model, run / "checkpoints" / "last.pt", {"step": (n_snapshots - 1) * every})
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run


def bench_run(run: str, threads: int) -> int:
    """The whole analyze command on a real run, into a temporary directory."""
    from empirical.report.figures import use_cli_backend

    use_cli_backend()
    cpu = cpu_model()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = analyze_run(run, out_dir=tmp, threads=threads)
        total = time.perf_counter() - t0
    dyn = result["training_dynamics"] or {"steps": [], "seconds": 0.0}
    n = len(dyn["steps"])
    section5 = sum(result["model"]["timings_s"].values())
    per_snap = dyn["seconds"] / max(n, 1)
    print(
        f"{run}: {n} snapshots; full analyze {total:.1f} s ({threads} thread(s)): progress "
        f"measures (ours + authors') {dyn['seconds']:.1f} s = {1000 * per_snap:.0f} ms / "
        f"snapshot, Section-5 analyses {section5:.1f} s, the rest (spike comparisons, "
        f"{len(result.get('figures', []))} figures, files) "
        f"{total - dyn['seconds'] - section5:.1f} s; load average {load:.1f}"
    )
    print()
    print(
        "| run | snapshots | machine | threads | load avg | measures / snapshot (ms) | "
        "all snapshots (s) | full analyze (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {run} | {n} | {cpu}, {os.cpu_count()} cores, torch {torch.__version__} | "
        f"{threads} | {load:.1f} | {1000 * per_snap:.0f} | {dyn['seconds']:.1f} | {total:.1f} |"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=81)
    ap.add_argument("--every", type=int, default=250, help="steps between snapshots")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="also time the whole analyze command")
    ap.add_argument("--run", help="time the whole analyze command on this real run directory")
    args = ap.parse_args(argv)
    if args.run:
        return bench_run(args.run, args.threads[0])

    cfg = RunConfig()
    task = cfg.task
    model = AssignAddTransformer(cfg.built_model_config(), seed=0)
    t0 = time.perf_counter()
    data = make_probe_data(task, seed=0)
    t_data = time.perf_counter() - t0
    progress_measures(model, data)  # warm-up (imports, first optimizer)
    cpu = cpu_model()
    print(
        f"CPU {cpu}, torch {torch.__version__}, probe data built in {t_data:.2f} s "
        f"({len(data.test)} + {len(data.train)} + {len(data.second)} sequences)"
    )
    rows = []
    for threads in args.threads:
        with torch_threads(threads):
            per_snap = median_time(
                lambda: progress_measures(model, data, with_second_spike=True), args.reps
            )
            section5 = median_time(lambda: analyze_model(model, task, data), max(1, args.reps // 2))
        rows.append((threads, per_snap, section5))
        print(
            f"threads {threads}: progress measures {1000 * per_snap:.0f} ms / snapshot "
            f"(x{args.snapshots} = {per_snap * args.snapshots:.1f} s), "
            f"Section-5 analyses {section5:.2f} s"
        )
    best = min(rows, key=lambda r: r[1])
    full = None
    if args.full:
        with tempfile.TemporaryDirectory() as tmp:
            run = fake_run(Path(tmp), cfg, args.snapshots, args.every)
            t0 = time.perf_counter()
            analyze_run(run, threads=best[0])
            full = time.perf_counter() - t0
        print(
            f"full analyze ({args.snapshots} snapshots, all figures, {best[0]} thread(s)): "
            f"{full:.1f} s"
        )
    print()
    print(
        "| machine | threads | progress measures / snapshot (ms) | "
        f"x {args.snapshots} snapshots (s) | Section-5 analyses (s) | full analyze (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for threads, per_snap, section5 in rows:
        shown = f"{full:.1f}" if full is not None and threads == best[0] else "-"
        print(
            f"| {cpu}, {os.cpu_count()} cores, torch {torch.__version__} | {threads} | "
            f"{1000 * per_snap:.0f} | {per_snap * args.snapshots:.1f} | {section5:.2f} | "
            f"{shown} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
