"""The training's evaluations, snapshots and checkpoints in a writer process beside the step
loop (train_run(writer_process=True), empirical/train/writer.py) against in the loop, with
and without a second process of busy single-thread work beside it (what reproduce's
background stages are), fresh runs alternating.

    python benchmarks/bench_writer.py [--steps 3000] [--repeats 2]

Prints the wall time of each trial: in the loop on 1 thread, in the loop on every core (what
reproduce does once its background is done), and with the writer process on 1 thread.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from empirical.allocator import retain_freed_memory  # noqa: E402
from empirical.run_config import load_run_config  # noqa: E402
from empirical.train.loop import train_run  # noqa: E402

CONFIG = ROOT / "configs" / "authors.toml"


def busy() -> None:
    """Training steps of the authors' config on 1 thread, forever (the work beside)."""
    from bench_threads import stream_of

    from empirical.train.engine import SingleLearner

    torch.set_num_threads(1)
    cfg = load_run_config(CONFIG, ["train.device=cpu"])
    learner, stream = SingleLearner(cfg, torch.device("cpu")), stream_of(cfg)
    batches = [stream.next() for _ in range(20)]
    i = 0
    while True:
        b = batches[i % 20]
        learner.train_step(b.tokens[None], b.labels[None], [True], i)
        i += 1


def trial(steps: int, threads: int, writer: bool, root: Path) -> float:
    cfg = load_run_config(CONFIG, [f"train.steps={steps}", "train.device=cpu",
                                   f"train.threads={threads}"])  # fmt: skip
    out = root / "run"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    train_run(cfg, out, progress=False, writer_process=writer)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    retain_freed_memory()
    cores = multiprocessing.cpu_count()
    modes = [("in the loop", 1, False), (f"in the loop, {cores} threads", cores, False),
             ("writer process", 1, True)]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for beside in (False, True):
            worker = None
            if beside:
                worker = multiprocessing.get_context("spawn").Process(target=busy, daemon=True)
                worker.start()
                time.sleep(3)
            try:
                for _ in range(args.repeats):
                    for name, threads, writer in modes:
                        if beside and threads > 1:
                            continue  # (reproduce widens only once its background is done)
                        s = trial(args.steps, threads, writer, Path(tmp))
                        where = "beside busy work" if beside else "alone"
                        print(f"{where:17} {name:22} {s:6.1f} s", flush=True)
            finally:
                if worker is not None:
                    worker.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
