"""The auditor (BookKeeper's Auditor): finds the ledgers that lost replicas and marks them under-replicated.

Only the elected auditor runs one (bookie.replication.auditor_elector). It watches the bookie registrations;
a bookie referenced by some ledger's metadata and registered neither writable nor read-only is *lost*.
``lostBookieRecoveryDelay`` seconds (read from ZooKeeper each time, so ``bk shell lostbookierecoverydelay
-set`` applies at once; 0 = at once) after a bookie is first seen lost, every ledger with a fragment on it
is marked with it as a missing replica (AuditorBookieCheckTask). A bookie back within the delay is no
longer lost: nothing is marked for it. While AutoRecovery is disabled nothing is marked; the audit runs
when it is enabled again. Any change of the delay node (``triggeraudit`` rewrites it) audits every lost
bookie at once, as BookKeeper's auditor does.

Periodic checks: ``auditorPeriodicBookieCheckInterval`` the same audit; ``auditorReplicasCheckInterval``
compares each bookie's list of entries (GetListOfEntriesOfLedger) with the striping of closed ledgers and,
unlike BookKeeper (metrics only), marks the ledgers where a bookie lacks entries it should hold;
``auditorPeriodicCheckInterval`` checks every ledger (BookKeeper's checkAllLedgers): one pipelined metadata
read per ledger, then each is checked by LedgerChecker on that metadata (many at once; a closed ledger without
entries by its bookies' registrations alone) and its bad bookies are marked as its missing replicas. Both write
their ctime in ZooKeeper and, as BookKeeper's auditor, start from it: a check that ran less than an
interval ago (by any auditor) first runs when that interval is over; one never run, at once.

Metrics (AuditorStats, under ``auditor``): the time of each audit and check, what each marking published
(NUM_UNDER_REPLICATED_LEDGERS and their total size, per marking), and from the last replicas check the
ledgers with an entry on no replica, on fewer than AQ, on fewer than WQ bookies.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from bookie.client.distribution_schedule import stores
from bookie.client.entry_probes import EntryProbes
from bookie.client.ledger_checker import LedgerChecker, LedgerFragment, unregistered_fragments
from bookie.exceptions import BKException, BKNoSuchLedgerExistsOnMetadataServerException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.ledger_underreplication_manager import (DISABLE_PATH, WAITING_RECOVERY_DELAY,
                                                         LedgerUnderreplicationManager, ReplicationState)
from bookie.meta.metadata_store import MetadataStore, Versioned
from bookie.proto import availability
from bookie.replication import replication_stats as names
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger

log = logging.getLogger(__name__)

ERROR_BACKOFF_SECONDS = 5.0  # rwRereplicateBackoffMs's role for the auditor: ZooKeeper failed, try again
# auditorMaxNumberOfConcurrentOpenLedgerOperations (BookKeeper's default): ledgers checked at once by checkAllLedgers
MAX_CONCURRENT_OPEN_LEDGER_OPERATIONS = 500
OPEN_LEDGER_THREADS = 8  # open ledgers: their handles ask the bookies for the LAC, a blocking call each


# -- the audit as pure functions ----------------------------------------------------------------------
def bookie_ledger_index(ledgers: Iterable[tuple[LedgerId, LedgerMetadata]]) -> dict[str, set[LedgerId]]:
    """bookie -> the ledgers with a fragment on it (BookKeeper's BookieLedgerIndexer)."""
    index: dict[str, set[LedgerId]] = defaultdict(set)
    for ledger, metadata in ledgers:
        for _, bookies in metadata.ensembles:
            for bookie in bookies:
                index[bookie].add(ledger)
    return dict(index)


def lost_bookies(index: dict[str, set[LedgerId]], writable: Iterable[str], read_only: Iterable[str]) -> set[str]:
    """Bookies that ledgers reference and that are registered neither writable nor read-only."""
    return set(index) - set(writable) - set(read_only)


def ledgers_to_mark(index: dict[str, set[LedgerId]], lost: Iterable[str]) -> dict[LedgerId, set[str]]:
    """ledger -> its missing replicas among ``lost``."""
    marks: dict[LedgerId, set[str]] = defaultdict(set)
    for bookie in lost:
        for ledger in index.get(bookie, ()):
            marks[ledger].add(bookie)
    return dict(marks)


def expected_entries(metadata: LedgerMetadata, bookie: str) -> set[int]:
    """The entries ``bookie`` must hold by the striping of a closed ledger's fragments."""
    expected: set[int] = set()
    for first, last, ensemble in metadata.fragments():
        for index, member in enumerate(ensemble):
            if member == bookie:
                expected.update(e for e in range(first, last + 1)
                                if stores(index, e, metadata.ensemble_size, metadata.write_quorum_size))
    return expected


def _remember_lengths(ledgers: Iterable[tuple[LedgerId, LedgerMetadata]],
                      lengths: dict[LedgerId, int]) -> Iterator[tuple[LedgerId, LedgerMetadata]]:
    """``ledgers`` as they are, each one's length kept in ``lengths`` on the way."""
    for ledger, metadata in ledgers:
        lengths[ledger] = metadata.length
        yield ledger, metadata


def first_run(interval_s: int, last_ctime_ms: int, now_ms: int, now: float) -> float | None:
    """When (monotonic) a periodic check first runs, given when any auditor last ran it (-1: never):
    once ``interval_s`` is over since then, at once if it is or if it never ran (as BookKeeper's
    Auditor schedules it); None if the check is off."""
    if interval_s <= 0:
        return None
    if last_ctime_ms < 0:
        return now
    since_ms = max(0, now_ms - last_ctime_ms)  # a clock behind the writer's: as if it just ran
    return now + max(0.0, interval_s - since_ms / 1000.0)


def recovery_due(lost_since: dict[str, float], delay_s: float, now: float) -> tuple[set[str], float | None]:
    """The lost bookies whose delay has run out, and when the next one's does (None if no other waits)."""
    due = {b for b, since in lost_since.items() if now - since >= delay_s}
    waiting = [since + delay_s for b, since in lost_since.items() if b not in due]
    return due, min(waiting) if waiting else None


def replica_shortfall(missing_per_entry: Counter, write_quorum: int, ack_quorum: int) -> str | None:
    """How short of replicas a ledger's worst entry is, given how many bookies of its write set lack each
    entry: "no replica", "less than AQ", "less than WQ" (AuditorReplicasCheckTask's classes), None if none lacks."""
    if not missing_per_entry:
        return None
    replicas = write_quorum - max(missing_per_entry.values())
    return "no replica" if replicas <= 0 else "less than AQ" if replicas < ack_quorum else "less than WQ"


class AuditorStats:
    """The auditor's metrics (AuditorStats). One per AutoRecovery participant, kept across its terms as the
    auditor: gauges are registered once and read what the current auditor last found."""

    def __init__(self, stats_logger: StatsLogger = NULL_STATS_LOGGER):
        op, counter = stats_logger.get_op_stats_logger, stats_logger.get_counter
        self.num_under_replicated_ledgers = op(names.NUM_UNDER_REPLICATED_LEDGERS)  # per marking: a value
        self.under_replicated_ledgers_total_size = op(names.UNDER_REPLICATED_LEDGERS_TOTAL_SIZE)
        self.url_publish_time_for_lost_bookies = op(names.URL_PUBLISH_TIME_FOR_LOST_BOOKIE)
        self.bookie_to_ledgers_map_creation_time = op(names.BOOKIE_TO_LEDGERS_MAP_CREATION_TIME)
        self.check_all_ledgers_time = op(names.CHECK_ALL_LEDGERS_TIME)
        self.replicas_check_time = op(names.REPLICAS_CHECK_TIME)
        self.audit_bookies_time = op(names.AUDIT_BOOKIES_TIME)
        self.num_fragments_per_ledger = op(names.NUM_FRAGMENTS_PER_LEDGER)
        self.num_bookies_per_ledger = op(names.NUM_BOOKIES_PER_LEDGER)
        self.num_ledgers_checked = counter(names.NUM_LEDGERS_CHECKED)
        self.num_bookie_audits_delayed = counter(names.NUM_BOOKIE_AUDITS_DELAYED)
        self.num_delayed_bookie_audits_cancelled = counter(names.NUM_DELAYED_BOOKIE_AUDITS_DELAYES_CANCELLED)
        self.num_skipping_check_task_times = counter(names.NUM_SKIPPING_CHECK_TASK_TIMES)
        self.shortfalls: dict[str, int] = {"no replica": 0, "less than AQ": 0, "less than WQ": 0}
        for name, shortfall in ((names.NUM_LEDGERS_HAVING_NO_REPLICA_OF_AN_ENTRY, "no replica"),
                                (names.NUM_LEDGERS_HAVING_LESS_THAN_AQ_REPLICAS_OF_AN_ENTRY, "less than AQ"),
                                (names.NUM_LEDGERS_HAVING_LESS_THAN_WQ_REPLICAS_OF_AN_ENTRY, "less than WQ")):
            stats_logger.register_gauge(name, lambda k=shortfall: self.shortfalls[k])

    def published(self, ledgers: dict[LedgerId, object], lengths: dict[LedgerId, int]) -> None:
        """Ledgers marked under-replicated together (AuditorTask.publishSuspectedLedgersAsync)."""
        if ledgers:
            self.num_under_replicated_ledgers.register_successful_value(len(ledgers))
            self.under_replicated_ledgers_total_size.register_successful_value(
                sum(lengths.get(ledger, 0) for ledger in ledgers))


@dataclass
class AuditStats:
    """What the auditor did, for tools and tests."""
    audits: int = 0
    ledgers_marked: int = 0
    replicas_checks: int = 0
    ledger_checks: int = 0  # checkAllLedgers runs


class Auditor:
    """Runs the audits on one thread until ``shutdown()``. ``bookie_client(b)`` (a BookKeeper client's) is
    used by the replicas check, ``client()`` (a BookKeeper client) by the check of every ledger; without
    them those checks are off."""

    def __init__(self, bookie_id: str, store: MetadataStore, manager: LedgerUnderreplicationManager, conf,
                 bookie_client: Callable[[str], object] | None = None, client: Callable[[], object] | None = None,
                 auditor_stats: AuditorStats | None = None):
        self.bookie_id = bookie_id
        self.metrics = auditor_stats or AuditorStats()
        self.store = store
        self.manager = manager
        self.conf = conf
        self.bookie_client = bookie_client
        self.client = client
        self.stats = AuditStats()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._writable: list[str] = []
        self._read_only: list[str] = []
        self._forced = False
        self._lost_since: dict[str, float] = {}  # lost bookie -> when first seen lost (monotonic)
        self._marked: set[str] = set()  # lost bookies whose ledgers are marked
        self._delayed: set[str] = set()  # lost bookies whose marking waits for lostBookieRecoveryDelay
        self._lengths: dict[LedgerId, int] = {}  # of the ledgers in the last index: the marked ones' total size
        self._next_bookie_check = self._after(conf["auditorPeriodicBookieCheckInterval"])
        self._next_replicas_check: float | None = None  # from the ctimes in ZooKeeper, at start()
        self._next_ledger_check: float | None = None
        self._unwatch: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._run, name="Auditor", daemon=True)

    @staticmethod
    def _after(interval_s: int) -> float | None:
        return time.monotonic() + interval_s if interval_s > 0 else None

    def start(self) -> "Auditor":
        self.manager.initialize_lost_bookie_recovery_delay(self.conf["lostBookieRecoveryDelay"])
        now_ms, now = int(time.time() * 1000), time.monotonic()
        if self.bookie_client is not None:
            self._next_replicas_check = first_run(self.conf["auditorReplicasCheckInterval"],
                                                  self.manager.get_replicas_check_ctime(), now_ms, now)
        if self.client is not None:
            self._next_ledger_check = first_run(self.conf["auditorPeriodicCheckInterval"],
                                                self.manager.get_check_all_ledgers_ctime(), now_ms, now)
        self.store.watch_bookies(self._on_bookies)
        self._unwatch.append(self.manager.watch_lost_bookie_recovery_delay(self._on_delay_changed()))
        self._unwatch.append(self.store.watch_node(DISABLE_PATH, lambda node: self._wake.set()))
        self._thread.start()
        return self

    # -- events ---------------------------------------------------------------------------------------
    def _on_bookies(self, writable: list[str], read_only: list[str]) -> None:
        if self._stop.is_set():
            return  # watch_bookies cannot be stopped: a stopped auditor ignores it
        with self._lock:
            self._writable, self._read_only = list(writable), list(read_only)
        self._wake.set()

    def _on_delay_changed(self) -> Callable[[int | None], None]:
        first = [True]

        def changed(delay: int | None) -> None:
            if first[0]:  # the value at start, not a change
                first[0] = False
                return
            log.info("lostBookieRecoveryDelay changed to %s: auditing every lost bookie now", delay)
            self.trigger_audit()
        return changed

    def trigger_audit(self) -> None:
        """Audit every lost bookie now, whatever the delay (BookKeeper's triggerAudit)."""
        with self._lock:
            self._forced = True
        self._wake.set()

    # -- the loop -------------------------------------------------------------------------------------
    def _run(self) -> None:
        next_due: float | None = None
        while not self._stop.is_set():
            deadlines = [d for d in (next_due, self._next_bookie_check, self._next_replicas_check,
                                     self._next_ledger_check) if d is not None]
            self._wake.wait(max(0.0, min(deadlines) - time.monotonic()) if deadlines else None)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                next_due = self._step()
            except BKException:
                log.exception("audit failed; trying again in %.0f s", ERROR_BACKOFF_SECONDS)
                next_due = time.monotonic() + ERROR_BACKOFF_SECONDS

    def _step(self) -> float | None:
        """One round: returns when the next lost bookie's delay runs out."""
        now = time.monotonic()
        periodic = self._next_bookie_check is not None and now >= self._next_bookie_check
        if periodic:
            self._next_bookie_check = self._after(self.conf["auditorPeriodicBookieCheckInterval"])
            self._marked.clear()  # the periodic audit marks every lost bookie again
        replicas_due = self._next_replicas_check is not None and now >= self._next_replicas_check
        if replicas_due:  # rescheduled even while AutoRecovery is disabled: skipped, not retried at once
            self._next_replicas_check = self._after(self.conf["auditorReplicasCheckInterval"])
        ledgers_due = self._next_ledger_check is not None and now >= self._next_ledger_check
        if ledgers_due:
            self._next_ledger_check = self._after(self.conf["auditorPeriodicCheckInterval"])
        with self._lock:
            writable, read_only = list(self._writable), list(self._read_only)
            forced, self._forced = self._forced, False
        metrics = self.metrics
        lengths: dict[LedgerId, int] = {}
        index = bookie_ledger_index(_remember_lengths(self._all_ledgers(), lengths))
        self._lengths = lengths
        metrics.bookie_to_ledgers_map_creation_time.register_successful_event(time.monotonic() - now)
        lost = lost_bookies(index, writable, read_only)
        for bookie in set(self._lost_since) - lost:
            if bookie in writable or bookie in read_only:
                log.info("bookie %s is back: nothing is marked for it", bookie)
                if bookie in self._delayed:
                    metrics.num_delayed_bookie_audits_cancelled.inc()
            else:
                log.info("no ledger names bookie %s any more: its ledgers were re-replicated", bookie)
        self._lost_since = {b: self._lost_since.get(b, now) for b in lost}
        self._marked &= lost
        self._delayed &= lost
        if not self.manager.is_ledger_replication_enabled():
            if self._lost_since:
                log.info("AutoRecovery is disabled: lost bookies %s are marked once it is enabled",
                         ", ".join(sorted(self._lost_since)))
            self._forced |= forced
            skipped = int(replicas_due) + int(ledgers_due)
            if skipped:
                metrics.num_skipping_check_task_times.inc(skipped)
            return None
        pending = {b: since for b, since in self._lost_since.items() if b not in self._marked}
        delay = self.manager.get_lost_bookie_recovery_delay(self.conf["lostBookieRecoveryDelay"])
        due, next_due = recovery_due(pending, 0 if forced or periodic else delay, now)
        if due:
            self._mark(index, due)
        waiting = set(pending) - due
        if waiting - self._delayed:
            metrics.num_bookie_audits_delayed.inc(len(waiting - self._delayed))
        self._delayed = (self._delayed | waiting) - due
        self._show_waiting(index, waiting, delay)
        metrics.audit_bookies_time.register_successful_event(time.monotonic() - now)
        if replicas_due:
            self.replicas_check(writable + read_only)
        if ledgers_due:
            self.check_all_ledgers()
        self.stats.audits += 1  # counted once the round is over, its periodic checks included
        return next_due

    def _all_ledgers(self) -> Iterator[tuple[LedgerId, LedgerMetadata]]:
        # Every scope: scope 0's ledgers are marked where BookKeeper's tools see them, the others apart.
        return self.store.ledgers_with_metadata(None)

    def _mark(self, index: dict[str, set[LedgerId]], bookies: set[str]) -> None:
        started = time.monotonic()
        marks = ledgers_to_mark(index, bookies)
        for ledger, missing in sorted(marks.items()):
            self.manager.mark_ledger_underreplicated(ledger, sorted(missing))
        self.metrics.published(marks, self._lengths)
        self.metrics.url_publish_time_for_lost_bookies.register_successful_event(time.monotonic() - started)
        self._marked |= bookies
        self.stats.ledgers_marked += len(marks)
        log.info("lost bookies %s: %d ledgers marked under-replicated", ", ".join(sorted(bookies)), len(marks))

    def _show_waiting(self, index: dict[str, set[LedgerId]], waiting: set[str], delay: int) -> None:
        """Ledgers already marked for another reason show that they also wait for the delay."""
        for ledger, missing in ledgers_to_mark(index, waiting).items():
            reason = f"bookies {', '.join(sorted(missing))} lost; lostBookieRecoveryDelay is {delay} s"
            self.manager.set_state(ledger, ReplicationState(WAITING_RECOVERY_DELAY, reason, by=self.bookie_id))

    # -- the replicas check -----------------------------------------------------------------------------
    def replicas_check(self, available: list[str]) -> dict[LedgerId, set[str]]:
        """Mark every closed ledger where an available bookie lacks entries the striping gives it;
        returns ledger -> those bookies."""
        if self.bookie_client is None:
            return {}
        started = time.monotonic()
        found: dict[LedgerId, set[str]] = defaultdict(set)
        lengths: dict[LedgerId, int] = {}
        shortfalls = dict.fromkeys(self.metrics.shortfalls, 0)
        for ledger, metadata in self._all_ledgers():
            if not metadata.is_closed or metadata.last_entry_id < 0:
                continue
            missing_per_entry: Counter = Counter()  # entry -> bookies of its write set that lack it
            for bookie in sorted({b for _, ens in metadata.ensembles for b in ens} & set(available)):
                expected = expected_entries(metadata, bookie)
                if not expected:
                    continue
                try:
                    listed = self.bookie_client(bookie).list_entries(ledger)
                except BKException as exc:
                    log.warning("replicas check: %s did not list ledger %s (%s)", bookie, ledger, exc)
                    continue
                held = set(availability.decode(listed.availabilityOfEntriesOfLedger)) if listed.status == 0 else set()
                if not expected <= held:
                    found[ledger].add(bookie)
                    lengths[ledger] = metadata.length
                    missing_per_entry.update(expected - held)
            shortfall = replica_shortfall(missing_per_entry, metadata.write_quorum_size, metadata.ack_quorum_size)
            if shortfall is not None:
                shortfalls[shortfall] += 1
        for ledger, bookies in sorted(found.items()):
            self.manager.mark_ledger_underreplicated(ledger, sorted(bookies))
        self.metrics.published(found, lengths)
        self.metrics.shortfalls.update(shortfalls)
        self.metrics.replicas_check_time.register_successful_event(time.monotonic() - started)
        self.manager.set_replicas_check_ctime(int(time.time() * 1000))
        self.stats.replicas_checks += 1
        return dict(found)

    # -- the check of every ledger ------------------------------------------------------------------------
    def check_all_ledgers(self) -> dict[LedgerId, set[str]]:
        """Check every ledger (BookKeeper's AuditorCheckAllLedgersTask) and mark those where LedgerChecker finds
        bad bookies (with them as the missing replicas); returns ledger -> those bookies.

        One pipelined metadata read per ledger (MetadataStore.read_ledgers) and nothing more from ZooKeeper: the
        handles are opened on the metadata just read, the registered bookies are the client's watched ones. A
        closed ledger without entries is judged by registration alone, as BookKeeper's checker does for a bookie
        that stores nothing; the others are opened without recovery and checked, up to
        MAX_CONCURRENT_OPEN_LEDGER_OPERATIONS at once (their reads in flight, no thread each)."""
        if self.client is None:
            return {}
        started = time.monotonic()
        try:
            found = self._check_all_ledgers()
        except BaseException:
            self.metrics.check_all_ledgers_time.register_failed_event(time.monotonic() - started)
            raise
        self.metrics.check_all_ledgers_time.register_successful_event(time.monotonic() - started)
        return found

    def _check_all_ledgers(self) -> dict[LedgerId, set[str]]:
        bk = self.client()
        metrics = self.metrics
        checker = LedgerChecker(bk)
        available = checker.available()  # once for the whole check: no request per ledger
        slots = threading.BoundedSemaphore(MAX_CONCURRENT_OPEN_LEDGER_OPERATIONS)
        found: dict[LedgerId, set[str]] = {}
        failures: list[BaseException] = []
        checks: list[Future] = []
        lock = threading.Lock()

        def done(ledger: LedgerId, check: Future) -> None:
            try:
                bad = {b for fragment in check.result() for b in fragment.bad_bookies}
            except BKNoSuchLedgerExistsOnMetadataServerException:
                bad = set()  # deleted since its read (an open ledger's handle reads its metadata again)
            except BaseException as exc:  # noqa: BLE001 - reported once every check is over
                with lock:
                    failures.append(exc)
                bad = set()
            finally:
                slots.release()
            if bad:
                with lock:
                    found[ledger] = bad

        def check_open(ledger: LedgerId, versioned: Versioned[LedgerMetadata]) -> set[LedgerFragment]:
            # An open ledger's handle asks its bookies for the LAC: done on a thread, not on this loop.
            handle = bk.open_ledger(ledger, versioned.value.password, recovery=False, versioned=versioned)
            return checker.check_ledger(handle, available=available)

        checked = 0
        lengths: dict[LedgerId, int] = {}
        probes = EntryProbes(bk)  # closed ledgers' reads, many to a call per bookie
        try:
            with ThreadPoolExecutor(OPEN_LEDGER_THREADS, thread_name_prefix="AuditorOpen") as openers:
                for ledger, versioned in self.store.read_ledgers(self.store.iterate_ledgers(None)):
                    if versioned is None:
                        continue  # deleted since the listing
                    checked += 1
                    md = versioned.value
                    lengths[ledger] = md.length
                    metrics.num_fragments_per_ledger.register_successful_value(len(md.ensembles))
                    metrics.num_bookies_per_ledger.register_successful_value(
                        len({b for _, ensemble in md.ensembles for b in ensemble}))
                    if md.is_closed and md.last_entry_id < 0:
                        bad = {b for fragment in unregistered_fragments(ledger, md, available)
                               for b in fragment.bad_bookies}
                        if bad:
                            with lock:
                                found[ledger] = bad
                        continue
                    if not slots.acquire(blocking=False):
                        probes.flush()  # the checks holding the slots may wait for queued probes
                        slots.acquire()
                    if md.is_closed:  # opening it reads nothing: its LAC is its last entry
                        handle = bk.open_ledger(ledger, md.password, recovery=False, versioned=versioned)
                        check = checker.check_ledger_async(handle, available=available, probes=probes)
                    else:
                        check = openers.submit(check_open, ledger, versioned)
                    check.add_done_callback(functools.partial(done, ledger))
                    checks.append(check)
                probes.flush()  # the last probes go out; then every check can finish
                wait(checks)
        finally:
            probes.close()
        for ledger, bookies in sorted(found.items()):
            self.manager.mark_ledger_underreplicated(ledger, sorted(bookies))
        metrics.published(found, lengths)
        metrics.num_ledgers_checked.inc(checked)
        if failures:
            raise failures[0]  # as BookKeeper's check: one ledger that cannot be checked fails the run (no ctime)
        self.manager.set_check_all_ledgers_ctime(int(time.time() * 1000))
        self.stats.ledger_checks += 1
        log.info("checked %d ledgers: %d marked under-replicated", checked, len(found))
        return found

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        for stop in self._unwatch:
            stop()
        if self._thread.is_alive():
            self._thread.join()
