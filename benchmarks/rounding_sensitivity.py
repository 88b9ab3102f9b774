"""Does a change of float rounding in the training step move the run's phases? The authors'
config trained for `--steps` steps on the CPU with torch's default AdamW (what `train` and
`reproduce` use there) and with torch's fused AdamW (the same update rule, other rounding:
the speed-up the main job would get from it is in README, Benchmarks), from the same init and
the same batches; prints, per variant, the training time, the steps of the first spike's jump
(empirical.runs.phases.detect_phases) and how far the final weights lie from the default's.

    python benchmarks/rounding_sensitivity.py [--config configs/authors.toml] [--steps 8000]
        [--variants default fused] [--threads 2] [overrides ...]

Why it exists: issue 23 asks for the main job in 10 minutes with its phases found at the same
steps as before. The speed-ups left on this CPU change the step's rounding (a fused optimizer,
a hand-written backward); this measures whether such a change keeps the phases.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import empirical.train.learners as learners  # noqa: E402
from empirical.model.checkpoint import load_checkpoint  # noqa: E402
from empirical.runs.config import load_run_config  # noqa: E402
from empirical.runs.phases import detect_phases  # noqa: E402
from empirical.runs.rundir import RunDir  # noqa: E402
from empirical.train.loop import train_run  # noqa: E402

VARIANTS = ("default", "fused")


@contextlib.contextmanager
def optimizer_variant(name: str):
    """The engine's AdamW factory for the duration: "default" leaves it; "fused" builds
    torch's fused AdamW (same hyperparameters) on any device."""
    if name == "default":
        yield
        return
    original = learners._adamw

    def fused(params, tc, device, graphed=False):
        return torch.optim.AdamW(
            params, lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas, fused=True
        )

    learners._adamw = fused
    try:
        yield
    finally:
        learners._adamw = original


def train_variant(cfg, name: str, root: Path) -> dict:
    run = RunDir(root / name)
    with optimizer_variant(name):
        t0 = time.perf_counter()
        train_run(cfg, run.path, progress=False)
        seconds = time.perf_counter() - t0
    phases = detect_phases(run.read_metrics())
    weights = load_checkpoint(run.final_model())["model_state"]
    return {"seconds": seconds, "phases": phases, "weights": weights}


def jump(spike) -> str:
    if spike is None:
        return "none detected"
    return f"{spike.jump_start_step} -> {spike.jump_end_step}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides")
    ap.add_argument("--config", default=str(ROOT / "configs" / "authors.toml"))
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if args.steps < 1 or args.threads < 1:
        raise SystemExit("--steps and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    cfg = load_run_config(
        args.config, [*args.overrides, f"train.steps={args.steps}", "train.device=cpu"]
    )
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.variants:
            print(f"training {cfg.name} seed {cfg.seed}, {args.steps} steps, {name} AdamW ...",
                  file=sys.stderr, flush=True)  # fmt: skip
            results[name] = train_variant(cfg, name, Path(tmp))
    base = results.get("default")
    print(f"{cfg.name} seed {cfg.seed}, {args.steps} steps, {args.threads} threads")
    print("| AdamW | train s | first spike jump | 0-var >= 90% at | max |w - w_default| |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in results.items():
        ph = r["phases"]
        if base is None or name == "default":
            diff = "-"
        else:
            diff = max(
                float((r["weights"][k] - base["weights"][k]).abs().max()) for k in r["weights"]
            )
            diff = f"{diff:.3g}"
        print(
            f"| {name} | {r['seconds']:.0f} | {jump(ph.first_spike)} | "
            f"{ph.zero_var_learned_step} | {diff} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
