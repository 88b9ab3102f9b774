"""Run `python -m empirical ...` and SIGKILL it (or hold it) at an exact moment (for
tests/test_kill.py and tests/test_run_lock.py).

    python tests/kill_launcher.py MOMENT N empirical train ...

MOMENT (N: the N-th such event of the process, counted from 1):
    checkpoint-write   checkpoints/last.pt fully written to its temporary file, not yet renamed
    after-checkpoint   right after checkpoints/last.pt is replaced
    snapshot-write     a snapshots/step_*.pt written to its temporary file, not yet renamed
    metrics-append     half of a metrics.jsonl line written (a torn line)
    none               never (the command runs as is)

or, instead of dying (tests/test_run_lock.py: a writer that is reliably alive):
    hold-after-checkpoint   right after checkpoints/last.pt is replaced, create the file
                            $LAUNCHER_HELD and wait, holding everything (the run directory's
                            writer lock included), until the file $LAUNCHER_RELEASE exists

The process kills itself with a real SIGKILL (no cleanup, no `finally`); nothing in the library
knows about it: the hooks wrap os.replace and empirical.runs.metrics_log.append_text from outside.
"""

from __future__ import annotations

import os
import re
import runpy
import signal
import sys
import time
from pathlib import Path


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _hold() -> None:
    Path(os.environ["LAUNCHER_HELD"]).touch()
    release = Path(os.environ["LAUNCHER_RELEASE"])
    while not release.exists():
        time.sleep(0.02)


def install(moment: str, n: int) -> None:
    count = {"n": 0}

    def hit() -> bool:
        count["n"] += 1
        return count["n"] == n

    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        name = Path(dst).name
        if moment == "checkpoint-write" and name == "last.pt" and hit():
            _die()
        if moment == "snapshot-write" and re.fullmatch(r"step_\d+\.pt", name) and hit():
            _die()
        real_replace(src, dst, *args, **kwargs)
        if moment == "after-checkpoint" and name == "last.pt" and hit():
            _die()
        if moment == "hold-after-checkpoint" and name == "last.pt" and hit():
            _hold()

    os.replace = replace

    if moment == "metrics-append":
        import empirical.runs.metrics_log as metrics_log

        real_append = metrics_log.append_text

        def append_text(path, text):
            if Path(path).name == "metrics.jsonl" and hit():
                with open(path, "ab") as fh:
                    fh.write(text.encode()[: len(text) // 2])
                    fh.flush()
                    os.fsync(fh.fileno())
                _die()
            real_append(path, text)

        metrics_log.append_text = append_text


if __name__ == "__main__":
    moment, n, module, *argv = sys.argv[1:]
    if moment != "none":
        install(moment, int(n))
    sys.argv = [module, *argv]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
