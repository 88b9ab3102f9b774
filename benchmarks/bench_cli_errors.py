"""How long `python -m empirical` takes to answer a bad argument, on this machine.

    python benchmarks/bench_cli_errors.py [--repeat 5]

Times (wall clock, a fresh `python` process each, median and min of --repeat runs) a few
commands that must be refused before any work: a bad override value, an override typo, a
flag typo, a config that is not TOML, a missing run directory; and, for scale, a bare
interpreter and `python -c "import torch"`. The target of issue 24 is < 1 s for a bad
override (before, every command imported torch first: 3-13 s on our 2-core CPU). Printed,
never asserted: tests/test_cli_fast_errors.py checks that torch is not imported on the way.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from empirical.model.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]


def commands(tmp: Path) -> list[tuple[str, list[str]]]:
    """(label, argv after `python`) of every timed command."""
    bad = tmp / "bad.toml"
    bad.write_text("[train\n")
    missing = str(tmp / "missing")
    cli = ["-m", "empirical"]
    return [
        ("python -c pass (interpreter start)", ["-c", "pass"]),
        ('python -c "import torch"', ["-c", "import torch"]),
        ("train train.steps=-1", [*cli, "train", "train.steps=-1"]),
        ("train train.stpes=100", [*cli, "train", "train.stpes=100"]),
        ("train --steps 100", [*cli, "train", "--steps", "100"]),
        ("train --config BAD.toml", [*cli, "train", "--config", str(bad)]),
        ("sample task.p=-1", [*cli, "sample", "task.p=-1"]),
        ("evaluate MISSING", [*cli, "evaluate", missing]),
        ("analyze MISSING", [*cli, "analyze", missing]),
        ("compare-qk MISSING", [*cli, "compare-qk", missing]),
        ("sweep train.steps=-1", [*cli, "sweep", "train.steps=-1"]),
        ("reproduce train.steps=-1", [*cli, "reproduce", "train.steps=-1"]),
    ]


def time_once(argv: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - t0, done.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    args = ap.parse_args()
    print(f"{cpu_model()}, Python {platform.python_version()}")
    print(f"{'command':<38} {'median s':>9} {'min s':>7}  exit")
    with tempfile.TemporaryDirectory() as tmp:
        for label, argv in commands(Path(tmp)):
            runs = [time_once(argv) for _ in range(args.repeat)]
            seconds = [s for s, _ in runs]
            codes = sorted({rc for _, rc in runs})
            print(
                f"{label:<38} {statistics.median(seconds):9.2f} {min(seconds):7.2f}  "
                f"{','.join(map(str, codes))}"
            )


if __name__ == "__main__":
    main()
