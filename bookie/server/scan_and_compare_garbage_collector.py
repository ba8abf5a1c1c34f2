"""Which of this bookie's ledgers are gone from the metadata store (BookKeeper's ScanAndCompareGarbageCollector).

1. Snapshot the ledgers stored here (in memory and index files) BEFORE listing the metadata. A client
   creates a ledger's znode before any entry reaches a bookie, so every ledger in the snapshot had its
   znode before the listing began: absent from the listing means deleted. A ledger created during the
   scan is not in the snapshot, so it is never judged.
2. ``sync`` the metadata root, so the ZooKeeper server the listing reads from is not behind the one
   that saw the create (ZooKeeper serves reads from a possibly lagging follower).
3. Walk the ledger ranges in id order (one getChildren per leaf, LedgerRangeIterator): a stored
   ledger with an id in ``(previous range end, range end]`` and not in the range's listing is garbage;
   past the last range, every stored ledger of the scope is compared too (BookKeeper does the same).
   Any error (ConnectionLoss, timeout, a failed listing) aborts the whole comparison: nothing is
   deleted on a partial listing.
4. ``verifyMetadataOnGC``: each candidate is read again and deleted only on "no such ledger".
5. Every ``gcOverreplicatedLedgerWaitTime`` (0: never), over-replicated ledgers (BookKeeper's
   removeOverReplicatedLedgers): a CLOSED ledger whose ensembles never include this bookie (a replicator
   copied its share elsewhere), neither marked under-replicated nor locked, is a candidate. The caller
   deletes a candidate only inside ``overreplicated_locked``: it takes the ledger's under-replication
   lock (the one every replicator holds from its copy to its ensemble update), reads the metadata again
   under it, keeps the lock while the ledger is deleted, then releases it. A replicator that is copying
   to this bookie, or that finished between the first read and the lock, is never undone.

The deletion itself is the caller's (``clean``): it checkpoints first, then deletes (see
GarbageCollectorThread).
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from bookie.exceptions import BKException, BKNoSuchLedgerExistsOnMetadataServerException
from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.metadata_store import MetadataStore

log = logging.getLogger(__name__)


class RateLimiter:
    """At most ``rate`` acquisitions per second (gcMetadataOpRateLimit); ``stop`` ends any wait."""

    def __init__(self, rate: int, stop: threading.Event | None = None):
        self.interval = 1.0 / rate
        self._next = time.monotonic()
        self._stop = stop or threading.Event()

    def acquire(self) -> None:
        now = time.monotonic()
        if self._next > now:
            self._stop.wait(self._next - now)
        self._next = max(now, self._next) + self.interval


@dataclass
class LedgerScan:
    """The outcome of one comparison."""
    garbage: list[LedgerId] = field(default_factory=list)
    overreplicated: list[LedgerId] = field(default_factory=list)  # candidates: see overreplicated_locked
    local: int = 0  # ledgers in the local snapshot
    ranges: int = 0  # metadata ranges listed
    aborted: str | None = None  # why nothing may be deleted this pass


class ScanAndCompareGarbageCollector:
    def __init__(self, store: MetadataStore, local_ledgers: Callable[[], Iterable[LedgerId]], bookie_id: str, conf,
                 stop: threading.Event | None = None, after_snapshot: Callable[[], None] | None = None):
        self.store = store
        self.local_ledgers = local_ledgers
        self.bookie_id = bookie_id
        self.verify_metadata = conf["verifyMetadataOnGC"]
        self.overreplicated_interval = conf["gcOverreplicatedLedgerWaitTime"] / 1000.0
        self.limiter = RateLimiter(conf["gcMetadataOpRateLimit"], stop)
        self.after_snapshot = after_snapshot  # tests hold the scan here (a callable: no setting trips it)
        self._last_overreplicated = time.monotonic()
        self._replication: LedgerUnderreplicationManager | None = None  # made when first needed

    def find_garbage(self) -> LedgerScan:
        """Ledgers stored here that the metadata no longer has (and over-replicated ones, when due)."""
        local = sorted(self.local_ledgers())
        scan = LedgerScan(local=len(local))
        if self.after_snapshot is not None:
            self.after_snapshot()
        if not local:
            return scan
        by_scope: dict[int, list[int]] = {}
        for scope, lid in local:
            by_scope.setdefault(scope, []).append(lid)
        present: list[LedgerId] = []
        try:
            self.store.sync()
            for scope, ids in by_scope.items():
                gone, kept, scan.ranges = self._compare_scope(scope, ids, scan.ranges)
                scan.garbage += (LedgerId(scope, i) for i in gone)
                present += (LedgerId(scope, i) for i in kept)
            if self.verify_metadata:
                scan.garbage = [ledger for ledger in scan.garbage if self._confirmed_gone(ledger)]
        except BKException as exc:
            scan.garbage = []
            scan.aborted = f"metadata listing failed, no ledger deleted this pass: {exc}"
            log.warning("GC: %s", scan.aborted)
            return scan
        # 0 or less turns the check off, as in BookKeeper (enabled only for a positive interval).
        if self.overreplicated_interval > 0 and \
                time.monotonic() - self._last_overreplicated >= self.overreplicated_interval:
            scan.overreplicated = self._overreplicated(present)
            self._last_overreplicated = time.monotonic()
        return scan

    def _compare_scope(self, scope: int, ids: list[int], ranges: int) -> tuple[list[int], list[int], int]:
        """(stored ids the metadata lacks, stored ids it has, ranges listed so far) for one scope."""
        gone: list[int] = []
        kept: list[int] = []
        i, n = 0, len(ids)
        for ledger_range in self.store.ledger_ranges(scope):
            ranges += 1
            while i < n and ids[i] <= ledger_range.end:
                (kept if ids[i] in ledger_range.ledgers else gone).append(ids[i])
                i += 1
        gone += ids[i:]  # past the last range: no ledger of the scope has these ids
        return gone, kept, ranges

    def _confirmed_gone(self, ledger: LedgerId) -> bool:
        """verifyMetadataOnGC: only "no such ledger" confirms; any other error raises (the pass aborts)."""
        self.limiter.acquire()
        try:
            self.store.read_ledger(ledger)
        except BKNoSuchLedgerExistsOnMetadataServerException:
            return True
        log.info("GC: ledger %s is in the metadata after all (verifyMetadataOnGC): kept", ledger)
        return False

    def _overreplicated(self, present: list[LedgerId]) -> list[LedgerId]:
        """Candidates: CLOSED ledgers whose ensembles never include this bookie, neither marked nor
        locked when looked at. A failed read skips that ledger."""
        found = []
        for ledger in present:
            self.limiter.acquire()
            try:
                if not self._not_in_ensembles(self.store.read_ledger(ledger).value):
                    continue
                if self._being_replicated(ledger):
                    log.info("GC: over-replicated ledger %s is under replication: kept for now", ledger)
                    continue
            except BKException as exc:
                log.warning("GC: over-replication check of ledger %s failed, kept: %s", ledger, exc)
                continue
            found.append(ledger)
        return found

    @contextlib.contextmanager
    def overreplicated_locked(self, candidates: list[LedgerId]) -> Iterator[list[LedgerId]]:
        """The candidates still over-replicated, each under its under-replication lock, read again under
        it; the locks are released when the block (the deletion) ends."""
        locked: list[LedgerId] = []
        try:
            for ledger in candidates:
                if self._lock_if_still_overreplicated(ledger):
                    locked.append(ledger)
            yield list(locked)
        finally:
            for ledger in locked:
                self._release(ledger)

    def _release(self, ledger: LedgerId) -> None:
        try:
            self._replication.release_underreplicated_ledger(ledger)
        except BKException as exc:  # the lock is ephemeral: it goes with this bookie's session
            log.warning("GC: releasing the lock of ledger %s failed: %s", ledger, exc)

    def _lock_if_still_overreplicated(self, ledger: LedgerId) -> bool:
        try:
            if self._replication is None:
                self._replication = LedgerUnderreplicationManager(self.store, self.bookie_id)
            if not self._replication.acquire_underreplicated_ledger(ledger):
                log.info("GC: over-replicated ledger %s is locked by a replicator: kept for now", ledger)
                return False
        except BKException as exc:
            log.warning("GC: could not lock over-replicated ledger %s, kept: %s", ledger, exc)
            return False
        try:
            self.limiter.acquire()
            if self._not_in_ensembles(self.store.read_ledger(ledger).value) and not self._being_marked(ledger):
                log.info("GC: ledger %s is CLOSED and no ensemble includes %s: over-replicated, deleted here",
                         ledger, self.bookie_id)
                return True
            log.info("GC: ledger %s changed before it was locked (now %s): kept", ledger,
                     "marked under-replicated" if self._being_marked(ledger) else "in an ensemble of this bookie")
        except BKException as exc:
            log.warning("GC: over-replication check of ledger %s under its lock failed, kept: %s", ledger, exc)
        self._release(ledger)
        return False

    def _not_in_ensembles(self, metadata: LedgerMetadata) -> bool:
        """CLOSED (an open ledger's ensembles may still change) and no ensemble names this bookie."""
        return metadata.is_closed and not any(self.bookie_id in bookies for _, bookies in metadata.ensembles)

    def _being_marked(self, ledger: LedgerId) -> bool:
        return self.store.read_node(layout.under_replicated_ledger_path(ledger)) is not None

    def _being_replicated(self, ledger: LedgerId) -> bool:
        return self._being_marked(ledger) or \
            self.store.read_node(layout.under_replication_lock_path(ledger)) is not None
