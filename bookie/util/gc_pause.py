"""Pausing CPython's cyclic garbage collector while a reader builds entries by the thousand.

A LedgerEntry is a NamedTuple: a tuple subclass, which the collector tracks for as long as it lives
(it stops tracking only exact tuples of atomic values). A range read keeps hundreds of thousands of
them, and with the collector running every 700 allocations (and over everything built so far in its
full collections), reading cost about 1 µs of CPU per entry more: a fifth of the reading client's
CPU (bench/client.py). Paused while one message's entries are built, the collector runs about once
per message instead. Reference counting frees memory as usual meanwhile; only the search for
reference cycles waits, for the millisecond a message takes.

Each pause ends with a collection of the young generation, in the pausing thread: the objects it
built are checked while they are still in the CPU's caches. Left to the collector, the first
allocation after the last of several threads' overlapping pauses collects them all together, by then
cold: the same traversal took about twice as long (0.16-0.27 s against 0.07-0.09 s per 400,000
entries read, bench/client.py's read).

Process-wide, like the collector itself: pauses from several threads nest, and the collector is
enabled again when the last one ends, only if it was enabled when the first began (and a collector
disabled then is not run at the end either).
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False  # whether the collector was enabled when the outermost pause began


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (from any thread), resumed after it as it was,
    then the young generation collected (if the collector was enabled)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
        enabled = _resume
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
        if enabled:
            gc.collect(0)
