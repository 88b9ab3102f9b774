"""The C allocator of a command-line process: freed memory kept for reuse (glibc only).

    retain_freed_memory()   # in `python -m empirical ...` and reproduce's background processes

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

Only a command's own process calls it (never on import: a library must not change its host's
allocator); `ASSIGN_ADD_KEEP_FREED_MEMORY=0` in the environment turns it off. The price is
memory kept by the process after a peak (up to the trim threshold above what it uses):
compare-qk of that run peaked at 1.40 GB against 1.30 GB (`/usr/bin/time -f %M`).
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
