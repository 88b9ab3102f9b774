"""The C allocator of a command-line process: freed memory kept for reuse (glibc only).

    retain_freed_memory()   # in train, sweep, grid, compare-qk, reproduce (and its background)

glibc returns freed blocks above its mmap threshold to the kernel and trims its heap, so a
training step's 1 MiB tensors and compare-qk's arrays are mapped and page-faulted in again,
thousands of times. Raising the mmap threshold to 256 MiB and the trim threshold to 1 GiB
keeps that memory in the process; it changes where memory comes from, never a number. Only
the commands it speeds up call it (empirical.__main__'s KEEP_FREED_MEMORY), never an import: a
library must not change its host's allocator. Timings: docs/benchmarks.md (Xeon: compare-qk
68 -> 55 s, a step 13.3 -> 12.5 ms; 2-core EPYC: compare-qk 63.3 -> 52.8 s of CPU, 8 seeds
batched 367 -> 339 ms a step, one model 40.3 -> 38.7 ms; analyze gained nothing). The price:
memory kept after a peak (compare-qk 1.40 against 1.30 GB). `ASSIGN_ADD_KEEP_FREED_MEMORY=0`
turns it off.
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
