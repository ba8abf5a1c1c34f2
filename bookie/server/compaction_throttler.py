"""How fast compaction may copy (BookKeeper's AbstractLogCompactor.Throttler): ``compactionRateByEntries``
entries/s, or ``compactionRateByBytes`` bytes/s with ``isThrottleByBytes``."""
from __future__ import annotations

import time
from typing import Callable


class Throttler:
    """Token bucket over entries/s, or bytes/s with ``isThrottleByBytes`` (AbstractLogCompactor.Throttler).

    ``acquire(entries, nbytes)`` takes the copy's cost and blocks until the rate allows it. The bucket
    holds at most one second of budget, so an idle compactor does not earn a burst.
    """

    def __init__(self, by_bytes: bool, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if rate <= 0:
            raise ValueError(f"compaction rate must be positive, got {rate}")
        self.by_bytes = by_bytes
        self.rate = float(rate)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.rate
        self._last = clock()

    @classmethod
    def from_conf(cls, conf, **kwargs) -> "Throttler":
        by_bytes = conf["isThrottleByBytes"]
        return cls(by_bytes, conf["compactionRateByBytes"] if by_bytes else conf["compactionRateByEntries"], **kwargs)

    def wait_time(self, cost: float) -> float:
        """Seconds ``cost`` must wait (0 if the bucket holds it); takes the cost from the bucket."""
        now = self._clock()
        self._tokens = min(self.rate, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= cost
        return -self._tokens / self.rate if self._tokens < 0 else 0.0

    def acquire(self, entries: int, nbytes: int) -> None:
        delay = self.wait_time(nbytes if self.by_bytes else entries)
        if delay > 0:
            self._sleep(delay)
