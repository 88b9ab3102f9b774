"""Bit-level fingerprints of the training step and the hooked forward (tests/test_forward_bits.py).

    python tests/forward_bits.py --write   # record them (on purpose: after a change of numbers)
    python tests/forward_bits.py --add     # add this CPU kind's entry, the code unchanged

For each case (configs/authors.toml with 1 and 3 members; configs/smoke.toml at depth 3, and at
depth 4 with tied middle layers, 3 members) it trains STEPS steps exactly as the engine does
(SingleLearner or BatchLearner, the members' data streams, one torch thread, CPU) and hashes
(sha256) every member's final weights, the per-step losses, and the hooked forward's logits
and full activation cache of member 0 on 64 sequences. tests/golden/forward_bits.json holds
them for each CPU kind recorded (CPU name, torch's CPU capability - AVX2, AVX512, ... - and torch
version) with the commit that produced them: training is bit-deterministic on one CPU kind and
torch, so there every hash must be equal (torch.equal, not a tolerance). One CPU name can hide
several kinds (a virtual "AMD EPYC" with or without AVX-512): a kind recorded without a
capability serves a machine of that name whose own capability is not recorded.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from empirical.model.device import cpu_kind  # noqa: F401  (the golden files' key)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "forward_bits.json"
STEPS = 20
CASES = {
    "authors_1": ("configs/authors.toml", [], 1),
    "authors_3": ("configs/authors.toml", [], 3),
    "smoke_depth3_1": ("configs/smoke.toml", ["model.n_layers=3"], 1),
    "smoke_depth4_tied_3": (
        "configs/smoke.toml", ["model.n_layers=4", "model.tied_layers=true"], 3
    ),
}


def _hash(tensors) -> str:
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.detach().contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


def fingerprints(case: str, steps: int = STEPS) -> dict[str, str]:
    """{"weights", "losses", "hooked", "cache"} hashes of one case (module docstring)."""
    import torch

    from empirical.runs.config import load_run_config
    from empirical.task.assign_add.draw import TrainingSampler
    from empirical.task.pairs import held_out_pairs, training_generator
    from empirical.train.batches import BatchStream
    from empirical.train.learners import BatchLearner, SingleLearner

    path, overrides, members = CASES[case]
    base = load_run_config(ROOT / path, overrides)
    cfgs = [dataclasses.replace(base, seed=base.seed + i) for i in range(members)]
    device = torch.device("cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        learner = SingleLearner(cfgs[0], device) if members == 1 else BatchLearner(cfgs, device)
        streams = []
        for cfg in cfgs:
            sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, cfg.seed), device=device)
            gen = training_generator(cfg.seed, device)
            streams.append(BatchStream(sampler, gen, cfg.train.batch_size, cfg.train.sample_chunk))
        losses = []
        for i in range(steps):
            batches = [s.next() for s in streams]
            tokens = torch.stack([b.tokens for b in batches])
            labels = torch.stack([b.labels for b in batches])
            losses.append(learner.train_step(tokens, labels, [True] * members, i).detach().clone())
        weights = []
        for m in range(members):  # model_of may return one model refilled for each member
            model = learner.model_of(m)
            weights += [p.clone() for _, p in sorted(model.state_dict().items())]
            if m == 0:
                with torch.no_grad():
                    logits, cache = model.run_with_cache(batches[0].tokens[:64])
    finally:
        torch.set_num_threads(threads)
    return {
        "weights": _hash(weights),
        "losses": _hash(losses),
        "hooked": _hash([logits]),
        "cache": _hash([cache[k] for k in sorted(cache.keys())]),
    }


def golden_kind(golden: dict, kind: dict[str, str]) -> dict | None:
    """The recorded entry for `kind`: the same CPU name and torch, the same capability, else the
    one recorded without a capability; None when this kind was never recorded."""
    same = [k for k in golden["kinds"] if (k["cpu"], k["torch"]) == (kind["cpu"], kind["torch"])]
    exact = [k for k in same if k["capability"] == kind["capability"]]
    loose = [k for k in same if k["capability"] is None]
    return (exact or loose or [None])[0]


def commit_here() -> str:
    """The checkout's short commit ("unknown" outside git)."""
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def with_kind(kinds: list[dict], entry: dict) -> list[dict]:
    """`kinds` with `entry` added, replacing the entry of the same kind (cpu, capability, torch)."""
    key = ("cpu", "capability", "torch")
    return [k for k in kinds if [k[f] for f in key] != [entry[f] for f in key]] + [entry]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--write", action="store_true", help=f"write {GOLDEN.name} anew")
    how.add_argument("--add", action="store_true", help="add this CPU kind's entry")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    entry = {**cpu_kind(), "commit": commit_here()}
    entry["cases"] = {case: fingerprints(case) for case in CASES}
    print(json.dumps(entry, indent=1))
    if args.write or args.add:  # --write: the other kinds' entries are stale after a change
        kinds = json.loads(GOLDEN.read_text())["kinds"] if args.add and GOLDEN.exists() else []
        golden = {"steps": STEPS, "kinds": with_kind(kinds, entry)}
        GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()
