"""An audit run's phases: one short line each to a progress callback (``bk audit`` and the jobs print it on
stderr, e.g. ``storage audit: reading the entrylogs, bookie_ledgers, ledgers tables (2/5)``), and the phase a
run was in when it ended early, for the line that says what was done.

Test seam, unset in production: ``BK_AUDIT_HOLD_FILE=<file>`` holds the run before the phase the file names
(its key: ``history``, ``tables``, ``findings``, ``report``, ``publish``): the run writes the key to
``<file>.at`` and waits until the file names another (as bookie/server/compactor.py's
BK_COMPACTION_HOLD_FILE), so a test can interrupt a run at a known point without sleeping.
"""
from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable

Progress = Callable[[str], None]  # receives one line per phase

HOLD_FILE_ENV = "BK_AUDIT_HOLD_FILE"
HOLD_POLL_SECONDS = 0.01
KEYS = ("history", "tables", "findings", "report", "publish")


def describe(key: str, read: tuple[str, ...], run_id: str) -> str:
    """What phase ``key`` does, as the progress line says it."""
    return {"history": "reading earlier runs",
            "tables": f"reading the {', '.join(read)} tables",
            "findings": "deriving the findings",
            "report": "writing the report",
            "publish": f"publishing run {run_id}"}[key]


def _text(path: pathlib.Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def hold_at(key: str) -> None:
    """The test seam (module docstring): wait while $BK_AUDIT_HOLD_FILE names ``key``."""
    hold = os.environ.get(HOLD_FILE_ENV)
    if not hold or _text(pathlib.Path(hold)) != key:
        return
    at = pathlib.Path(hold + ".at")
    at.with_suffix(".tmp").write_text(key)
    os.replace(at.with_suffix(".tmp"), at)
    while _text(pathlib.Path(hold)) == key:
        time.sleep(HOLD_POLL_SECONDS)


class Phases:
    """The phases of one run of ``audit``, announced in order (``KEYS``)."""

    def __init__(self, audit: str, read: tuple[str, ...], run_id: str, progress: Progress | None = None):
        self.audit, self.read, self.run_id, self.progress = audit, read, run_id, progress
        self.current: str | None = None

    def start(self, key: str) -> None:
        self.current = key
        if self.progress is not None:
            self.progress(f"{self.audit} audit: {self.where()}")
        hold_at(key)

    def where(self) -> str:
        """The current phase as the progress line names it: ``deriving the findings (3/5)``."""
        if self.current is None:
            return "starting"
        return f"{describe(self.current, self.read, self.run_id)} ({KEYS.index(self.current) + 1}/{len(KEYS)})"
