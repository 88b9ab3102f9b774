"""The fast forward of this tree against the one of an earlier git revision: the same numbers,
bit for bit, and how long each takes, timed in alternation in one process.

    python benchmarks/bench_fast_forward.py --against HEAD~1 [--config configs/authors.toml]
        [--repeats 15] [--batches 10] [--threads 1]

Loads `empirical/model/fast.py` as it is at revision `--against` (`git show`) beside the
working tree's, runs both on the same weights (a fresh model of the config) and the same
training batches, checks that logits and the gradients of the cross-entropy are equal bit
for bit, then times forward (no grad) and forward + backward of each, alternating old and
new `--repeats` times over `--batches` batches so that a machine's slow spells fall on
both. Prints the medians, the minima and new / old. Needs git and the repository's history.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from empirical.model import fast as fast_new  # noqa: E402
from empirical.model.transformer import AssignAddTransformer  # noqa: E402
from empirical.runs.config import load_run_config  # noqa: E402
from empirical.task.assign_add.draw import TrainingSampler  # noqa: E402
from empirical.task.pairs import held_out_pairs, training_generator  # noqa: E402
from empirical.train.batches import BatchStream  # noqa: E402


def module_at(revision: str, path: str, directory: Path):
    """`path` (relative to the repository) as it is at `revision`, imported as a module."""
    try:
        source = subprocess.run(
            ["git", "show", f"{revision}:{path}"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise SystemExit(
            f"--against {revision}: cannot read {path} there ({detail.strip()})"
        ) from None
    file = directory / "fast_at_revision.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def run(module, model, batch, scale: float, grad: bool):
    """Logits (and, with `grad`, the gradients of the mean cross-entropy) of one batch."""
    weights = fast_new.member_weights(model)
    with torch.set_grad_enabled(grad):
        logits = module.fast_forward(weights, batch.tokens[None], scale).logits[0]
    if not grad:
        return logits, None
    loss = F.cross_entropy(logits, batch.labels)
    return logits, torch.autograd.grad(loss, list(model.parameters()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides")
    ap.add_argument("--against", required=True, help="git revision of the old fast forward")
    ap.add_argument("--config", default=str(ROOT / "configs" / "authors.toml"))
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.batches < 1:
        raise SystemExit("--repeats and --batches must be >= 1")
    torch.set_num_threads(args.threads)
    cfg = load_run_config(args.config, [*args.overrides, "train.device=cpu"])
    model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed)
    scale = model.cfg.attn_scale
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device="cpu")
    stream = BatchStream(sampler, training_generator(cfg.seed, "cpu"), cfg.train.batch_size)
    batches = [stream.next() for _ in range(args.batches)]
    with tempfile.TemporaryDirectory() as tmp:
        old = module_at(args.against, "empirical/model/fast.py", Path(tmp))
        same = True
        for batch in batches[:3]:
            logits_old, grads_old = run(old, model, batch, scale, True)
            logits_new, grads_new = run(fast_new, model, batch, scale, True)
            same &= torch.equal(logits_old, logits_new)
            same &= all(map(torch.equal, grads_old, grads_new))
        print(
            f"config {Path(args.config).name}, batch {cfg.train.batch_size}, {args.threads} "
            f"thread(s), against {args.against}: logits and gradients "
            + ("equal bit for bit" if same else "DIFFER")
        )
        print("| pass | old median (ms) | new median (ms) | old min | new min | new / old |")
        print("| --- | --- | --- | --- | --- | --- |")
        for grad in (False, True):
            times = {"old": [], "new": []}
            for _ in range(args.repeats):
                for name, module in (("old", old), ("new", fast_new)):
                    t0 = time.perf_counter()
                    for batch in batches:
                        run(module, model, batch, scale, grad)
                    times[name].append((time.perf_counter() - t0) / len(batches) * 1e3)
            med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
            low = {k: min(v) for k, v in times.items()}
            print(
                f"| {'forward + backward' if grad else 'forward (no grad)'} | {med['old']:.2f} | "
                f"{med['new']:.2f} | {low['old']:.2f} | {low['new']:.2f} | "
                f"{med['new'] / med['old']:.3f} |"
            )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
