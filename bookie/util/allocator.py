"""Keep freed multi-megabyte buffers in the process instead of giving them back to the kernel.

Range reads move messages of a few MiB: an entry-log span, the joined message, gRPC's copy of it.
glibc serves blocks that big with mmap (past its adaptive threshold) and trims freed heap memory back
to the kernel, so every message paid for fresh pages: a page fault and a zeroed page per 4 KiB, about
a third of a bookie's CPU per entry read (bench: bookie 1.25-1.5 -> 0.96-1.0 us per entry, the
reading client 0.8-1.0 -> 0.6). BookKeeper itself reuses pooled buffers for the same reason.

One arena (M_ARENA_MAX=1) for the same reason: glibc gives threads arenas of their own, and unmaps a
thread arena's sub-heap as soon as it empties, whatever the trim threshold. The gRPC thread that
receives a reader's messages then paid fresh pages again after each quiet spell (bench/client.py,
a client's first read after its appends: 2.2 -> 0.7 us of kernel time per entry, 172-194k -> 214-219k
entries/s). The tuning applies to arenas made after it, so a process makes it before starting threads
where it can (the bookie server at start, always; a client when it is created, under
``allocatorPoolingPolicy=PooledDirect``, the default; a Spark executor's first read).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed: blocks below this come from the reused heap
TRIM_THRESHOLD = 512 << 20  # freed memory kept for reuse (up to this much) rather than returned to the kernel
# One arena: glibc unmaps a thread arena's sub-heap once it empties, whatever the trim threshold, so the
# thread that receives a reader's messages paid fresh pages again after every quiet spell.
ARENA_MAX = 1

_tuned: bool | None = None


def keep_large_buffers() -> bool:
    """Tune glibc's allocator for this process (once); False where it is not glibc."""
    global _tuned
    if _tuned is None:
        _tuned = False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            log.debug("no glibc mallopt here: allocator left as it is")
            return False
        _tuned = all(mallopt(param, value) for param, value in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                                                                (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                                                                (M_ARENA_MAX, ARENA_MAX)))
    return _tuned
