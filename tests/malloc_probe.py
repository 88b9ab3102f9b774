"""What glibc's allocator does with a large block, observed: whether a 64 MiB malloc is served
by its own mmap (given back to the kernel when freed: glibc's default, whose mmap threshold
rises on the fly to 32 MiB at most) or from the heap (empirical.train.allocator.retain_freed_memory
raised the threshold to 256 MiB). For tests that run it in a fresh process (Linux, glibc >=
2.33 for mallinfo2)."""

from __future__ import annotations

import ctypes
import platform
import sys

BLOCK = 64 * 2**20
# where the probe applies: glibc's mallinfo2 and mallopt (Linux with glibc)
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")
    ]  # fmt: skip


def large_block_mapped() -> bool:
    """Whether a fresh 64 MiB malloc is an mmapped block of its own (glibc's mallinfo2:
    the count of such blocks goes up by one while it is held)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblks
    block = libc.malloc(BLOCK)
    try:
        return libc.mallinfo2().hblks == before + 1
    finally:
        libc.free(block)
