"""What keeping freed memory in the process (empirical.train.allocator.retain_freed_memory, glibc)
changes: the training step of a config (`--members N`: N seeds trained as one batched model,
as `sweep` and `grid` do) and, given a run, its compare-qk, each in fresh processes with it
on and off in turn (so that the machine's slow spells fall on both); and, for compare-qk,
what limiting the BLAS to one thread (as reproduce's background processes do: threadpoolctl)
changes: its wall time and the CPU time of all its threads.

    python benchmarks/bench_allocator.py [--config configs/authors.toml] [--steps 300]
        [--members 1] [--repeats 2] [--run RUN_DIR] [--no-blas-default]

Prints per process: wall time (ms a step, or s of compare-qk), page faults (a step, or in
all), system CPU time (compare-qk: and the user CPU time of all threads), and a hash of the
trained weights (the same with it on and off).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, ROOT)
sys.path.insert(0, ROOT + "/benchmarks")
import torch
from empirical.train.allocator import retain_freed_memory
applied = retain_freed_memory()
torch.set_num_threads(1)
what, arg, steps, blas = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
members = int(sys.argv[5])
if what == "steps":
    from bench_threads import stream_of
    from empirical.runs.config import load_run_config
    from empirical.train.learners import BatchLearner, SingleLearner
    cfgs = [load_run_config(arg, ["train.device=cpu", f"seed={m}"]) for m in range(members)]
    if members == 1:
        learner = SingleLearner(cfgs[0], torch.device("cpu"))
    else:
        learner = BatchLearner(cfgs, torch.device("cpu"))
    streams = [stream_of(cfg) for cfg in cfgs]
    batches = []
    for _ in range(steps + 20):
        drawn = [stream.next() for stream in streams]
        batches.append((torch.stack([b.tokens for b in drawn]),
                        torch.stack([b.labels for b in drawn])))
    alive = [True] * members
    for i, (tokens, labels) in enumerate(batches[:20]):
        learner.train_step(tokens, labels, alive, i)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i, (tokens, labels) in enumerate(batches[20:]):
        learner.train_step(tokens, labels, alive, i + 20)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    digest = hashlib.sha256()
    for k, v in sorted(learner.model.state_dict().items()):
        digest.update(v.detach().numpy().tobytes())
    out = {"wall": wall / steps * 1e3, "faults": (r1.ru_minflt - r0.ru_minflt) / steps,
           "sys": (r1.ru_stime - r0.ru_stime) / steps * 1e3, "hash": digest.hexdigest()[:16]}
else:
    from threadpoolctl import threadpool_limits
    from empirical.bridge.compare_qk.options import Options
    from empirical.bridge.compare_qk.run_comparison import compare_run
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with threadpool_limits(limits=blas or None, user_api="blas"):
        compare_run(arg, Options(progress=False))
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    out = {"wall": wall, "faults": r1.ru_minflt - r0.ru_minflt, "sys": r1.ru_stime - r0.ru_stime,
           "user": r1.ru_utime - r0.ru_utime}
out["applied"] = applied
print(json.dumps(out))
"""


def child(what: str, arg: str, steps: int, on: bool, blas: int = 1, members: int = 1) -> dict:
    env = dict(os.environ, ASSIGN_ADD_KEEP_FREED_MEMORY="1" if on else "0")
    code = CHILD.replace("ROOT", repr(str(ROOT)))
    proc = subprocess.run(
        [sys.executable, "-c", code, what, arg, str(steps), str(blas), str(members)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "authors.toml"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--members", type=int, default=1, help="seeds trained as one batched model")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--run", help="a run directory whose compare-qk is timed too")
    ap.add_argument("--no-steps", action="store_true", help="time compare-qk only")
    ap.add_argument(
        "--no-blas-default", action="store_true", help="compare-qk on one BLAS thread only"
    )
    args = ap.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or args.members < 1:
        raise SystemExit("--steps, --members and --repeats must be >= 1")
    jobs = []
    if not args.no_steps:
        step = ("ms a step", "faults a step", "ms of system time a step")
        jobs.append(("steps", args.config, *step))
    if args.run:
        jobs.append(("compare", args.run, "s of compare-qk", "faults", "s of system time"))
    for what, arg, wall, faults, sys_ in jobs:
        # (freed memory kept, BLAS threads: 1, or 0 = the library's default, a thread a core)
        variants = [(True, 1), (False, 1)]
        if what == "compare" and not args.no_blas_default:
            variants.append((True, 0))
        for r in range(args.repeats):
            for on, blas in variants if r % 2 == 0 else variants[::-1]:
                out = child(what, arg, args.steps, on, blas, args.members)
                label = "kept" if out["applied"] else "glibc default"
                if what == "compare":
                    label += f", BLAS {blas or 'default'}"
                print(
                    f"{what:8s} {label:24s} {out['wall']:8.2f} {wall}, {out['faults']:9.1f} "
                    f"{faults}, {out['sys']:6.2f} {sys_}"
                    + (f", {out['user']:6.1f} s of user time" if "user" in out else "")
                    + (f", weights {out['hash']}" if "hash" in out else ""),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
