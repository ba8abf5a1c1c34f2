"""Holding a component of the test process at one call, to make a race happen in a chosen order.

``HeldCall(monkeypatch, owner, name)`` replaces ``owner.name`` (a function of a module or a method of a
class): its first call waits, before running (or, with ``after``, once it has run), until the test
calls ``release``; later calls run as before. ``reached`` is set while the first call waits.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from tests.helpers.waiting import DEADLINE, wait_for


class HeldCall:
    def __init__(self, monkeypatch, owner, name: str, after: bool = False):
        self.reached = threading.Event()
        self._go = threading.Event()
        self._fired = False
        self._lock = threading.Lock()
        original = getattr(owner, name)

        def held(*args, **kwargs):
            with self._lock:
                first, self._fired = not self._fired, True
            if first and not after:
                self._hold()
            result = original(*args, **kwargs)
            if first and after:
                self._hold()
            return result

        monkeypatch.setattr(owner, name, held)

    def _hold(self) -> None:
        self.reached.set()
        self._go.wait(DEADLINE)  # a failing test that never releases it frees the thread after the deadline

    def wait_reached(self, what: str) -> None:
        wait_for(self.reached.is_set, what)

    def release(self) -> None:
        self._go.set()


def in_thread(call: Callable[[], object]) -> Future:
    """Run ``call`` on a thread of its own; its future gives the result or raises what it raised."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(call)
    finally:
        pool.shutdown(wait=False)
