"""When an idle writer tells its bookies the LAC (ExplicitLacFlushPolicy).

Every entry carries the LAC of its time, so a tailing reader learns that the last entries are
acknowledged only from the next add. A writer that has added nothing for ``explicitLacInterval``
seconds, with nothing pending and a LAC past the last one it sent, sends it explicitly (WriteLac).

Not thread-safe: the ledger handle's lock guards it; the client's timer asks it.
"""
from __future__ import annotations

import time


class ExplicitLacFlushPolicy:
    def __init__(self, interval: float, last_add_confirmed: int):
        self.interval = interval  # seconds; 0 = never
        self._lac_sent = last_add_confirmed
        self._last_add_time = time.monotonic()

    def add_sent(self, now: float) -> None:
        """The writer added entries (they carry the LAC of ``now``)."""
        self._last_add_time = now

    def flush_due(self, now: float, last_add_confirmed: int, adds_pending: bool) -> bool:
        """Whether to send ``last_add_confirmed`` now; if so, it counts as sent."""
        if (not self.interval or adds_pending or last_add_confirmed <= self._lac_sent
                or now - self._last_add_time < self.interval):
            return False
        self._lac_sent = last_add_confirmed
        return True
