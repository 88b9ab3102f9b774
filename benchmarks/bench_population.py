"""Throughput of a population's training as `grid` and `claims` train it: N members (seeds
0..N-1) of one variant of a population config as one batched model (empirical.experiments.sweep's
train_batch), with the config's evaluations, snapshots and checkpoints, in member-steps/s.

    python benchmarks/bench_population.py --n 8 --steps 200            # a CPU row
    python benchmarks/bench_population.py --n 64 --steps 2000 --device cuda \\
        train.sample_chunk=100                                          # the GPU's (issue #35)

Default config: configs/population_authors.toml, variant `ours` (the authors' model, p = 59,
K = 12, batch 512; an evaluation of 12 sets every 100 steps on 1 000 sequences each, all
10 000 every 1 000 steps and at the end; snapshots every 500; checkpoints every 1 000).

The rate is N x steps over the training loop's time: the steps, every evaluation (step 0's
included), snapshot and checkpoint, as each member's summary.json times them
(`last_session`); the setup (evaluation sets, models) and the summaries written at the end
(summary.json and Figure 2 per member) are reported beside it, not in it. The members train in
a temporary directory (--keep DIR: there instead). Prints a markdown row; --json PATH writes
every number.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(config: str, variant: str, n: int, steps: int, overrides: list[str],
          out: Path) -> dict:  # fmt: skip
    """Train N members of `variant` for `steps` steps into `out`; the timings."""
    import torch

    from empirical.experiments.sweep.spec import expand_grid, load_grid_config
    from empirical.experiments.sweep.trainer import train_batch
    from empirical.model.device import cpu_model
    from empirical.train.engine import resolve_device

    base, spec = load_grid_config(config, [*overrides, f"train.steps={steps}"])
    if variant not in spec.variants:
        raise SystemExit(f"error: --variant {variant!r}: the config has {', '.join(spec.variants)}")
    spec.variants = {variant: spec.variants[variant]}
    spec.seeds = list(range(n))
    members = expand_grid(base, spec)
    device = resolve_device(base.train.device)
    stamps: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    train_batch([(m.cfg, out / m.dirname) for m in members], progress=False,
                on_eval=lambda step, _records: stamps.append((step, time.perf_counter())))
    wall = time.perf_counter() - t0
    session = json.loads((out / members[0].dirname / "summary.json").read_text())["last_session"]
    loop = sum(session[k] for k in ("training_steps_s", "evaluations_s", "snapshots_s",
                                    "checkpoints_s"))  # fmt: skip
    tc = base.train
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({cpu_model()})"
    shown = Path(config).resolve()
    return {
        "config": str(shown.relative_to(ROOT)) if shown.is_relative_to(ROOT) else config,
        "variant": variant,
        "n": n,
        "steps": steps,
        "device": name,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": {"p": base.task.p, "K": base.task.K, "d_model": base.model.d_model,
                  "d_mlp": base.model.d_mlp, "batch_size": tc.batch_size},  # fmt: skip
        "schedule": {"eval_every": tc.eval_every, "eval_subsample": tc.eval_subsample,
                     "full_eval_every": tc.full_eval_every, "snapshot_every": tc.snapshot_every,
                     "checkpoint_every": tc.checkpoint_every,
                     "sample_chunk": tc.sample_chunk},  # fmt: skip
        "evaluations": len(stamps),
        "session": session,
        "loop_s": loop,
        "wall_s": wall,
        "member_steps_per_s": n * steps / loop,
        "member_steps_per_s_steps_only": n * steps / session["training_steps_s"],
        "member_steps_per_s_wall": n * steps / wall,
        "evaluation_share": session["evaluations_s"] / loop,
    }


def markdown_row(r: dict) -> str:
    setup = r["session"]["setup_s"]
    summaries = r["wall_s"] - setup - r["loop_s"]
    return (
        f"| {r['device']} | {r['n']} | {r['steps']} | {r['member_steps_per_s']:,.0f} | "
        f"{r['member_steps_per_s_steps_only']:,.0f} | {100 * r['evaluation_share']:.0f}% | "
        f"{setup:.0f} s + {summaries:.0f} s | {r['member_steps_per_s_wall']:,.0f} |"
    )


HEADER = (
    "| device | N | steps | member-steps/s (steps + evaluations + snapshots + checkpoints) | "
    "steps only | evaluations' share | setup + summaries | member-steps/s, wall |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides (train.sample_chunk=100)")
    ap.add_argument("--config", default=str(ROOT / "configs" / "population_authors.toml"))
    ap.add_argument("--variant", default="ours", help="the population (default ours)")
    ap.add_argument("--n", type=int, default=8, help="members (default 8)")
    ap.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    ap.add_argument("--device", default="auto", help="train.device (default auto)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's)")
    ap.add_argument("--keep", help="train the members here instead of a temporary directory")
    ap.add_argument("--json", help="write every number to this file")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = [*args.overrides, f"train.device={args.device}", f"train.threads={args.threads}"]
    if args.keep:
        result = bench(args.config, args.variant, args.n, args.steps, overrides, Path(args.keep))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = bench(args.config, args.variant, args.n, args.steps, overrides, Path(tmp))
    print(HEADER)
    print(markdown_row(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
