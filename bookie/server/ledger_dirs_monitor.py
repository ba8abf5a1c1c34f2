"""LedgerDirsMonitor: turns the bookie read-only when a ledger disk fills, writable when it drains.

A directory is full above ``diskUsageThreshold`` and writable again below ``diskUsageLwmThreshold``
(equal to the threshold by default); above ``diskUsageWarnThreshold`` a warning is logged. With
``readOnlyModeEnabled`` (the default) a full directory makes the bookie read-only: normal adds get
EREADONLY, recovery adds are still taken.

Gauges (LedgerDirsManager's, under ``bookie_ledger``): ``writable_dirs``, ``num_dirs`` and each directory's
``dir_<path>_usage`` (percent), from the last check: a scrape reads no disk.
"""
from __future__ import annotations

import logging
import shutil
from typing import Callable

from bookie.server.bookkeeper_server_stats import LD_NUM_DIRS, LD_WRITABLE_DIRS, dir_usage_name
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger
from bookie.util.periodic_thread import PeriodicThread

log = logging.getLogger(__name__)


def disk_usage(path: str) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 1.0


class LedgerDirsMonitor(PeriodicThread):
    def __init__(self, conf, dirs: list[str], on_change: Callable[[bool], None],
                 stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the ledger directories' scope (``bookie_ledger``)."""
        super().__init__("LedgerDirsMonitor", conf["diskCheckInterval"] / 1000.0)
        self.conf = conf
        self.dirs = dirs
        self.full: set[str] = set()
        self.usages: dict[str, float] = dict.fromkeys(dirs, 0.0)  # from the last check, 0..1
        self._on_change = on_change
        for d in dirs:
            stats_logger.register_gauge(dir_usage_name(d), lambda d=d: self.usages[d] * 100)
        stats_logger.register_gauge(LD_WRITABLE_DIRS, lambda: len(self.dirs) - len(self.full))
        stats_logger.register_gauge(LD_NUM_DIRS, lambda: len(self.dirs))

    @property
    def any_full(self) -> bool:
        return bool(self.full)

    def check(self) -> bool:
        """Check every directory now; returns True when any is full."""
        threshold, lwm = self.conf["diskUsageThreshold"], self.conf.disk_lwm_threshold
        before = self.any_full
        for d in self.dirs:
            usage = self.usages[d] = disk_usage(d)
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
