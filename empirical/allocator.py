"""The C allocator of a command-line process: freed memory kept for reuse (glibc only).

    retain_freed_memory()   # in train, sweep, grid, compare-qk, reproduce (and its background)

glibc's malloc returns every block larger than its mmap threshold (128 KiB, raised on the fly
up to 32 MiB) to the kernel when it is freed, and trims the top of its heap, so the next
tensor of that size is mapped again and its pages faulted in zeroed, one 4 KiB page at a
time. A training step frees and allocates 1 MiB tensors, and compare-qk arrays of tens of
MiB, thousands of times. Raising the mmap threshold to 256 MiB and the trim threshold to 1 GiB
keeps that memory in the process. Measured on the 2-core Xeon (2026-11-27,
`python benchmarks/bench_allocator.py --run runs/authors/seed0`): compare-qk of the main job's
40 000-step run 66.9-68.9 -> 54.5-56.8 s (8.6 million page faults -> 0.3 million, 14 -> 1-2 s
of system time); a training step of configs/authors.toml 13.2-13.3 -> 12.4-12.6 ms (150-190
page faults -> 0.3-0.4). It changes where memory comes from, never a number: torch aligns
every CPU tensor to 64 bytes either way (tested: the same weights).

Only the processes of the commands whose work it speeds up call it (empirical.__main__'s
KEEP_FREED_MEMORY: train, sweep, grid, compare-qk, reproduce; and reproduce's background
processes, which run compare-qk), never an import: a library must not change its host's
allocator. On the 2-core AMD EPYC, busy (2026-11-28, fresh processes in turn, medians;
`python benchmarks/bench_allocator.py`, with `--members 8`, and with `--no-steps --run` on a
copy of the main job's run at 42 snapshots): compare-qk 63.3 -> 52.8 s of CPU (user +
system; 4.9 -> 0.23 million page faults; its wall time drowned in the machine's load); a step
of 8 seeds batched, as `sweep` and `grid` train them, 367 -> 339 ms (5 000 page faults a step
-> 20-30); a single model's step 40.3 -> 38.7 ms (140-340 -> 1-2). `analyze` of that run
gained nothing (two pairs: 15.5 / 15.7 s of CPU default, 16.7 / 15.1 s kept), and the other
commands, not shown to gain, keep glibc's default. `ASSIGN_ADD_KEEP_FREED_MEMORY=0` turns it
off.

The price is memory kept by the process after a peak (up to the trim threshold above what it
uses): compare-qk of the 40 000-step run peaked at 1.40 GB against 1.30 GB on the Xeon
(`/usr/bin/time -f %M`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 * 2**20
TRIM_THRESHOLD = 2**30
ENV = "ASSIGN_ADD_KEEP_FREED_MEMORY"


def retain_freed_memory() -> bool:
    """Set this process's glibc mmap and trim thresholds (the module docstring); returns
    whether they were set (False: not Linux with glibc, or turned off by the environment)."""
    if os.environ.get(ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt  # glibc's; musl and others have none
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and (
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    )
