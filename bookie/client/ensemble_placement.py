"""Choosing bookies (DefaultEnsemblePlacementPolicy): random writable bookies, never read-only ones;
and which bookies to avoid while others will do (BookieWatcherImpl's quarantine)."""
from __future__ import annotations

import logging
import random
import threading
import time

from bookie.exceptions import BKNotEnoughBookiesException

log = logging.getLogger(__name__)


def new_ensemble(writable: list[str], ensemble_size: int, exclude: set[str] = frozenset()) -> list[str]:
    candidates = [b for b in writable if b not in exclude]
    if len(candidates) < ensemble_size:
        raise BKNotEnoughBookiesException(
            f"need {ensemble_size} writable bookies, {len(candidates)} available ({', '.join(sorted(candidates)) or 'none'}"
            + (f"; excluded {', '.join(sorted(exclude))}" if exclude else "") + ")")
    return random.sample(candidates, ensemble_size)


def replace_bookie(writable: list[str], ensemble: list[str], failed: set[str]) -> str:
    """A writable bookie to take a failed one's place: not in the ensemble, not failed."""
    return new_ensemble(writable, 1, exclude=set(ensemble) | failed)[0]


def replace_bookies(writable: list[str], ensemble: list[str], failed: set[int], avoid: set[str],
                    exclude: set[str] = frozenset()) -> list[str]:
    """``ensemble`` with the bookies at indexes ``failed`` replaced; a bookie in ``avoid`` (quarantined)
    only if nothing else will do, one in ``exclude`` (it failed this writer already) never."""
    new = list(ensemble)
    dead = {ensemble[j] for j in failed} | set(exclude)
    for i in sorted(failed):
        try:
            new[i] = replace_bookie(writable, new, dead | avoid)
        except BKNotEnoughBookiesException:
            new[i] = replace_bookie(writable, new, dead)
    return new


class BookieQuarantine:
    """The bookies a client's new ensembles and replacements avoid while others will do
    (BookieWatcherImpl.quarantineBookie): one that failed within ``bookieFailureHistoryExpirationMSec``
    (with ``enableBookieFailureTracking``), and one quarantined — ``bookieErrorThresholdPerInterval``
    errors within one ``bookieHealthCheckIntervalSeconds`` quarantine it for ``bookieQuarantineTimeSeconds``.
    Thread-safe."""

    def __init__(self, conf, clock=time.monotonic):
        self.conf = conf
        self.clock = clock
        self._lock = threading.Lock()
        self._last_failure: dict[str, float] = {}
        self._errors: dict[str, tuple[float, int]] = {}  # bookie -> (start of its interval, errors in it)
        self._quarantined: dict[str, float] = {}  # bookie -> until

    def failed(self, bookie: str) -> None:
        """``bookie`` failed a request (an add or a read: an error or no answer in time)."""
        conf, now = self.conf, self.clock()
        with self._lock:
            if conf.enableBookieFailureTracking:
                self._last_failure[bookie] = now
            start, count = self._errors.get(bookie, (now, 0))
            if now - start >= conf.bookieHealthCheckIntervalSeconds:
                start, count = now, 0
            count += 1
            self._errors[bookie] = (start, count)
            if count >= conf.bookieErrorThresholdPerInterval and bookie not in self._quarantined:
                self._quarantined[bookie] = now + conf.bookieQuarantineTimeSeconds
                self._errors.pop(bookie)
                log.warning("bookie %s is quarantined for %d s: %d errors within %d s", bookie,
                            conf.bookieQuarantineTimeSeconds, count, conf.bookieHealthCheckIntervalSeconds)

    def avoid(self) -> set[str]:
        """Bookies that failed recently or are quarantined, now."""
        now = self.clock()
        recent = now - self.conf.bookieFailureHistoryExpirationMSec / 1000.0
        with self._lock:
            for bookie in [b for b, at in self._last_failure.items() if at <= recent]:
                del self._last_failure[bookie]
            for bookie in [b for b, until in self._quarantined.items() if until <= now]:
                del self._quarantined[bookie]
            return set(self._last_failure) | set(self._quarantined)
