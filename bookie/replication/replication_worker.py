"""The replication worker (BookKeeper's ReplicationWorker): takes marked ledgers one at a time and brings
them back to full replication.

One round (``rereplicate``): lock a marked ledger (LedgerUnderreplicationManager), open it without
recovery, find its under-replicated fragments (LedgerChecker), copy each closed one
(LedgerFragmentReplicator), check the ledger again on its new metadata, and mark it replicated only if
nothing is left (otherwise it is released as after a failure). Beyond the copy:

- an open last fragment with a missing bookie: the lock is kept for ``openLedgerRereplicationGracePeriod``
  (the writer may still replace the bookie itself); if it is still missing then, the ledger is opened
  with recovery (fence + close) and its now closed fragment is copied in the next round;
- a failure releases the ledger after a backoff that doubles per failure of that ledger, up to
  ``lockReleaseOfFailedLedgerGracePeriod``; its state says why and when it is tried next;
- a ledger deleted meanwhile, or with nothing under-replicated (an empty ledger included), is marked
  replicated;
- entries on no surviving replica: the state says "unrecoverable" (entries X..Y and why), reported
  once; the ledger stays marked and this worker skips it from then on (BookKeeper #4872 retried it in
  a loop).

ZooKeeper round trips per ledger are about BookKeeper's ReplicationWorker's: the metadata is read once (the
handles are opened on it, and the check after the copy runs on the metadata the copy wrote), bookies are
judged by the client's watched registrations, the state node is written when a copy starts and then at
most once per PROGRESS_INTERVAL, and AutoRecovery's switch is looked at once per ledger (by the manager).

Metrics (ReplicationStats, under ``replication_worker``): ``rereplicate`` per ledger worked on (successful when
it is fully replicated after the round), NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED, the deferred releases of failed
ledgers, ``exceptions_<class>`` per failed round, and the copies' (LedgerFragmentReplicator) entries and bytes.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from bookie.client.ledger_checker import LedgerChecker
from bookie.client.ledger_fragment_replicator import LedgerFragmentReplicator, Progress
from bookie.exceptions import (BKException, BKMetadataVersionException, BKNoSuchLedgerExistsException,
                               BKReplicationException, BKUnrecoverableEntriesException)
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.ledger_underreplication_manager import (COPYING, FAILED, UNRECOVERABLE, WAITING_GRACE_PERIOD,
                                                         LedgerUnderreplicationManager, ReplicationState)
from bookie.meta.metadata_store import Versioned
from bookie.replication import replication_stats as names
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0  # longest block on the lock wait, so shutdown is prompt
PROGRESS_INTERVAL = 1.0  # seconds between progress updates of a ledger's state node


@dataclass(frozen=True)
class ReplicationSettings:
    """The worker's keys of ServerConfiguration (BookKeeper's names), in ms as there."""
    open_ledger_rereplication_grace_period_ms: int = 30000
    lock_release_of_failed_ledger_grace_period_ms: int = 300000
    rw_rereplicate_backoff_ms: int = 5000
    rereplication_entry_batch_size: int = 10

    @classmethod
    def of(cls, conf) -> "ReplicationSettings":
        return cls(conf["openLedgerRereplicationGracePeriod"], conf["lockReleaseOfFailedLedgerGracePeriod"],
                   conf["rwRereplicateBackoffMs"], conf["rereplicationEntryBatchSize"])


class ReplicationWorker:
    def __init__(self, bk, manager: LedgerUnderreplicationManager, settings: ReplicationSettings | None = None,
                 worker_id: str = "", stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the worker's scope (``replication_worker``)."""
        self.bk = bk
        self.manager = manager
        self.settings = settings or ReplicationSettings()
        self.worker_id = worker_id or manager.worker_id
        self.checker = LedgerChecker(bk)
        self.replicator = LedgerFragmentReplicator(bk, self.settings.rereplication_entry_batch_size,
                                                   stats_logger=stats_logger)
        self._rereplicate_stats = stats_logger.get_op_stats_logger(names.REREPLICATE_OP)
        self._ledgers_replicated = stats_logger.get_counter(names.NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED)
        self._deferred_releases = stats_logger.get_counter(names.NUM_DEFER_LEDGER_LOCK_RELEASE_OF_FAILED_LEDGER)
        self._exceptions = stats_logger.scope(names.REPLICATE_EXCEPTION)  # a counter per exception class
        self._failures: dict[LedgerId, int] = {}  # ledger -> failed rounds in a row (backoff exponent)
        self._unrecoverable: set[LedgerId] = set()  # reported once; skipped from then on
        self._judged_unrecoverable: set[LedgerId] = set()  # reported by another worker: skipped too
        self._grace_started: dict[LedgerId, float] = {}  # ledger -> when its open fragment was first found missing
        self._timers: dict[LedgerId, threading.Timer] = {}
        self._timers_lock = threading.Lock()
        self._next_progress = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- life cycle ----------------------------------------------------------------------------------
    def start(self) -> "ReplicationWorker":
        self._thread = threading.Thread(target=self._run, name=f"ReplicationWorker-{self.worker_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Tell the worker thread to end after the ledger in hand (``shutdown`` waits for it)."""
        self._stop.set()

    def shutdown(self) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join()
        with self._timers_lock:
            timers, self._timers = list(self._timers.items()), {}
        for ledger, timer in timers:
            timer.cancel()
            self.manager.release_underreplicated_ledger(ledger)

    @property
    def unrecoverable(self) -> set[LedgerId]:
        return set(self._unrecoverable)

    def _run(self) -> None:
        idle = True
        while not self._stop.is_set():
            try:
                # After a ledger, straight on: the manager looks at the switch before each lock anyway.
                if idle and not self.manager.wait_until_enabled(POLL_SECONDS):
                    continue
                idle = self.rereplicate_one(POLL_SECONDS) is None
            except Exception:  # noqa: BLE001 - the worker outlives any one error (rwRereplicateBackoffMs)
                idle = True
                if self._stop.is_set():  # stopping: the session was closed under the round
                    break
                log.exception("replication worker %s: round failed", self.worker_id)
                self._stop.wait(self.settings.rw_rereplicate_backoff_ms / 1000.0)

    def _skip(self, ledger: LedgerId) -> bool:
        """Unrecoverable ledgers: reported once (by whichever worker found it), never retried in a loop.
        Asked before the lock attempt (what this worker knows) and under the lock (the state node: a verdict
        another worker may have recorded)."""
        if ledger in self._unrecoverable or ledger in self._judged_unrecoverable:
            return True
        if not self.manager.holds(ledger):
            return False  # before the lock: a read per marked ledger walked past would cost more than the lock
        state = self.manager.get_state(ledger)
        if state is not None and state.state == UNRECOVERABLE:
            self._judged_unrecoverable.add(ledger)
            return True
        return False

    # -- one round -----------------------------------------------------------------------------------
    def rereplicate_one(self, timeout: float | None = None) -> LedgerId | None:
        """Lock one marked ledger and work on it; the ledger, or None if none could be locked."""
        ledger = self.manager.get_ledger_to_rereplicate(timeout, skip=self._skip)
        if ledger is None:
            return None
        started = time.monotonic()
        try:
            done = self._rereplicate(ledger)
        except BKException as exc:
            self._rereplicate_stats.register_failed_event(time.monotonic() - started)
            self._exceptions.get_counter(type(exc).__name__).inc()
            self._round_failed(ledger, exc)
            return ledger
        (self._rereplicate_stats.register_successful_event if done else
         self._rereplicate_stats.register_failed_event)(time.monotonic() - started)
        if done:
            self._failures.pop(ledger, None)
            self._grace_started.pop(ledger, None)
            self.manager.mark_ledger_replicated(ledger)
            log.info("ledger %s is fully replicated again", ledger)
        return ledger

    def _round_failed(self, ledger: LedgerId, exc: BKException) -> None:
        if isinstance(exc, BKUnrecoverableEntriesException):
            self._report_unrecoverable(ledger, exc)
        elif isinstance(exc, BKMetadataVersionException):  # the ledger changed under us: check it afresh, no backoff
            log.info("ledger %s changed while it was re-replicated (%s); checking it again", ledger, exc)
            self.manager.clear_state(ledger)  # its "copying" no longer holds
            self.manager.release_underreplicated_ledger(ledger)
        else:
            self._failed(ledger, exc)

    def _rereplicate(self, ledger: LedgerId) -> bool:
        """True when nothing of the ledger is under-replicated any more (or it is gone); False when it is
        held for the grace period or left for the next round."""
        try:
            versioned = self.bk.store.read_ledger(ledger)
            handle = self.bk.open_ledger(ledger, versioned.value.password, recovery=False, versioned=versioned)
        except BKNoSuchLedgerExistsException:
            log.info("ledger %s was deleted; nothing to re-replicate", ledger)
            return True
        fragments = self.checker.check_ledger(handle)
        closed = sorted((f for f in fragments if f.closed), key=lambda f: f.first)
        for fragment in closed:
            self._set_state(ledger, COPYING, f"copying {fragment}", fragment=f"{fragment.first}..{fragment.last}",
                            progress=0.0)
            self._next_progress = time.monotonic() + PROGRESS_INTERVAL
            self.replicator.on_progress = lambda p: self._progress(ledger, p)
            versioned = self.replicator.replicate(handle, fragment)
        if closed:
            self._ledgers_replicated.inc()
        if any(not f.closed for f in fragments):
            return self._open_fragment(ledger, handle)
        if closed:
            self._check_again(ledger, versioned)
        return True

    def _check_again(self, ledger: LedgerId, versioned: Versioned[LedgerMetadata]) -> None:
        """After the copies, the ledger is checked again on the metadata the last copy wrote (BookKeeper's
        ReplicationWorker checks its handle's updated metadata): a replacement that died right after
        acknowledging its copy leaves the ledger marked, for a later round, instead of being missed until
        the next audit. Each copy's update applied its change to the then current metadata, so this is the
        ledger as it is under our lock."""
        handle = self.bk.open_ledger(ledger, versioned.value.password, recovery=False, versioned=versioned)
        left = self.checker.check_ledger(handle)
        if left:
            raise BKReplicationException(f"ledger {ledger} is still under-replicated after its copy: "
                                         + "; ".join(str(f) for f in sorted(left, key=lambda f: f.first)))

    def _open_fragment(self, ledger: LedgerId, handle) -> bool:
        """An open last fragment misses a bookie: hold the lock through the grace period (the writer may
        replace the bookie itself), then fence and close the ledger and copy next round."""
        grace = self.settings.open_ledger_rereplication_grace_period_ms / 1000.0
        started = self._grace_started.setdefault(ledger, time.monotonic())
        remaining = started + grace - time.monotonic()
        if remaining > 0:
            self._set_state(ledger, WAITING_GRACE_PERIOD,
                            f"the last fragment is open and misses a bookie; its writer has {grace:.0f} s to "
                            "replace it before the ledger is fenced", until_ms=int((time.time() + remaining) * 1000))
            self._release_later(ledger, remaining)
            return False
        self._grace_started.pop(ledger, None)
        log.info("ledger %s: open past the grace period with a missing bookie; fencing and closing it", ledger)
        self.bk.open_ledger(ledger, handle.metadata.password, recovery=True)
        self.manager.release_underreplicated_ledger(ledger)  # closed now: copied in the next round
        return False

    def _release_later(self, ledger: LedgerId, delay: float) -> None:
        """Keep the lock ``delay`` seconds more, then release it (BookKeeper's deferLedgerLockRelease)."""
        def release() -> None:
            with self._timers_lock:
                self._timers.pop(ledger, None)
            self.manager.release_underreplicated_ledger(ledger)

        timer = threading.Timer(delay, release)
        timer.daemon = True
        with self._timers_lock:
            self._timers[ledger] = timer
        timer.start()

    def _failed(self, ledger: LedgerId, exc: BKException) -> None:
        failures = self._failures[ledger] = self._failures.get(ledger, 0) + 1
        base = self.settings.rw_rereplicate_backoff_ms / 1000.0
        backoff = min(base * 2 ** (failures - 1), self.settings.lock_release_of_failed_ledger_grace_period_ms / 1000.0)
        log.warning("ledger %s: re-replication failed (%s); released in %.1f s", ledger, exc, backoff)
        self._deferred_releases.inc()
        self._set_state(ledger, FAILED, str(exc), attempts=failures,
                        next_try=int((time.time() + backoff) * 1000))
        self._release_later(ledger, backoff)

    def _report_unrecoverable(self, ledger: LedgerId, exc: BKUnrecoverableEntriesException) -> None:
        self._unrecoverable.add(ledger)
        log.error("ledger %s cannot be re-replicated: %s", ledger, exc)
        self._set_state(ledger, UNRECOVERABLE, str(exc), first=exc.first, last=exc.last)
        self.manager.release_underreplicated_ledger(ledger)

    def _progress(self, ledger: LedgerId, progress: Progress) -> None:
        now = time.monotonic()
        if now < self._next_progress or progress.entries >= progress.expected:
            return  # a ZooKeeper write per window would cost more than the copy of small windows; done: said by
            # the marking (or the next fragment's "copying")
        self._next_progress = now + PROGRESS_INTERVAL
        f = progress.fragment
        self._set_state(ledger, COPYING, f"copying {f}", fragment=f"{f.first}..{f.last}",
                        **{"from": ",".join(progress.targets), "to": ",".join(progress.targets.values())},
                        entries=progress.entries, bytes=progress.bytes,
                        progress=round(progress.entries / progress.expected, 3) if progress.expected else 1.0)

    def _set_state(self, ledger: LedgerId, state: str, reason: str, **details) -> None:
        try:
            self.manager.set_state(ledger, ReplicationState(state, reason, details, self.worker_id))
        except BKException:
            log.warning("ledger %s: could not record its state %s", ledger, state, exc_info=True)
