"""The bookie: storage engine, journals, sync thread and disk monitor behind one API (BookieImpl).

Start-up follows BookKeeper's order: directory checks, cookie validation, journal replay from the
LastLogMark, a full checkpoint (BookieImpl.start: the mark moves to the new journal files, so a torn
tail accepted now is never replayed again in front of later journals), then the journal, sync and
disk-monitor threads.

An add (``add_entries``) takes a framed batch of one ledger's entries:
1. ``entry_format.scan_batch`` walks the frames once (sizes, one ledger, entry ids, highest LAC): a
   malformed batch is refused (EBADREQ) before anything is stored;
2. ledger storage first: the batch is appended to the entry log buffer, its locations go to the
   ledger cache (a ledger's first add also journals its master key);
3. then the journal: the batch bytes are queued as they are, and the returned future completes only
   after the journal group holding them is written and fsynced.
Fence and explicit LAC take the same path as journal meta-records: done once the record is fsynced.

Metrics (BookieStats, JournalStats, LedgerDirsManager's, GarbageCollectorStats; ``stats_logger`` is the root):
``bookie_*`` per call of the engine (a batch of adds, a range read: one event of ``count`` entries), the
journal's per group and fsync, and gauges sampled at scrape time (SERVER_STATUS, the journal queues, the
ledger directories). ``request_stats`` (bookkeeper_server_*) is shared by the servers that serve this engine.

Checks at the door: adds, explicit LACs, meta-records and reads go through ``check_master_key``,
``check_explicit_lac`` (bookie.server.ledger_storage) and MAX_ENTRY_ID (bookie.server.index), so every
index header and slot can always be written and no request can stop a checkpoint or a restart. Replay
drops, with an error, such records an older bookie journaled.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from concurrent.futures import Future
from typing import Callable


from bookie.exceptions import (BadRequestException, BookieException, JournalException,
                               LedgerFencedException, NoEntryException, ReadOnlyException,
                               TooManyRequestsException)
from bookie.ledger_id import LedgerId
from bookie.meta.metadata_store import MetadataStore
from bookie.proto import entry_format
from bookie.server import bookkeeper_server_stats as names
from bookie.server.compactor import TransactionalEntryLogCompactor
from bookie.server.cookie import Cookie, check_cookies
from bookie.server.garbage_collector import GarbageCollectorThread
from bookie.server.index import MAX_ENTRY_ID
from bookie.server.journal import Journal, journal_path, list_journal_ids
from bookie.server.journal_scanner import ScanResult, scan_journal
from bookie.server.last_log_mark import read_last_mark
from bookie.server.ledger_dirs_monitor import LedgerDirsMonitor
from bookie.server.ledger_storage import InterleavedLedgerStorage, check_explicit_lac, check_master_key
from bookie.server.request_stats import RequestStats
from bookie.server.sync_thread import SyncThread
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger

log = logging.getLogger(__name__)
_FRAME_LEN = entry_format.FRAME_LEN


class BookieStats:
    """The engine's metrics (BookieStats, under ``bookie``): one event per call, of ``count`` entries (a batch
    of adds, a range read), each entry's latency the call's; sizes are the entries' mean size per call."""

    def __init__(self, stats_logger: StatsLogger, journal_dirs: int, journal_queue_size: int):
        op, counter = stats_logger.get_op_stats_logger, stats_logger.get_counter
        self.add_entry = op(names.BOOKIE_ADD_ENTRY)
        self.recovery_add_entry = op(names.BOOKIE_RECOVERY_ADD_ENTRY)
        self.read_entry = op(names.BOOKIE_READ_ENTRY)
        self.add_bytes = op(names.BOOKIE_ADD_ENTRY_BYTES)
        self.read_bytes = op(names.BOOKIE_READ_ENTRY_BYTES)
        self.write_bytes_total = counter(names.WRITE_BYTES)
        self.read_bytes_total = counter(names.READ_BYTES)
        self.force_ledger = counter(names.BOOKIE_FORCE_LEDGER)
        stats_logger.register_gauge(names.JOURNAL_DIRS, lambda: journal_dirs)
        stats_logger.register_gauge(names.JOURNAL_QUEUE_MAX_SIZE, lambda: journal_queue_size)

    def added(self, started: float, entries: int, nbytes: int, recovery: bool) -> None:
        """``entries`` entries of ``nbytes`` bytes stored and queued for the journal in one call."""
        (self.recovery_add_entry if recovery else self.add_entry).register_successful_event(
            time.monotonic() - started, entries)
        self.add_bytes.register_successful_value(nbytes / entries, entries)
        self.write_bytes_total.inc(nbytes)

    def read(self, started: float, entries: int, nbytes: int) -> None:
        """``entries`` entries of ``nbytes`` bytes read in one call (none: an event of one, as a miss)."""
        self.read_entry.register_successful_event(time.monotonic() - started, max(entries, 1))
        if entries:
            self.read_bytes.register_successful_value(nbytes / entries, entries)
            self.read_bytes_total.inc(nbytes)


