"""A thread that does one piece of work every so often (BookKeeper schedules its SyncThread,
LedgerDirsMonitor, GarbageCollectorThread and Auditor checks the same way).

Named, so it shows in thread dumps; a round that fails is logged and the next one runs on time;
``wake()`` runs a round now instead of waiting; ``shutdown()`` stops it and waits for the round in
progress. Subclasses override ``run_once``; a plain function can be passed as ``task`` instead.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class PeriodicThread:
    def __init__(self, name: str, interval: float, task: Callable[[], None] | None = None):
        if task is None and type(self).run_once is PeriodicThread.run_once:
            raise TypeError(f"{type(self).__name__}: give a task or override run_once")
        self.name = name
        self.interval = interval  # seconds between rounds
        self._task = task
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> None:
        """One round of the work."""
        self._task()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run a round now (the interval restarts after it)."""
        self._wake.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run_once()
            except Exception:  # the next round may succeed: keep going, loudly
                log.exception("%s: a round failed", self.name)

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
