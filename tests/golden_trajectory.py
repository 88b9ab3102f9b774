"""The golden trajectory: the first 300 steps of our seed 0 of configs/authors.toml.

    python tests/golden_trajectory.py --write   # after a change of the trajectory ON PURPOSE

trains configs/authors.toml (seed 0, train.steps = 300: the constant schedule makes these the
first 300 steps of the 40 000-step run; one torch thread, CPU) and stores every evaluation's
training loss and accuracies in tests/golden/authors_seed0_300.json with the commit, CPU and
torch version that produced them. tests/test_golden_trajectory.py (slow) trains the same and
compares: a change that alters the trajectory fails it, and the README's and paper_checks.md's
"ours" numbers must then be regenerated on purpose (the test's message says so).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "authors_seed0_300.json"
CONFIG = ROOT / "configs" / "authors.toml"
STEPS = 300


def trajectory(workdir: Path) -> list[dict]:
    """[{step, train_loss, acc: {set: accuracy}}] of the first STEPS steps, trained here."""
    import torch

    from empirical.config.run import load_run_config
    from empirical.train.loop import train_run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = load_run_config(CONFIG, [f"train.steps={STEPS}", "train.device=cpu"])
        train_run(cfg, workdir / "run", progress=False)
    finally:
        torch.set_num_threads(threads)
    records = [json.loads(x) for x in (workdir / "run" / "metrics.jsonl").read_text().splitlines()]
    return [{"step": r["step"], "train_loss": r["train_loss"], "acc": r["acc"]} for r in records]


def provenance() -> dict:
    import torch

    from empirical.train.summary import cpu_model

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {"commit": commit or "unknown", "cpu": cpu_model(), "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"(re)write {GOLDEN.name}")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        records = trajectory(Path(tmp))
    data = {"config": "configs/authors.toml", "seed": 0, "steps": STEPS, **provenance()}
    data["records"] = records
    text = json.dumps(data, indent=1) + "\n"
    if args.write:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN.relative_to(ROOT)}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
