"""The threads an audit run starts: Spark jobs side by side, and calls that need a Py4J connection of their own
(Py4J gives each Python thread its own connection to the JVM)."""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def side_by_side(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Call each of ``jobs`` in its own thread and return their results by name: Spark runs the jobs they start
    side by side (a job over a few small files is mostly waiting: scheduling, listing, committing). The threads
    are daemons, never joined: on an error or Ctrl-C the run is discarded without waiting for them (staging.py
    cancels their Spark jobs), and a call left waiting on a JVM whose session was stopped meanwhile cannot hold
    the process at exit (as a ThreadPoolExecutor's workers would)."""
    futures: dict[str, Future] = {name: Future() for name in jobs}

    def call(name: str) -> None:
        futures[name].set_running_or_notify_cancel()
        try:
            futures[name].set_result(jobs[name]())
        except BaseException as error:  # the caller's: result() raises it there
            futures[name].set_exception(error)

    for name in jobs:
        threading.Thread(target=call, args=(name,), name=f"audit-job-{name}", daemon=True).start()
    return {name: future.result() for name, future in futures.items()}


def on_a_fresh_connection(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own, waited for: a Ctrl-C that landed inside a Py4J call may have left the
    calling thread's connection broken (its next call failing), and the run still has to be discarded."""
    return side_by_side({"call": call})["call"]
