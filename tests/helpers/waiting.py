"""Waiting for a condition with a generous deadline: tests wait on what they need, never a fixed sleep."""
from __future__ import annotations

import time
from typing import Callable

DEADLINE = 60.0  # seconds: generous, so a busy machine only makes a test slower, never failing


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)
