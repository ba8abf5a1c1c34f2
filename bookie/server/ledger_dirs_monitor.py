"""LedgerDirsMonitor: turns the bookie read-only when a ledger disk fills, writable when it drains.

A directory is full above ``diskUsageThreshold`` and writable again below ``diskUsageLwmThreshold``
(equal to the threshold by default); above ``diskUsageWarnThreshold`` a warning is logged. With
``readOnlyModeEnabled`` (the default) a full directory makes the bookie read-only: normal adds get
EREADONLY, recovery adds are still taken.
"""
from __future__ import annotations

import logging
import shutil
from typing import Callable

from bookie.util.periodic_thread import PeriodicThread

log = logging.getLogger(__name__)


def disk_usage(path: str) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 1.0


class LedgerDirsMonitor(PeriodicThread):
    def __init__(self, conf, dirs: list[str], on_change: Callable[[bool], None]):
        super().__init__("LedgerDirsMonitor", conf["diskCheckInterval"] / 1000.0)
        self.conf = conf
        self.dirs = dirs
        self.full: set[str] = set()
        self._on_change = on_change

    @property
    def any_full(self) -> bool:
        return bool(self.full)

    def check(self) -> bool:
        """Check every directory now; returns True when any is full."""
        threshold, lwm = self.conf["diskUsageThreshold"], self.conf.disk_lwm_threshold
        before = self.any_full
        for d in self.dirs:
            usage = disk_usage(d)
            if d in self.full:
                if usage < lwm:
                    self.full.discard(d)
                    log.info("ledger dir %s is writable again (usage %.3f < %.3f)", d, usage, lwm)
            elif usage > threshold:
                self.full.add(d)
                log.warning("ledger dir %s is full (usage %.3f > diskUsageThreshold %.3f)", d, usage, threshold)
            elif usage > self.conf["diskUsageWarnThreshold"]:
                log.warning("ledger dir %s usage %.3f is above diskUsageWarnThreshold", d, usage)
        if self.any_full != before:
            self._on_change(self.any_full)
        return self.any_full

    def run_once(self) -> None:
        self.check()
