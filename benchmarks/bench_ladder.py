"""`python -m empirical ladder` on one snapshot of a run, timed (issue 20's target: one snapshot
of the paper's run in <= 5 minutes on this 2-core CPU).

    python benchmarks/bench_ladder.py [RUN_DIR] [--step 5301] [--threads 1] [--out DIR]

Default RUN_DIR: runs/authors (the paper authors' run, p = 59, K = 12; the hybrid rungs have
d_model = 485). Prints seconds of wall clock and of this process's CPU (the difference is what
other processes on the machine took), the load average before and after, and the time of each
rung (from the progress lines). Prints, never asserts. Output goes to a temporary folder unless
--out is given.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import torch

from empirical.model.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", default=str(ROOT / "runs" / "authors"))
    ap.add_argument("--step", type=int, default=5301)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="output directory (default: a temporary one)")
    args = ap.parse_args()

    from empirical.report.figures import use_cli_backend

    use_cli_backend()
    torch.set_num_threads(args.threads)
    from empirical.bridge.ladder.options import LadderOptions
    from empirical.bridge.ladder.outputs import report
    from empirical.bridge.ladder.snapshot_ladder import run_ladder
    from empirical.report.writer import write_report

    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    log = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "ladder"
        t, c = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(log):
            result = run_ladder(args.run_dir, LadderOptions(step=args.step))
        t_run, c_run = time.perf_counter() - t, time.process_time() - c
        t = time.perf_counter()
        write_report(report(result), out)
        t_write = time.perf_counter() - t
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, "
        f"torch threads {args.threads}; load average {load0:.2f} before, {load1:.2f} after"
    )
    print(
        f"run: {args.run_dir} step {result['step']}, {len(result['rungs'])} rungs, "
        f"eval sets {len(result['eval_sets'])} x {result['options']['eval_size']} sequences"
    )
    print(
        f"ladder: {t_run:.1f} s wall, {c_run:.1f} s CPU of this process "
        f"(target <= 300 s wall); outputs {t_write:.1f} s"
    )
    print("progress:")
    print(log.getvalue().rstrip())


if __name__ == "__main__":
    main()