class Bookie:
    def __init__(self, conf, stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the process's root logger (``stats_logger`` here); the engine records under its
        ``bookie`` scope, the servers serving it under ``bookkeeper_server`` (``request_stats``)."""
        self.conf = conf
        self.stats_logger = stats_logger
        self._bookie_stats_logger = stats_logger.scope(names.BOOKIE_SCOPE)
        self.stats = BookieStats(self._bookie_stats_logger, len(conf.journal_dirs), conf["journalQueueSize"])
        self.request_stats = RequestStats(stats_logger.scope(names.SERVER_SCOPE))
        self.journal_dirs = conf.journal_dirs
        self.ledger_dirs = conf.ledger_dirs
        self.storage: InterleavedLedgerStorage | None = None
        self.journals: list[Journal] = []
        self.sync_thread: SyncThread | None = None
        self.dirs_monitor: LedgerDirsMonitor | None = None
        self.garbage_collector: GarbageCollectorThread | None = None
        self.cookie: Cookie | None = None
        self.replayed: list[ScanResult] = []
        self.running = False
        self.forced_read_only = conf["forceReadOnlyBookie"]
        self._state_listeners: list[Callable[[bool], None]] = []
        self.journal_failure: JournalException | None = None  # set once a journal write or fsync fails
        self._fatal_listeners: list[Callable[[JournalException], None]] = []
        self._replay_skipped = False  # skipReplayJournalInvalidRecord passed over corrupt journal bytes
        self._max_entry = conf["nettyMaxFrameSizeBytes"]
        # 1 writable, 0 read-only, -1 not serving (BookieStateManager's SERVER_STATUS, -1: unregistered).
        self._bookie_stats_logger.register_gauge(
            names.SERVER_STATUS, lambda: (0 if self.read_only else 1) if self.running else -1)

    # -- life cycle --------------------------------------------------------------------------------
    def start(self, instance_id: str | None = None, registered_cookie: Cookie | None = None,
              metadata_store: MetadataStore | None = None) -> "Bookie":
        """Start the engine; with ``metadata_store`` (a bookie of a cluster) the garbage collector runs too:
        without the metadata nothing can tell a deleted ledger from a live one."""
        self._check_directories()
        self.cookie = check_cookies(self.conf, instance_id, registered_cookie)
        self.storage = InterleavedLedgerStorage(self.conf, self.ledger_dirs, self.conf.index_dirs)
        self.compactor = TransactionalEntryLogCompactor(self.storage, self.conf)
        self.compactor.clean_up_and_recover()  # a compaction a crash cut short, before anything reads
        journal_stats = self._bookie_stats_logger.scope(names.JOURNAL_SCOPE)
        self.journals = [Journal(d, self.conf, i, journal_stats) for i, d in enumerate(self.journal_dirs)]
        self._replay()
        for journal in self.journals:
            journal.on_failure = self._on_journal_failure
            journal.start()
        self.sync_thread = SyncThread(self.journals, self.storage, self.ledger_dirs, self.conf["flushInterval"])
        # A full flush after replay (BookieImpl.start): the mark moves to the new journal files, so a
        # torn tail accepted now is never replayed again in front of later journals.
        self.sync_thread.checkpoint()
        self.sync_thread.start()
        self.dirs_monitor = LedgerDirsMonitor(self.conf, self.ledger_dirs, self._on_disk_state,
                                              self._bookie_stats_logger.scope(names.LD_LEDGER_SCOPE))
        if metadata_store is not None:
            self.garbage_collector = GarbageCollectorThread(self.conf, self.storage, metadata_store,
                                                            self.conf.bookie_id, self.sync_thread.checkpoint,
                                                            stats_logger=self._bookie_stats_logger)
            self.garbage_collector.compactor = self.compactor
        self.dirs_monitor.check()
        self.dirs_monitor.start()
        if self.garbage_collector is not None:
            self.garbage_collector.start()
        self.running = True
        log.info("bookie started: journals %s, ledger dirs %s", self.journal_dirs, self.ledger_dirs)
        return self

    def _check_directories(self) -> None:
        for d in dict.fromkeys([*self.journal_dirs, *self.ledger_dirs, *self.conf.index_dirs]):
            current = os.path.join(d, "current")
            try:
                os.makedirs(current, exist_ok=True)
            except OSError as exc:
                raise BookieException(f"cannot create bookie directory {current}: {exc}") from None
            if not os.access(current, os.W_OK):
                raise BookieException(f"bookie directory {current} is not writable")

    def shutdown(self) -> None:
        """Stop cleanly: drain the journals, checkpoint, and finish the entry log.

        After a journal failure nothing is flushed or checkpointed: storage holds entries of groups
        that were never fsynced. The process ends as after a crash, and replay from the LastLogMark
        (which never passed the failure) brings back everything acknowledged.
        """
        if not self.running:
            return
        self.running = False
        if self.garbage_collector is not None:
            self.garbage_collector.shutdown()
        self.compactor.shutdown()
        self.dirs_monitor.shutdown()
        self.sync_thread.shutdown()
        for journal in self.journals:
            journal.shutdown()
        if self.journal_failure is not None:
            log.error("bookie stopped without a checkpoint after a journal failure: %s", self.journal_failure)
            return
        try:
            self.sync_thread.checkpoint()
        except OSError as exc:  # e.g. an entry log's lost writeback: nothing past the LastLogMark is trusted
            log.error("bookie stopped without a checkpoint: %s. Replay from the LastLogMark restores the "
                      "entries at the next start", exc)
            self.storage.abandon()
            return
        self.storage.shutdown()
        log.info("bookie shut down")

    def add_fatal_listener(self, listener: Callable[[JournalException], None]) -> None:
        """``listener(error)`` runs (once, from a journal thread) when the bookie must stop: a journal failed."""
        self._fatal_listeners.append(listener)
        if self.journal_failure is not None:
            listener(self.journal_failure)

    def _on_journal_failure(self, error: JournalException) -> None:
        """A journal write or fsync failed: acknowledge nothing more from any journal, and stop
        (BookKeeper's Journal thread dies and the bookie exits with ExitCode.BOOKIE_EXCEPTION)."""
        if self.journal_failure is not None:
            return
        self.journal_failure = error
        log.critical("journal failure, the bookie stops: %s", error)
        for journal in self.journals:
            journal.fail(f"another journal of this bookie failed: {error}")
        for listener in list(self._fatal_listeners):
            try:
                listener(error)
            except Exception:
                log.exception("fatal listener failed")

    # -- replay ------------------------------------------------------------------------------------
    def _replay(self) -> None:
        """Re-apply every journal record after the LastLogMark (BookieImpl.readJournal).

        A torn tail ends a journal with a warning. Corruption with verified groups after it (in the
        same file or a later one) refuses start-up, unless skipReplayJournalInvalidRecord is set.
        """
        skip = self.conf["skipReplayJournalInvalidRecord"]
        self._replay_skipped = False
        for i, journal in enumerate(self.journals):
            mark = read_last_mark(self.ledger_dirs, i, len(self.journals))
            ids = [j for j in list_journal_ids(journal.journal_dir) if j >= mark.log_id]
            if mark.log_id and mark.log_id not in ids:
                raise JournalException(f"journal {mark.log_id:x}.txn named by the LastLogMark is missing from "
                                       f"{journal.journal_dir}: entries after the last checkpoint would be lost")
            tail: ScanResult | None = None  # a torn end: only a tail if no later journal holds verified groups
            for log_id in ids:
                start = mark.offset if log_id == mark.log_id else 0
                result = scan_journal(journal.journal_dir, log_id, start, self._replay_group, skip)
                self.replayed.append(result)
                self._replay_skipped = self._replay_skipped or bool(result.skipped)
                if result.corrupt:
                    raise JournalException(_refusal(str(result.corrupt), result.corrupt.path))
                if tail is not None and result.groups:
                    path = journal_path(journal.journal_dir, tail.end.log_id)
                    where = (f"{path} is corrupt at byte {tail.end.offset} ({tail.torn.removeprefix(path + ': ')}); "
                             f"journal {log_id:x}.txn after it holds verified groups")
                    if not skip:
                        raise JournalException(_refusal(where, path))
                    log.error("skipping corrupt journal bytes, as skipReplayJournalInvalidRecord=true asks: %s; "
                              "entries written there are lost on this bookie", where)
                    self._replay_skipped = True
                    tail = None
                if result.torn:
                    log.warning("journal replay stopped early in %x.txn after %d records: %s",
                                log_id, result.records, result.torn)
                    tail = result
                log.info("replayed %d records from journal %x.txn", result.records, log_id)

    def _replay_group(self, group: memoryview) -> None:
        run_ledger: LedgerId | None = None
        run_start = run_end = 0
        offset, end = 0, len(group)
        while offset < end:
            (size,) = entry_format.FRAME.unpack_from(group, offset)
            ledger, eid, body = entry_format.peek_meta(group, offset + entry_format.FRAME_LEN)
            if eid >= 0 and ledger == run_ledger and offset == run_end:
                run_end = offset + entry_format.FRAME_LEN + size
            else:
                if run_ledger is not None:
                    self._replay_entries(run_ledger, group[run_start:run_end])
                run_ledger = None
                if eid >= 0:
                    run_ledger, run_start, run_end = ledger, offset, offset + entry_format.FRAME_LEN + size
                else:
                    self._replay_meta(ledger, eid, group[body: offset + entry_format.FRAME_LEN + size])
            offset += entry_format.FRAME_LEN + size
        if run_ledger is not None:
            self._replay_entries(run_ledger, group[run_start:run_end])

    def _replay_entries(self, ledger: LedgerId, blob: memoryview) -> None:
        state = self.storage.descriptor(ledger)
        if state is None:
            if self._replay_skipped:
                log.error("replay: entries of ledger %s dropped: it has no master key here, which may have been "
                          "in the corrupt journal bytes skipped (skipReplayJournalInvalidRecord)", ledger)
            else:
                log.debug("replay: skipping entries of ledger %s, which has no master key here (deleted)", ledger)
            return
        ids, offsets, max_lac = entry_format.scan_batch(blob, ledger, self._max_entry)
        if int(ids.max()) > MAX_ENTRY_ID:  # journaled by a bookie that did not check ids yet
            log.error("replay: entries %d..%d of ledger %s dropped: ids past MAX_ENTRY_ID %d cannot be indexed",
                      int(ids.min()), int(ids.max()), ledger, MAX_ENTRY_ID)
            return
        self.storage.add_framed(ledger, state, bytes(blob), ids, offsets, max_lac)

    def _replay_meta(self, ledger: LedgerId, meta_id: int, body: memoryview) -> None:
        # Records that today's checks refuse at the door can still sit in a journal written by an older
        # bookie: they are dropped with an error, so they cannot stop a checkpoint or a restart.
        try:
            if meta_id == entry_format.METAENTRY_ID_LEDGER_KEY:
                (key_len,) = entry_format.FRAME.unpack_from(body, 0)
                master_key = bytes(body[4: 4 + key_len])
                check_master_key(ledger, master_key)
                self.storage.get_or_create(ledger, master_key)
            elif meta_id == entry_format.METAENTRY_ID_FENCE_KEY:
                if self.storage.descriptor(ledger) is not None:
                    self.storage.set_fenced(ledger)
            elif meta_id == entry_format.METAENTRY_ID_LEDGER_EXPLICITLAC:
                (lac_len,) = entry_format.FRAME.unpack_from(body, 0)
                if self.storage.descriptor(ledger) is not None:
                    self.storage.set_explicit_lac(ledger, bytes(body[4: 4 + lac_len]))
        except BadRequestException as exc:
            log.error("replay: journal record of ledger %s dropped: %s", ledger, str(exc))  # no traceback: it pins the mmap

    # -- read-only ---------------------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return self.forced_read_only or (self.dirs_monitor is not None and self.dirs_monitor.any_full)

    def add_state_listener(self, listener: Callable[[bool], None]) -> None:
        """``listener(read_only)`` runs whenever the bookie turns read-only or writable."""
        self._state_listeners.append(listener)

    def _on_disk_state(self, full: bool) -> None:
        if full and not self.conf["readOnlyModeEnabled"]:
            log.error("ledger disks are full and readOnlyModeEnabled=false: refusing all adds")
        log.warning("bookie is now %s", "read-only" if self.read_only else "writable")
        self.storage.entry_logger.writable_dirs = [d for d in self.ledger_dirs if d not in self.dirs_monitor.full]
        if self.garbage_collector is not None:
            self.garbage_collector.on_disk_state(full)
        for listener in self._state_listeners:
            listener(self.read_only)

    def set_read_only(self, forced: bool) -> None:
        """Force (or release) read-only mode, as the HTTP ``state/readonly`` endpoint does."""
        before = self.read_only
        self.forced_read_only = forced
        if self.read_only != before:
            for listener in self._state_listeners:
                listener(self.read_only)

    # -- writes ------------------------------------------------------------------------------------
    def _journal_for(self, ledger: LedgerId) -> Journal:
        return self.journals[ledger.ledger_id % len(self.journals)]

    def add_entries(self, ledger: LedgerId, master_key: bytes, blob: bytes, recovery: bool = False) -> Future:
        """Add a framed batch of ``ledger``'s entries; the future gives the entry ids once fsynced."""
        started = time.monotonic()
        try:
            future, entries = self._add_entries(ledger, master_key, blob, recovery)
        except Exception:
            (self.stats.recovery_add_entry if recovery else self.stats.add_entry).register_failed_event(
                time.monotonic() - started)
            raise
        self.stats.added(started, entries, len(blob) - _FRAME_LEN * entries, recovery)
        return future

    def _add_entries(self, ledger: LedgerId, master_key: bytes, blob: bytes, recovery: bool) -> tuple[Future, int]:
        if self.read_only and not recovery:
            raise ReadOnlyException(f"bookie is read-only: add to ledger {ledger} refused (recovery adds only)")
        try:
            ids, offsets, max_lac = entry_format.scan_batch(blob, ledger, self._max_entry)
        except ValueError as exc:
            raise BadRequestException(f"bad add batch for ledger {ledger}: {exc}") from None
        if int(ids.max()) > MAX_ENTRY_ID:  # the index file could not hold its location
            raise BadRequestException(f"ledger {ledger}: entry id {int(ids.max())} refused; entry ids are 0.."
                                      f"{MAX_ENTRY_ID} (MAX_ENTRY_ID = 2^37-1)")
        check_master_key(ledger, master_key)
        future: Future = Future()

        def done(error: Exception | None) -> None:
            if error is None:
                future.set_result(ids.tolist())
            else:
                future.set_exception(error)

        journal = self._journal_for(ledger)
        with self.storage.lock:
            if not journal.has_room(2):
                raise TooManyRequestsException(f"journal queue is full: add to ledger {ledger} refused, retry later")
            state, created = self.storage.get_or_create(ledger, master_key)
            if state.fenced and not recovery:
                raise LedgerFencedException(f"ledger {ledger} is fenced: add of entries {ids[0]}..{ids[-1]} refused")
            self.storage.add_framed(ledger, state, blob, ids, offsets, max_lac)
            if created:
                journal.log(_key_record(ledger, master_key), None)
            journal.log(blob, done, len(ids))
        return future, len(ids)

    def _journal_meta(self, ledger: LedgerId, master_key: bytes, record: bytes,
                      apply: Callable[[], None]) -> Future:
        check_master_key(ledger, master_key)
        future: Future = Future()
        journal = self._journal_for(ledger)
        with self.storage.lock:
            _, created = self.storage.get_or_create(ledger, master_key)
            apply()
            if created:
                journal.log(_key_record(ledger, master_key), None)
            journal.log(record, lambda error: future.set_exception(error) if error else future.set_result(True))
        return future

    def fence_ledger(self, ledger: LedgerId, master_key: bytes) -> Future:
        """Fence: no more normal adds. The future completes once the fence is fsynced in the journal."""
        return self._journal_meta(ledger, master_key, entry_format.meta_record(ledger, entry_format.METAENTRY_ID_FENCE_KEY),
                                  lambda: self.storage.set_fenced(ledger))

    def set_explicit_lac(self, ledger: LedgerId, master_key: bytes, lac_blob: bytes, lac: int | None = None) -> Future:
        """Keep the explicit LAC blob once journaled; a blob of a wrong size or ledger, or whose LAC is not
        the request's ``lac``, is refused before anything is journaled."""
        check_explicit_lac(ledger, lac_blob, lac)
        record = entry_format.meta_record(ledger, entry_format.METAENTRY_ID_LEDGER_EXPLICITLAC,
                                entry_format.FRAME.pack(len(lac_blob)) + bytes(lac_blob))
        return self._journal_meta(ledger, master_key, record, lambda: self.storage.set_explicit_lac(ledger, lac_blob))

    def force_ledger(self, ledger: LedgerId) -> Future:
        """Completes once everything journaled so far for ``ledger``'s journal is fsynced."""
        future: Future = Future()
        self.stats.force_ledger.inc()
        self._journal_for(ledger).log(b"", lambda error: future.set_exception(error) if error else future.set_result(True), 0)
        return future

    # -- reads -------------------------------------------------------------------------------------
    def read_entry(self, ledger: LedgerId, entry_id: int) -> bytes:
        """The entry as stored (entry -1: the last entry this bookie has)."""
        if entry_id < entry_format.INVALID_ENTRY_ID:
            raise BadRequestException(f"ledger {ledger}: entry id {entry_id} refused (allowed: -1 for the last "
                                      f"entry, or 0..{MAX_ENTRY_ID})")
        started = time.monotonic()
        try:
            body = self.storage.read_entry(ledger, entry_id)
        except Exception:
            self.stats.read_entry.register_failed_event(time.monotonic() - started)
            raise
        self.stats.read(started, 1, len(body))
        return body

    def read_entries(self, ledger: LedgerId, first: int, last: int, max_bytes: int = 4 << 20,
                     stride: int = 0, offset: int = 0) -> tuple[bytes, int, int]:
        """Framed entries stored here in ``[first, last]`` (``e % stride == offset``): (blob, count, last id covered)."""
        parts, count, covered = self.read_entries_parts(ledger, first, last, max_bytes, stride, offset)
        return b"".join(parts), count, covered

    def read_entries_parts(self, ledger: LedgerId, first: int, last: int, max_bytes: int = 4 << 20,
                           stride: int = 0, offset: int = 0) -> tuple[list, int, int]:
        """``read_entries`` with the blob left in pieces, for the service to copy into its message."""
        started = time.monotonic()
        try:
            parts, count, covered = self.storage.read_framed_parts(ledger, first, last, max_bytes, stride, offset)
        except Exception:
            self.stats.read_entry.register_failed_event(time.monotonic() - started)
            raise
        self.stats.read(started, count, sum(map(len, parts)) - _FRAME_LEN * count)
        return parts, count, covered

    def read_few_ranges(self, ranges) -> list[list[bytes] | None]:
        """Framed entries of many ranges of a few ids each (LedgerStorage.read_few_ranges)."""
        started = time.monotonic()
        found = self.storage.read_few_ranges(ranges)
        count = nbytes = 0
        for frames in found:
            if frames:
                count += len(frames)
                nbytes += sum(map(len, frames))
        self.stats.read(started, count, nbytes - _FRAME_LEN * count)
        return found

    def last_add_confirmed(self, ledger: LedgerId) -> int:
        return self.storage.require(ledger).lac

    def explicit_lac(self, ledger: LedgerId) -> bytes:
        blob = self.storage.require(ledger).explicit_lac
        if blob is None:
            raise NoEntryException(f"ledger {ledger} has no explicit LAC on this bookie")
        return blob

    def is_fenced(self, ledger: LedgerId) -> bool:
        return self.storage.require(ledger).fenced

    def stored_entry_ids(self, ledger: LedgerId):
        return self.storage.stored_entry_ids(ledger)

    def watch_lac(self, ledger: LedgerId, watcher: Callable[[int], None]) -> Callable[[], None]:
        """Call ``watcher(lac)`` whenever the ledger's LAC rises; returns a function that stops it."""
        state = self.storage.require(ledger)
        state.lac_watchers.append(watcher)
        return lambda: state.lac_watchers.remove(watcher) if watcher in state.lac_watchers else None

    def disk_info(self) -> tuple[int, int]:
        """(total, free) bytes of the ledger directories' file systems."""
        seen, total, free = set(), 0, 0
        for d in self.ledger_dirs:
            dev = os.stat(d).st_dev
            if dev not in seen:
                seen.add(dev)
                usage = shutil.disk_usage(d)
                total, free = total + usage.total, free + usage.free
        return total, free

    def checkpoint(self):
        return self.sync_thread.checkpoint()


def _refusal(where: str, path: str) -> str:
    return (f"journal replay refused: {where}. Verified groups follow the bad one, so it is not a torn tail: "
            f"its fsync completed and its entries were acknowledged, and replaying past it would lose them in "
            f"silence. Inspect the file with `bk shell readjournal {path}`. Then either rebuild this bookie from "
            f"the other replicas (wipe its journal and ledger directories and re-replicate its ledgers with "
            f"`bk shell recover`), or accept losing the bad group's entries on this bookie: set "
            f"skipReplayJournalInvalidRecord=true to replay every verified group (each skipped spot is logged).")


def _key_record(ledger: LedgerId, master_key: bytes) -> bytes:
    return entry_format.meta_record(ledger, entry_format.METAENTRY_ID_LEDGER_KEY, entry_format.FRAME.pack(len(master_key)) + master_key)
