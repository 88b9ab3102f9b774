"""The training engine's step, as `train`, `sweep` and `grid` run it, on one device.

    python benchmarks/bench_engine.py [--config configs/paper.toml] [--members 1 32]
        [--compile none default reduce-overhead] [--autocast none bf16] [--steps 200]
        [--cuda-graph on off] [--reference auto|off] [--reference-steps 20]

For every (members, compile mode, autocast, CUDA graph on/off: train.cuda_graph, which only
acts on CUDA with compile none; where it does not act, "on" is timed as "off", once, and a
line says so) it builds the real learner
(empirical.train.learners.SingleLearner for 1 member, BatchLearner for more), the members'
data streams, and times `steps` training steps after `warmup` steps (the warm-up includes
torch.compile's compilation; its time is printed separately), synchronising the device only
around the timed region, as the engine does (no host sync inside a step). Prints ms per step
and member-steps/s, and a markdown table at the end.

Then, where TransformerLens 3.x is importable (benchmarks/tl_reference.py; TransformerLens 4
has no HookedTransformer), the reference: one training step of the paper authors'
HookedTransformer (full forward, loss at the last position, AdamW) beside one step of our
SingleLearner, on the same pre-drawn batches (data sampling excluded from both), same batch
size, device and threads, alternating one step of each; after `--reference-warmup` steps of
each, the median of `--reference-steps` and the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
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
from empirical.train.cuda_graph import graph_applies  # noqa: E402
from empirical.train.engine import resolve_device  # noqa: E402
from empirical.train.learners import BatchLearner, SingleLearner  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(cfgs, device: torch.device, warmup: int, steps: int, barrier=None) -> dict:
    """Train `cfgs` (one config: a SingleLearner, several: one BatchLearner) for warmup +
    steps steps exactly as the engine does (its learner, the members' data streams, the
    device-side loss sums, no host sync inside a step) and time the last `steps`.
    barrier(): called after the warm-up, before the timed steps (concurrent jobs start
    together). Returns seconds, warm-up seconds and the timed region's wall-clock window."""
    members = len(cfgs)
    learner = SingleLearner(cfgs[0], device) if members == 1 else BatchLearner(cfgs, device)
    streams = []
    for cfg in cfgs:
        sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device=device)
        gen = training_generator(cfg.seed, device)
        streams.append(BatchStream(sampler, gen, cfg.train.batch_size, cfg.train.sample_chunk))
    alive = [True] * members
    total = torch.zeros(members, dtype=torch.float64, device=device)

    def step(i: int) -> None:
        batches = [s.next() for s in streams]
        tokens = torch.stack([b.tokens for b in batches])
        labels = torch.stack([b.labels for b in batches])
        losses = learner.train_step(tokens, labels, alive, i)
        total.add_(losses.detach().double())

    t0 = time.perf_counter()
    for i in range(warmup):
        step(i)
    sync(device)
    warm_s = time.perf_counter() - t0
    if barrier is not None:
        barrier()
    t0, wall0 = time.perf_counter(), time.time()
    for i in range(warmup, warmup + steps):
        step(i)
    sync(device)
    seconds = time.perf_counter() - t0
    if not bool(torch.isfinite(total).all()):
        raise RuntimeError("non-finite loss in the benchmark")
    return {"seconds": seconds, "warmup_s": warm_s, "window": (wall0, wall0 + seconds)}


def graph_settings(requested: list[str], applies: bool) -> list[bool]:
    """The CUDA-graph settings to time for one (members, compile, autocast): "on" only where
    the graph applies; where it does not, "on" is the same step as "off" and is timed once."""
    out: list[bool] = []
    for graph in requested:
        on = graph == "on" and applies
        if on not in out:
            out.append(on)
    return out


def shown(path: str) -> str:
    """`path` relative to the repository when inside it (printed tables name no machine)."""
    full = Path(path).resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else path


def reference_comparison(base, device: torch.device, warmup: int, steps: int) -> dict:
    """Median ms of one step of ours (SingleLearner) and of the authors' HookedTransformer
    (benchmarks/tl_reference.py) on the same batches, one step of each in turn."""
    from tl_reference import authors_step

    learner = SingleLearner(base, device)
    theirs = authors_step(base, device)
    sampler = TrainingSampler(base.task, held_out_pairs(base.task, base.seed), device=device)
    stream = BatchStream(sampler, training_generator(base.seed, device), base.train.batch_size, 1)
    batches = [stream.next() for _ in range(warmup + steps)]
    ours_ms, theirs_ms = [], []
    for i, batch in enumerate(batches):
        t0 = time.perf_counter()
        learner.train_step(batch.tokens[None], batch.labels[None], [True], i)
        sync(device)
        t1 = time.perf_counter()
        theirs(batch.tokens, batch.labels)
        sync(device)
        t2 = time.perf_counter()
        if i >= warmup:
            ours_ms.append(1000 * (t1 - t0))
            theirs_ms.append(1000 * (t2 - t1))
    ours, ref = statistics.median(ours_ms), statistics.median(theirs_ms)
    return {"ours_ms": ours, "theirs_ms": ref, "ratio": ref / ours}


