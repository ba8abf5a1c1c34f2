"""Waiting out a lost ZooKeeper connection (a recipe, kept apart from the store as kazoo keeps its own).

kazoo reconnects by itself (to another server of the ensemble, or with a new session after an expiry);
a request in flight when the connection goes fails with BKZKConnectionLossException. A caller that must
learn an answer (did my change land?) retries the request with a growing pause, for as long as it can
wait; the store sends a request that may be sent twice again as soon as the connection is back.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

from bookie.exceptions import BKZKConnectionLossException

T = TypeVar("T")
FIRST_PAUSE = 0.1  # seconds; doubled after each failure, up to MAX_PAUSE
MAX_PAUSE = 1.0
POLL = 0.02  # seconds between looks at the connection's state


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


def retry_when_reconnected(operation: Callable[[], T], connected: Callable[[], bool], seconds: float) -> T:
    """``operation()``, sent again each time it fails with BKZKConnectionLossException once ``connected()``
    (kazoo has a connection again: to the same server, or to another of the ensemble), for up to
    ``seconds``; the last BKZKConnectionLossException if no connection comes back in time. Only for
    requests that may be sent twice."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return operation()
        except BKZKConnectionLossException:
            while True:
                if time.monotonic() + POLL > deadline:
                    raise
                time.sleep(POLL)
                if connected():
                    break
