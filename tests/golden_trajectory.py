"""The golden trajectory: the first 300 steps of our seed 0 of configs/authors.toml.

    python tests/golden_trajectory.py --write   # after a change of the trajectory ON PURPOSE
    python tests/golden_trajectory.py --add     # this CPU kind's entry, the code unchanged

trains configs/authors.toml (seed 0, train.steps = 300: the constant schedule makes these the
first 300 steps of the 40 000-step run; one torch thread, CPU) and stores every evaluation's
training loss and accuracies in tests/golden/authors_seed0_300.json, one entry per CPU kind
(tests/forward_bits.py's kinds: CPU name, torch's CPU capability, torch version) with the
commit that produced it; the first entry is the reference for kinds not recorded. `--write`
starts the file again from this kind (the other kinds' entries are stale after a change);
`--add` adds or replaces this kind's entry and keeps the others.
tests/test_golden_trajectory.py (slow) trains the same and compares: a change that alters the
trajectory fails it, and the README's and paper_checks.md's "ours" numbers must then be
regenerated on purpose (the test's message says so).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from forward_bits import commit_here, cpu_kind, with_kind

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "authors_seed0_300.json"
CONFIG = ROOT / "configs" / "authors.toml"
STEPS = 300


def trajectory(workdir: Path) -> list[dict]:
    """[{step, train_loss, acc: {set: accuracy}}] of the first STEPS steps, trained here."""
    import torch

    from empirical.runs.config import load_run_config
    from empirical.train.loop import train_run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = load_run_config(CONFIG, [f"train.steps={STEPS}", "train.device=cpu"])
        train_run(cfg, workdir / "run", progress=False, figures=False)
    finally:
        torch.set_num_threads(threads)
    records = [json.loads(x) for x in (workdir / "run" / "metrics.jsonl").read_text().splitlines()]
    return [{"step": r["step"], "train_loss": r["train_loss"], "acc": r["acc"]} for r in records]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--write", action="store_true", help=f"(re)write {GOLDEN.name}")
    how.add_argument("--add", action="store_true", help="add this CPU kind's entry")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        records = trajectory(Path(tmp))
    entry = {**cpu_kind(), "commit": commit_here(), "records": records}
    if not (args.write or args.add):
        sys.stdout.write(json.dumps(entry, indent=1) + "\n")
        return 0
    kinds = json.loads(GOLDEN.read_text())["kinds"] if args.add and GOLDEN.exists() else []
    data = {"config": "configs/authors.toml", "seed": 0, "steps": STEPS,
            "kinds": with_kind(kinds, entry)}  # fmt: skip
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
