"""A process held by SIGSTOP, for as long as a test needs, by PID: ``hold(pid)`` returns once every thread of
the process has stopped (the kernel stops a multi-threaded process thread by thread, so a JVM can still
answer a request sent just after ``kill`` returns), and gives back a ``resume`` to call in the test and in its
``finally`` (SIGCONT once; a no-op for a process killed meanwhile)."""
from __future__ import annotations

import os
import signal
from typing import Callable

from tests.helpers.waiting import wait_for


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of ``pid`` (``/proc/<pid>/task/*/stat``); [] once it is gone."""
    states = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rpartition(")")[2].split()[0])  # after the name, which may hold spaces
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return states


def stopped(pid: int) -> bool:
    states = thread_states(pid)
    return bool(states) and all(state in "tTZX" for state in states)


def hold(pid: int) -> Callable[[], None]:
    os.kill(pid, signal.SIGSTOP)
    resumed: list[bool] = []

    def resume() -> None:
        if not resumed:
            resumed.append(True)
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:  # killed meanwhile
                pass
    try:
        wait_for(lambda: stopped(pid), f"every thread of process {pid} to stop")
    except BaseException:
        resume()
        raise
    return resume
