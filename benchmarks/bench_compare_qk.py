"""`python -m empirical compare-qk` on a run, timed: per snapshot, the one-step test, the files.

    python benchmarks/bench_compare_qk.py [RUN_DIR] [--steps 4801,5301] [--every N]
        [--no-one-step] [--one-step-at STEP] [--threads 1] [--out DIR] [--no-figures]

Default RUN_DIR: runs/authors (the paper authors' run: 112 snapshots, p = 59, K = 12; target:
all of them plus the one-step test in under 10 minutes on 2 CPU cores). Prints seconds of
wall clock and of this process's CPU (the difference is what other processes on the machine
took), the load average, and the time per snapshot. Output goes to a temporary folder unless
--out is given (never RUN_DIR/compare_qk).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from empirical.model.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", default=str(ROOT / "runs" / "authors"))
    ap.add_argument("--steps", type=_ints, help="snapshot steps (default: all)")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--no-one-step", action="store_true")
    ap.add_argument("--one-step-at", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="output directory (default: a temporary one)")
    ap.add_argument("--no-figures", action="store_true")
    args = ap.parse_args()

    from empirical.report.figures import use_cli_backend

    use_cli_backend()
    torch.set_num_threads(args.threads)
    from empirical.bridge.compare_qk.options import Options
    from empirical.bridge.compare_qk.outputs import report
    from empirical.bridge.compare_qk.run_comparison import compare_run
    from empirical.report.writer import write_report

    opts = Options(
        steps=args.steps, every=args.every, one_step=not args.no_one_step,
        one_step_at=args.one_step_at, progress=False,
    )  # fmt: skip
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "compare_qk"
        t, c = time.perf_counter(), time.process_time()
        result = compare_run(args.run_dir, opts)
        t_run, c_run = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        write_report(report(result), out, figures=not args.no_figures)
        t_out, c_out = time.perf_counter() - t, time.process_time() - c
    n = len(result["steps"])
    one = result.get("one_step") or {}
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = cpu_model()
    print(
        f"# {cpu}, {os.cpu_count()} cores, load average {load0:.1f} -> {load1:.1f}, torch "
        f"{torch.__version__}, {args.threads} thread(s); seconds wall clock (CPU time of this "
        "process)"
    )
    print(
        f"compare_run: {n} snapshots of {args.run_dir} (p={result['task']['p']}, "
        f"K={result['task']['K']}, G1: {result['prediction']}) in {t_run:.1f} s ({c_run:.1f} s "
        f"CPU); {(t_run - one.get('elapsed_one_step_s', 0.0)) / max(n, 1):.2f} s per snapshot"
    )
    if "elapsed_one_step_s" in one:
        print(
            f"  of which the one-step test at step {one['step']}: {one['elapsed_one_step_s']:.1f} s"
        )
    print(
        f"write_report (JSON, blocks.npz, summary.md, figures): {t_out:.1f} s ({c_out:.1f} s CPU)"
    )
    print(f"total: {t_run + t_out:.1f} s wall clock ({(t_run + t_out) / 60:.1f} min)")


if __name__ == "__main__":
    main()
