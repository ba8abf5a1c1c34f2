"""PeriodicThread: rounds on wake-up, a failing round logged and the next one run, a clean stop."""
from __future__ import annotations

import logging
import threading

import pytest

from bookie.util.periodic_thread import PeriodicThread


def test_wake_runs_a_round_and_a_failing_round_does_not_stop_the_next(caplog):
    rounds: list[int] = []
    ran = threading.Semaphore(0)

    def task() -> None:
        rounds.append(len(rounds))
        ran.release()
        if len(rounds) == 1:
            raise RuntimeError("round 0 fails")

    thread = PeriodicThread("test-periodic", 3600.0, task)  # rounds only when woken
    thread.start()
    try:
        with caplog.at_level(logging.ERROR):
            thread.wake()
            assert ran.acquire(timeout=60)
            thread.wake()
            assert ran.acquire(timeout=60)
        assert rounds == [0, 1]
        assert any("test-periodic: a round failed" in r.getMessage() for r in caplog.records)
    finally:
        thread.shutdown()
    assert thread.stopped and rounds == [0, 1]  # a stop is not a round


def test_a_subclass_overrides_run_once_and_a_bare_one_is_refused():
    class Counter(PeriodicThread):
        def __init__(self):
            super().__init__("counter", 3600.0)
            self.done = threading.Event()

        def run_once(self) -> None:
            self.done.set()

    counter = Counter()
    counter.start()
    counter.wake()
    try:
        assert counter.done.wait(60)
    finally:
        counter.shutdown()
    with pytest.raises(TypeError, match="give a task or override run_once"):
        PeriodicThread("bare", 1.0)