def time_steps(
    base,
    members: int,
    compile_mode: str,
    autocast: str,
    warmup: int,
    steps: int,
    device: torch.device,
    cuda_graph: bool = False,
) -> dict:
    train = dataclasses.replace(
        base.train, compile=compile_mode, autocast=autocast, cuda_graph=cuda_graph
    )
    cfgs = [dataclasses.replace(base, seed=s, train=train) for s in range(members)]
    timed = timed_steps(cfgs, device, warmup, steps)
    return {
        "members": members,
        "compile": compile_mode,
        "autocast": autocast,
        "cuda_graph": "on" if cuda_graph else "off",
        "ms_per_step": 1000 * timed["seconds"] / steps,
        "member_steps_per_s": members * steps / timed["seconds"],
        "warmup_s": timed["warmup_s"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides, e.g. train.sample_chunk=10")
    ap.add_argument("--config", default=str(ROOT / "configs" / "paper.toml"))
    ap.add_argument("--members", type=int, nargs="+", default=[1])
    ap.add_argument("--compile", nargs="+", default=["none"])
    ap.add_argument("--autocast", nargs="+", default=["none"])
    ap.add_argument("--cuda-graph", nargs="+", choices=("on", "off"), default=["on"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=1, help="time each setting this often")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: default)")
    ap.add_argument(
        "--reference",
        choices=("auto", "off"),
        default="auto",
        help="time the authors' HookedTransformer step beside ours (auto: where TransformerLens "
        "3.x is importable)",
    )
    ap.add_argument("--reference-steps", type=int, default=20, help="median of this many steps")
    ap.add_argument("--reference-warmup", type=int, default=5)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    base = load_run_config(args.config, args.overrides)
    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"device {device} ({name}), torch {torch.__version__}; config {shown(args.config)}, "
        f"batch {base.train.batch_size}, sample_chunk {base.train.sample_chunk}, "
        f"{torch.get_num_threads()} thread(s)",
        flush=True,
    )
    rows = []
    settings = [
        (members, mode, autocast, graph)
        for members in args.members
        for mode in args.compile
        for autocast in args.autocast
        for graph in graph_settings(args.cuda_graph, graph_applies(device, True, mode))
    ]
    if "on" in args.cuda_graph and not all(graph_applies(device, True, m) for m in args.compile):
        print(
            "CUDA graph rows need CUDA and compile none: here the step is timed with the "
            "graph off (the engine runs it eagerly)",
            flush=True,
        )
    for members, mode, autocast, graph in settings:
        label = (
            f"M={members} compile={mode} autocast={autocast} cuda_graph={'on' if graph else 'off'}"
        )
        runs = []
        for _ in range(args.repeats):
            try:
                runs.append(
                    time_steps(
                        base, members, mode, autocast, args.warmup, args.steps, device, graph
                    )
                )
            except Exception as exc:  # a compile mode may not work on this device
                print(f"{label}: failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                break
        if not runs:
            continue
        best = min(runs, key=lambda r: r["ms_per_step"])
        best["ms_per_step_median"] = statistics.median(r["ms_per_step"] for r in runs)
        rows.append(best)
        print(
            f"{label}: {best['ms_per_step']:.2f} ms/step, {best['member_steps_per_s']:.0f} "
            f"member-steps/s (warm-up {best['warmup_s']:.1f} s)",
            flush=True,
        )
    print(
        "\n| members | compile | autocast | CUDA graph | ms / step | member-steps / s "
        "| warm-up (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['members']} | {r['compile']} | {r['autocast']} | {r['cuda_graph']} | "
            f"{r['ms_per_step']:.2f} | {r['member_steps_per_s']:.0f} | {r['warmup_s']:.1f} |"
        )
    if args.reference == "auto":
        print_reference(base, device, args)
    return 0


def print_reference(base, device: torch.device, args) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tl_reference import transformer_lens_version, unavailable

    why = unavailable()
    if why is not None:
        print(f"\nreference (the authors' HookedTransformer step): not run: {why}")
        return
    r = reference_comparison(base, device, args.reference_warmup, args.reference_steps)
    print(
        f"\nreference: one training step, batch {base.train.batch_size}, "
        f"{torch.get_num_threads()} thread(s), median of {args.reference_steps} after "
        f"{args.reference_warmup} warm-up; TransformerLens {transformer_lens_version()} "
        "HookedTransformer (full forward, loss at the last position, AdamW) vs our "
        "SingleLearner, same batches, data sampling excluded\n"
    )
    print("| step | ms / step |")
    print("| --- | --- |")
    print(f"| ours (engine, 1 member) | {r['ours_ms']:.1f} |")
    print(f"| authors' HookedTransformer | {r['theirs_ms']:.1f} |")
    print(f"| ratio (theirs / ours) | {r['ratio']:.1f}x |")


if __name__ == "__main__":
    sys.exit(main())
