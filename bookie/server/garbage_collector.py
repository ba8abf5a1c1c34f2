"""The bookie's garbage collector (BookKeeper's GarbageCollectorThread).

Every ``gcWaitTime`` ms, or at once when forced, one pass (``run_with_flags``, BookKeeper's runWithFlags):
1. compaction clean-up: finish or roll back a compaction a crash interrupted (the compactor's);
2. deleted ledgers (``do_gc_ledgers``): the ScanAndCompareGarbageCollector names the ledgers the
   metadata no longer has; a checkpoint moves the LastLogMark past every journal record written so
   far, THEN their index, cache pages, master key and fence state are deleted. So journal replay
   after a crash never meets their old records and cannot bring them back;
3. entry-log metadata of every log but the current one, from its ledgers map or by scanning it, kept
   across passes (entryLogMetaMap); a corrupt log is skipped, reported and never deleted;
4. ``do_gc_entry_logs``: deleted ledgers leave each log's metadata; a log with none left is removed;
5. compaction: major if forced (and allowed) or majorCompactionInterval has passed, else minor by the
   same rule; logs under the threshold, emptiest first (the compactor copies their live entries).

Disks full (read-only bookie): GC goes on. With ``isForceGCAllowWhenNoSpace`` every pass is forced
(compaction included, to win space back); without it compaction is suspended until space comes back,
as BookKeeper's ledger-dirs listener does.

Metrics (GarbageCollectorStats): under ``bookie``, where BookKeeper's DbLedgerStorage puts them and operators'
dashboards read them (BookKeeper's InterleavedLedgerStorage would write ``bookie_gc_*``): counters of what
passes deleted and reclaimed, and gauges of the entry logs and ledgers as the last pass left them.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Callable, Protocol

from bookie.exceptions import EntryLogCorruptedException
from bookie.meta.metadata_store import MetadataStore
from bookie.server import bookkeeper_server_stats as names
from bookie.server.compactor import logs_to_compact
from bookie.server.entry_log_metadata import EntryLogMetadata, extract_entry_log_metadata
from bookie.server.garbage_collection_status import EntryLogUsage, GarbageCollectionStatus, SkippedEntryLog
from bookie.server.ledger_storage import InterleavedLedgerStorage
from bookie.server.scan_and_compare_garbage_collector import ScanAndCompareGarbageCollector
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger
from bookie.util.periodic_thread import PeriodicThread

log = logging.getLogger(__name__)


class Compactor(Protocol):
    """What the pass needs of the compactor (TransactionalEntryLogCompactor)."""

    def clean_up_and_recover(self) -> None: ...

    def compact(self, meta: EntryLogMetadata) -> int: ...

    def drain(self) -> None: ...


class GarbageCollectorStats:
    """What the passes did (GarbageCollectorStats): counters, and gauges sampled at scrape time from what the
    last pass left (``active_*``, set at the end of each pass: nothing is walked at scrape time)."""

    def __init__(self, stats_logger: StatsLogger):
        counter = stats_logger.get_counter
        self.minor_compactions = counter(names.MINOR_COMPACTION_COUNT)  # compaction runs, as BookKeeper counts
        self.major_compactions = counter(names.MAJOR_COMPACTION_COUNT)
        self.reclaimed_by_compaction = counter(names.RECLAIMED_COMPACTION_SPACE_BYTES)
        self.reclaimed_by_deletion = counter(names.RECLAIMED_DELETION_SPACE_BYTES)
        self.reclaim_failed_to_delete = counter(names.RECLAIM_FAILED_TO_DELETE)
        self.deleted_ledgers = counter(names.DELETED_LEDGER_COUNT)
        self.thread_runtime = stats_logger.get_op_stats_logger(names.THREAD_RUNTIME)  # a pass
        self.active_entry_logs = 0
        self.active_entry_log_bytes = 0  # what is left alive in them
        self.active_ledgers = 0
        stats_logger.register_gauge(names.ACTIVE_ENTRY_LOG_COUNT, lambda: self.active_entry_logs)
        stats_logger.register_gauge(names.ACTIVE_ENTRY_LOG_SPACE_BYTES, lambda: self.active_entry_log_bytes)
        stats_logger.register_gauge(names.ACTIVE_LEDGER_COUNT, lambda: self.active_ledgers)


class GarbageCollectorThread(PeriodicThread):
    def __init__(self, conf, storage: InterleavedLedgerStorage, store: MetadataStore, bookie_id: str,
                 checkpoint: Callable[[], object], after_snapshot: Callable[[], None] | None = None,
                 stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the bookie's scope (``bookie``), where GarbageCollectorStats are."""
        super().__init__("GarbageCollectorThread", conf["gcWaitTime"] / 1000.0)
        self.stats = GarbageCollectorStats(stats_logger)
        self.conf = conf
        self.storage = storage
        self.compactor: Compactor | None = None  # set by the bookie once compaction is available
        self._checkpoint = checkpoint
        self.scanner = ScanAndCompareGarbageCollector(store, storage.active_ledgers, bookie_id, conf, self._stop,
                                                      after_snapshot)
        self.entry_log_meta: dict[int, EntryLogMetadata] = {}  # BookKeeper's entryLogMetaMap
        self.minor_threshold, self.major_threshold = conf["minorCompactionThreshold"], conf["majorCompactionThreshold"]
        self.minor_interval, self.major_interval = conf["minorCompactionInterval"], conf["majorCompactionInterval"]
        self.force_gc_allowed_when_full = conf["isForceGCAllowWhenNoSpace"]
        now = time.time()
        self.last_minor_compaction = self.last_major_compaction = now
        self._lock = threading.Condition()
        self._status = GarbageCollectionStatus()
        self._forced = False  # a force_gc waits for the next pass
        self._force_major = self._force_minor = False
        self._suspended = {"major": False, "minor": False}  # by the operator
        self._no_space = False  # the ledger disks are full
        self._running = False

    # -- control -----------------------------------------------------------------------------------
    def force_gc(self, major: bool = False, minor: bool = False) -> int:
        """Run a pass now (with compaction even where suspended, for ``major`` / ``minor``). Returns the
        number of finished passes to wait for (``status().passes`` >= it, or ``wait_for_pass``): that
        pass started after this call."""
        with self._lock:
            self._forced = True
            self._force_major |= major
            self._force_minor |= minor
            target = self._status.passes + (2 if self._running else 1)
        self.wake()
        return target

    def wait_for_pass(self, target: int, timeout: float | None = None) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._status.passes >= target or self.stopped, timeout) and \
                self._status.passes >= target

    def suspend_major_gc(self) -> None:
        self._set_suspended("major", True)

    def resume_major_gc(self) -> None:
        self._set_suspended("major", False)

    def suspend_minor_gc(self) -> None:
        self._set_suspended("minor", True)

    def resume_minor_gc(self) -> None:
        self._set_suspended("minor", False)

    def _set_suspended(self, kind: str, value: bool) -> None:
        with self._lock:
            self._suspended[kind] = value
            self._publish_suspension()
        log.info("%s compaction %s", kind, "suspended" if value else "resumed")

    def _publish_suspension(self) -> None:
        held = self._no_space and not self.force_gc_allowed_when_full
        self._status.major_compaction_suspended = self._suspended["major"] or held
        self._status.minor_compaction_suspended = self._suspended["minor"] or held

    def on_disk_state(self, full: bool) -> None:
        """The ledger disks filled or drained (LedgerDirsListener): force passes, or hold compaction."""
        with self._lock:
            self._no_space = full
            self._publish_suspension()
        if full and self.force_gc_allowed_when_full:
            log.warning("ledger disks full and isForceGCAllowWhenNoSpace=true: forcing GC every pass")
            self.wake()
        elif full:
            log.warning("ledger disks full: compaction suspended until space comes back "
                        "(isForceGCAllowWhenNoSpace=false); deleted ledgers and empty logs are still collected")

    def status(self) -> GarbageCollectionStatus:
        """A snapshot: the caller may keep it while passes go on."""
        with self._lock:
            return dataclasses.replace(self._status, entry_logs=list(self._status.entry_logs),
                                       skipped=list(self._status.skipped))

    # -- a pass ------------------------------------------------------------------------------------
    def run_once(self) -> None:
        with self._lock:
            force = self._forced or (self._no_space and self.force_gc_allowed_when_full)
            suspend_major = self._status.major_compaction_suspended and not self._force_major
            suspend_minor = self._status.minor_compaction_suspended and not self._force_minor
            self._forced = self._force_major = self._force_minor = False
            self._running = True
        started, ok = time.monotonic(), False
        try:
            self.run_with_flags(force, suspend_major, suspend_minor)
            ok = True
        finally:
            (self.stats.thread_runtime.register_successful_event if ok else
             self.stats.thread_runtime.register_failed_event)(time.monotonic() - started)
            with self._lock:
                self._running = False
                self._status.passes += 1
                self._status.pass_running = False
                self._status.phase = ""
                self._lock.notify_all()

    def run_with_flags(self, force: bool, suspend_major: bool, suspend_minor: bool) -> None:
        started = time.time()
        with self._lock:
            self._status.pass_running = True
            self._status.last_pass_start_ms = int(started * 1000)
            self._status.force_compacting = force
        if force:
            log.info("GC pass forced")
        if self.compactor is not None:  # 1. a compaction a crash interrupted is finished or rolled back
            self.compactor.clean_up_and_recover()
        self.do_gc_ledgers()  # 2.
        skipped = self.extract_meta_from_entry_logs()  # 3.
        self.do_gc_entry_logs()  # 4.
        with self._lock:
            self._status.skipped = skipped
        self.do_compaction(force, suspend_major, suspend_minor)  # 5.
        metas = list(self.entry_log_meta.values())
        self.stats.active_entry_logs = len(metas)
        self.stats.active_entry_log_bytes = sum(m.remaining_size for m in metas)
        with self._lock:
            self._status.last_pass_duration_ms = int((time.time() - started) * 1000)
            self._status.entry_logs = [
                EntryLogUsage(m.entry_log_id, m.total_size, m.remaining_size, len(m.ledgers), tuple(m.ledgers.items()),
                              tuple((ledger, size, at) for ledger, (size, at) in m.removed.items()))
                for m in sorted(self.entry_log_meta.values(), key=lambda m: m.entry_log_id)]

    def _phase(self, name: str, done: int = 0, total: int = 0) -> None:
        with self._lock:
            self._status.phase, self._status.phase_done, self._status.phase_total = name, done, total

    def do_gc_ledgers(self) -> int:
        """Delete the ledgers the metadata no longer has; returns how many."""
        self._phase("ledgers")
        scan = self.scanner.find_garbage()
        self.stats.active_ledgers = scan.local
        # Over-replicated ledgers are deleted under their replication locks, so no replicator changes
        # their ensembles between the check and the deletion.
        with self.scanner.overreplicated_locked(scan.overreplicated) as overreplicated:
            doomed = scan.garbage + overreplicated
            if not doomed:
                return 0
            # The LastLogMark first moves past every journal record of these ledgers, so a crash after the
            # deletion does not replay their master keys and entries back into existence.
            self._checkpoint()
            deleted = self.storage.delete_ledgers(doomed)
        self.stats.deleted_ledgers.inc(deleted)
        self.stats.active_ledgers = scan.local - deleted
        log.info("GC: deleted %d ledgers (%d the metadata no longer has, %d over-replicated; of %d stored here, "
                 "%d ranges listed): %s", deleted, len(scan.garbage), len(overreplicated), scan.local, scan.ranges,
                 ", ".join(map(str, doomed[:20])))
        with self._lock:
            self._status.ledgers_deleted += deleted
        return deleted

    def extract_meta_from_entry_logs(self) -> list[SkippedEntryLog]:
        """Metadata of every log but the one being written that is not known yet; corrupt ones are
        returned (and retried next pass)."""
        logger = self.storage.entry_logger
        todo = [i for i in logger.finished_log_ids() if i not in self.entry_log_meta]
        skipped = []
        for n, log_id in enumerate(todo):
            self._phase("entry logs", n, len(todo))
            path = logger.path_of(log_id)
            if path is None:
                continue  # removed meanwhile (compaction)
            try:
                self.entry_log_meta[log_id] = extract_entry_log_metadata(log_id, path, logger.max_record)
            except (EntryLogCorruptedException, OSError) as exc:
                reason = str(exc).removeprefix(f"{path}: ")
                log.warning("GC: entry log %s skipped, its entries are kept: %s", path, reason)
                skipped.append(SkippedEntryLog(log_id, path, reason))
        return skipped

    def do_gc_entry_logs(self) -> None:
        """Drop deleted ledgers from each log's metadata; remove the logs left with none."""
        exists = self.storage.ledger_exists
        for log_id, meta in sorted(self.entry_log_meta.items()):
            meta.remove_ledger_if(lambda ledger: not exists(ledger), self._status.passes + 1)
            if meta.is_empty:
                self._remove_entry_log(log_id)

    def _remove_entry_log(self, log_id: int) -> None:
        logger = self.storage.entry_logger
        path = logger.path_of(log_id)
        freed = _allocated_bytes(path) if path is not None else 0
        try:
            logger.remove_log(log_id)
        except OSError:
            self.stats.reclaim_failed_to_delete.inc()
            raise
        self.stats.reclaimed_by_deletion.inc(freed)
        del self.entry_log_meta[log_id]
        log.info("GC: entry log %x.log removed, no ledger in it is alive (%d bytes)", log_id, freed)
        with self._lock:
            self._status.entry_logs_deleted += 1
            self._status.bytes_reclaimed += freed

    def do_compaction(self, force: bool, suspend_major: bool, suspend_minor: bool) -> None:
        """Step 5: pick major or minor compaction and hand the logs under its threshold, emptiest first,
        to the compactor (nothing without one). A log whose compaction fails, whatever the error, is
        skipped and reported; the pass goes on with the next one. Whatever step failed, the log is safe:
        before the commit point the old log is untouched and its ``.compacting`` copy deleted (by the
        compactor, or the next pass's clean-up); from it on, the next pass's clean-up rolls the
        ``.compacted`` copy forward, both logs readable until then. A failure of a log's file work on the
        compactor's finisher is raised by the next log's compaction (reported against that one, rolled
        forward too) or by the drain that ends the pass."""
        if self.compactor is None:
            return
        now = time.time()
        due = {kind: (force and threshold > 0) or (interval > 0 and threshold > 0 and now - last > interval)
               for kind, threshold, interval, last in (
                   ("major", self.major_threshold, self.major_interval, self.last_major_compaction),
                   ("minor", self.minor_threshold, self.minor_interval, self.last_minor_compaction))}
        if due["major"] and not suspend_major:
            kind, threshold = "major", self.major_threshold
        elif due["minor"] and not suspend_minor:
            kind, threshold = "minor", self.minor_threshold
        else:
            return
        candidates = logs_to_compact(self.entry_log_meta.values(), threshold)
        with self._lock:
            setattr(self._status, f"{kind}_compacting", True)
        compacted, last = 0, None
        try:
            for n, meta in enumerate(candidates):
                if self.stopped:
                    break
                if self.storage.entry_logger.path_of(meta.entry_log_id) is None:
                    # Gone: a compaction of it that failed after its commit point was rolled forward.
                    self.entry_log_meta.pop(meta.entry_log_id, None)
                    continue
                self._phase(f"compacting {meta.entry_log_id:x}", n, len(candidates))
                try:
                    freed = self.compactor.compact(meta)
                except Exception as exc:  # this log only is skipped; the others go on
                    self._skip_log(meta.entry_log_id, exc)
                    continue
                compacted, last = compacted + 1, meta.entry_log_id
                self.entry_log_meta.pop(meta.entry_log_id, None)
                self.stats.reclaimed_by_compaction.inc(freed)
                with self._lock:
                    self._status.bytes_reclaimed += freed
        finally:
            try:  # the last log's old file deleted and its copy renamed, before the pass ends
                self.compactor.drain()
            except Exception as exc:  # rolled forward by the next pass's clean-up
                if last is None:
                    raise
                self._skip_log(last, exc)
            finished = time.time()
            (self.stats.major_compactions if kind == "major" else self.stats.minor_compactions).inc()
            setattr(self, f"last_{kind}_compaction", finished)
            if kind == "major":  # a major compaction covers what a minor one would do
                self.last_minor_compaction = finished
            with self._lock:
                setattr(self._status, f"{kind}_compacting", False)
                setattr(self._status, f"last_{kind}_compaction_ms", int(finished * 1000))
                setattr(self._status, f"{kind}_compaction_count", getattr(self._status, f"{kind}_compaction_count") + compacted)

    def _skip_log(self, log_id: int, exc: Exception) -> None:
        """A log whose compaction failed is reported as skipped, none of it deleted. A corrupt record is
        told by its message; any other error by its type and message, and logged with its traceback."""
        path = self.storage.entry_logger.path_of(log_id) or f"{log_id:x}.log"
        reason = str(exc).removeprefix(f"{path}: ")
        corrupt = isinstance(exc, EntryLogCorruptedException)
        if not corrupt:
            reason = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        log.warning("GC: compaction of entry log %s skipped, its entries are kept: %s", path, reason,
                    exc_info=None if corrupt else exc)
        with self._lock:
            self._status.skipped.append(SkippedEntryLog(log_id, path, reason))


def _allocated_bytes(path: str) -> int:
    """Disk space a file takes: its blocks, what the disk gets back (``du``), not its length."""
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0
