"""Importing the paper authors' checkpoints and evaluating every step, on this machine.

    python benchmarks/bench_import.py [--src ../shared/authors/checkpoints]
        [--config configs/authors.toml] [--out DIR] [--threads 1] [--eval-size N]

Times (seconds, wall clock) the two commands of docs/import.md as library calls:
`import-checkpoints` of every file of SRC (112 for the authors' release: read, check, convert,
compare with a direct forward, build the evaluation sets once, write the run directory) and
`evaluate --all-steps` of the result (every snapshot on every evaluation set, then
metrics.jsonl, summary.json and training_curves.png). Target: a few minutes for both on
2 CPU cores. The run directory goes to a temporary folder unless --out is given.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from empirical.config.paths import authors_checkpoints
from empirical.model.device import cpu_model
from empirical.runs.import_run import import_checkpoints
from empirical.train.evaluate_run import evaluate_all_steps

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--src",
        default=str(authors_checkpoints()),
        help="the authors' checkpoints (default: ../shared/authors/checkpoints beside the "
        "repository, or $AUTHORS_DIR/checkpoints)",
    )
    ap.add_argument("--config", default=str(ROOT / "configs" / "authors.toml"))
    ap.add_argument("--out", help="run directory to write (default: a temporary one)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-size", type=int, help="override task.eval_size")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    overrides = [f"task.eval_size={args.eval_size}"] if args.eval_size else []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "authors"
        t, c = time.perf_counter(), time.process_time()
        result = import_checkpoints(
            args.src, args.config, out, overrides=overrides, overwrite=True, command="bench"
        )
        t_import, c_import = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        records, summary = evaluate_all_steps(out, force=False)
        t_eval, c_eval = time.perf_counter() - t, time.process_time() - c
        n_seq = sum(summary["eval_set_sizes"].values())
    cpu = cpu_model()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {cpu}, {os.cpu_count()} cores, load average {load:.1f}, torch {torch.__version__}, "
          f"{args.threads} thread(s); seconds wall clock (CPU time of this process)")  # fmt: skip
    print(
        f"import-checkpoints: {len(result.steps)} checkpoints in {t_import:.1f} s "
        f"({c_import:.1f} s CPU)"
    )
    print(
        f"evaluate --all-steps: {len(records)} snapshots x {n_seq} sequences in {t_eval:.1f} s "
        f"({c_eval:.1f} s CPU; {t_eval / len(records):.2f} s per snapshot)"
    )
    print(f"total: {t_import + t_eval:.1f} s ({c_import + c_eval:.1f} s CPU)")


if __name__ == "__main__":
    main()
