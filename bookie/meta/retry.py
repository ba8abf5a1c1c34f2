"""Waiting out a lost ZooKeeper connection (a recipe, kept apart from the store as kazoo keeps its own).

kazoo reconnects by itself (and opens a new session after an expiry); until it has, every request
fails with BKZKConnectionLossException. A caller that must learn an answer (did my change land?)
retries the request with a growing pause, for as long as it can wait.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

from bookie.exceptions import BKZKConnectionLossException

T = TypeVar("T")
FIRST_PAUSE = 0.1  # seconds; doubled after each failure, up to MAX_PAUSE
MAX_PAUSE = 1.0


def retry_on_connection_loss(operation: Callable[[], T], seconds: float) -> T:
    """``operation()``, retried while ZooKeeper is unreachable; the last BKZKConnectionLossException is
    raised once ``seconds`` have gone by."""
    deadline = time.monotonic() + seconds
    pause = FIRST_PAUSE
    while True:
        try:
            return operation()
        except BKZKConnectionLossException:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)  # kazoo re-establishes the connection meanwhile
            pause = min(MAX_PAUSE, pause * 2)
