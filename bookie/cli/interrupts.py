"""Ctrl-C in a ``bk`` command that writes: a flag the command's loop checks, not a KeyboardInterrupt raised
wherever the main thread happens to be (inside a ledger handle's lock, half-way through a file). The command
then stops sending, waits for what it sent, closes what it opened and says what it had done."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

INTERRUPTED = 130  # the exit code of a command ended by Ctrl-C, as a shell gives it (128 + SIGINT)


@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """An event set by SIGINT (and SIGTERM) while the block runs; the previous handlers come back after it. A
    second Ctrl-C while the command winds down raises KeyboardInterrupt, as an impatient operator expects."""
    stop = threading.Event()

    def handler(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
