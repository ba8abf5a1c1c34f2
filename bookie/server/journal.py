"""The journal: every change to a ledger is written and fsynced here before it is acknowledged.

Files are ``<journalDir>/current/<hex id>.txn`` (BookKeeper's Journal and JournalChannel): a 512-byte header (``BKLG``, version 6,
zero padded), then records ``int32 len | payload``. A payload is an entry (exactly as the client sent
it) or a metadata record (master key, fence, explicit LAC; negative entry ids). A group that would take
a file past ``journalMaxSizeMB`` goes to the next file; files older than the checkpoint's mark are
deleted beyond ``journalMaxBackups`` (``gc_journals``, after each checkpoint).

Group commit, in two threads as in BookKeeper: the journal thread drains everything queued into a
group (bounded by ``journalMaxGroupWaitMSec``, ``journalBufferedWritesThreshold`` and
``journalBufferedEntriesThreshold``) and writes it with ONE ``pwritev``; the force-write thread
``fdatasync``s everything written so far with ONE call (groups written meanwhile share it:
``journalAdaptiveGroupWrites``), advances the LastLogMark and only then runs the callbacks. So the
next group is written while the previous one is being synced. Synced pages are then dropped from the
page cache, once the callbacks have run (``journalRemoveFromPageCache``, as BookKeeper's JournalChannel): only replay reads them,
and new writes reuse those pages instead of growing the cache (on this project's VMs every page the
cache has not held before costs several times its copy).

Each group ends with a padding record (``int32 -0x100 | int32 padLen | pad``) that aligns the file to
``journalAlignmentSize``, as BookKeeper's V5+ journals do. Our pad starts with ``BKGC`` + CRC32C + the
group's length, so replay verifies every group (bookie.server.journal_scanner); BookKeeper's readers
ignore pad contents.

A failed write or fsync stops the journal for good (``Journal.fail``): every group behind it fails,
the LastLogMark stays before it (a later fsync that "succeeds" may not have persisted the pages the
failed one dropped), and ``on_failure`` tells the bookie, which shuts down without a checkpoint.

Metrics (JournalStats, ``bookie_journal_*{journalIndex="i"}``): per group and per fsync, never per entry; the
queue gauges are differences of counters each thread keeps, sampled at scrape time.
"""
from __future__ import annotations

import logging
import os
import queue
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import crc32c

from bookie.exceptions import JournalException
from bookie.server import bookkeeper_server_stats as names
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger
from bookie.util.io import PAGE_SIZE, drop_clean_pages, pwritev_all

log = logging.getLogger(__name__)

JOURNAL_MAGIC = b"BKLG"
JOURNAL_FORMAT_VERSION = 6
HEADER_SIZE = 512  # V5+ header, zero padded
PADDING_MASK = -0x100
GROUP_CHECK_MAGIC = b"BKGC"
_GROUP_CHECK = struct.Struct(">4sIQ")  # magic, crc32c of the group's records, their byte length
_PAD_HEADER = struct.Struct(">ii")
_MB = 1024 * 1024

Callback = Callable[["Exception | None"], None]
_CLOSE_CHANNEL = object()


class LogMark(NamedTuple):
    """A position in the journals: (journal file id, byte offset). Tuples compare in log order."""

    log_id: int
    offset: int


def journal_current_dir(journal_dir: str) -> str:
    return os.path.join(journal_dir, "current")


def list_journal_ids(journal_dir: str) -> list[int]:
    """Ids of the journal files in ``journal_dir``, oldest first."""
    current = journal_current_dir(journal_dir)
    if not os.path.isdir(current):
        return []
    ids = []
    for name in os.listdir(current):
        if name.endswith(".txn"):
            try:
                ids.append(int(name[:-4], 16))
            except ValueError:
                log.warning("ignoring %s in %s: not a journal file name", name, current)
    return sorted(ids)


def journal_path(journal_dir: str, log_id: int) -> str:
    return os.path.join(journal_current_dir(journal_dir), f"{log_id:x}.txn")


def padding_record(position: int, group_crc: int, group_len: int, alignment: int) -> bytes:
    """The record that ends a group at file offset ``position`` and aligns what follows."""
    minimum = _GROUP_CHECK.size
    pad_len = (-(position + _PAD_HEADER.size + minimum)) % alignment + minimum
    return b"".join((_PAD_HEADER.pack(PADDING_MASK, pad_len), _GROUP_CHECK.pack(GROUP_CHECK_MAGIC, group_crc, group_len),
                     bytes(pad_len - minimum)))


@dataclass
class _Request:
    data: bytes
    callback: Callback | None
    entries: int
    enqueued: float = field(default_factory=time.monotonic)


class _Written(NamedTuple):
    """A group written to ``channel`` up to ``end``, waiting for its fsync, with what JOURNAL_ADD_ENTRY and
    JOURNAL_FORCE_LEDGER record once it is synced: its entries and the sum of their enqueue times (each
    request's time counted once per entry it carries), its force-ledger requests and theirs."""

    channel: "JournalChannel"
    end: int
    group: list[_Request]
    entries: int
    enqueued: float
    forces: int
    forces_enqueued: float


class JournalStats:
    """One journal's metrics (JournalStats, under ``bookie_journal`` with its ``journalIndex`` label). Recorded
    per group and per fsync, never per entry: the adds one fsync acknowledges are one event of ``count``
    entries, whose latency is their mean, so the sum and count are exact."""

    def __init__(self, stats_logger: StatsLogger):
        op = stats_logger.get_op_stats_logger
        self.add_entry = op(names.JOURNAL_ADD_ENTRY)  # enqueue to fsync, per entry
        self.force_ledger = op(names.JOURNAL_FORCE_LEDGER)
        self.sync = op(names.JOURNAL_SYNC)  # one fdatasync
        self.creation = op(names.JOURNAL_CREATION_LATENCY)  # a new journal file, header fsynced
        self.flush = op(names.JOURNAL_FLUSH_LATENCY)  # one group's pwritev
        self.process_time = op(names.JOURNAL_PROCESS_TIME_LATENCY)  # a group: first dequeue to force-write queue
        self.force_write_grouping = op(names.JOURNAL_FORCE_WRITE_GROUPING_COUNT)  # groups one fsync covers
        self.force_write_batch_entries = op(names.JOURNAL_FORCE_WRITE_BATCH_ENTRIES)  # entries of a group
        self.force_write_batch_bytes = op(names.JOURNAL_FORCE_WRITE_BATCH_BYTES)
        self.write_bytes = stats_logger.get_counter(names.JOURNAL_WRITE_BYTES)
        # Why a group was closed: journalMaxGroupWaitMSec, the bytes/entries thresholds, the queue empty.
        self.flush_max_wait = stats_logger.get_counter(names.JOURNAL_NUM_FLUSH_MAX_WAIT)
        self.flush_max_outstanding_bytes = stats_logger.get_counter(names.JOURNAL_NUM_FLUSH_MAX_OUTSTANDING_BYTES)
        self.flush_empty_queue = stats_logger.get_counter(names.JOURNAL_NUM_FLUSH_EMPTY_QUEUE)


class JournalChannel:
    """One journal file open for appending, preallocated in ``journalPreAllocSizeMB`` steps."""

    def __init__(self, journal_dir: str, log_id: int, prealloc_bytes: int):
        self.log_id = log_id
        self.path = journal_path(journal_dir, log_id)
        self._prealloc = prealloc_bytes
        self.dropped = 0  # pages before this offset were dropped from the page cache
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        header = JOURNAL_MAGIC + struct.pack(">i", JOURNAL_FORMAT_VERSION)
        self._allocated = 0
        self.position = 0
        self.write([header.ljust(HEADER_SIZE, b"\0")])
        os.fsync(self.fd)
        _fsync_dir(os.path.dirname(self.path))

    def write(self, buffers: list) -> None:
        """Write ``buffers`` back to back with one ``pwritev`` (no joined copy)."""
        end = self.position + sum(len(b) for b in buffers)
        if self._prealloc and end > self._allocated:
            # Zeroed, preallocated space: a fdatasync then rarely has to persist a new file size,
            # and a zero length reads as "end of journal" on replay.
            self._allocated = end + self._prealloc - end % self._prealloc
            os.posix_fallocate(self.fd, 0, self._allocated)
        self.position = pwritev_all(self.fd, buffers, self.position)

    def drop_synced_pages(self, synced: int) -> None:
        """Drop the whole pages before ``synced`` (fsynced, so clean) from the page cache. The page holding
        ``synced`` stays: the next group writes the rest of it and would otherwise read it back first."""
        end = synced - synced % PAGE_SIZE
        if end > self.dropped:
            drop_clean_pages(self.fd, self.dropped, end - self.dropped)  # advice: durable either way
            self.dropped = end

    def close(self) -> None:
        os.close(self.fd)


class Journal:
    """One journal directory and its group-commit thread."""

    def __init__(self, journal_dir: str, conf, index: int = 0, stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the journals' scope (``bookie_journal``); this journal's metrics carry its
        ``journalIndex`` label, as BookKeeper's Journal scopes them."""
        self.journal_dir = journal_dir
        self.index = index
        self.max_size = conf["journalMaxSizeMB"] * _MB
        self.max_backups = conf["journalMaxBackups"]
        self.prealloc = conf["journalPreAllocSizeMB"] * _MB
        self.alignment = conf["journalAlignmentSize"]
        self.max_group_wait = conf["journalMaxGroupWaitMSec"] / 1000.0
        self.bytes_threshold = conf["journalBufferedWritesThreshold"]
        self.entries_threshold = conf["journalBufferedEntriesThreshold"]
        self.flush_when_queue_empty = conf["journalFlushWhenQueueEmpty"]
        self.sync_data = conf["journalSyncData"]
        self.remove_pages_from_cache = conf["journalRemoveFromPageCache"]
        self._queue: queue.Queue[_Request | None] = queue.Queue(conf["journalQueueSize"])
        self._channel: JournalChannel | None = None
        self._thread: threading.Thread | None = None
        self._force_queue: queue.SimpleQueue = queue.SimpleQueue()  # (channel, end, requests) | _CLOSE | None
        self._force_thread: threading.Thread | None = None
        self._failure: JournalException | None = None
        self._failure_lock = threading.Lock()
        # Told once when a write or fsync fails: the bookie stops (BookKeeper's Journal thread dies and
        # the bookie exits), as nothing more may be acknowledged from this journal.
        self.on_failure: Callable[[JournalException], None] | None = None
        self.last_log_mark = LogMark(0, 0)  # everything before it is written and fsynced
        # Each counted by one thread (the journal thread, the force-write thread): the queue gauges are
        # their differences, sampled at scrape time, nothing updated per request.
        self._groups_written = self._requests_written = 0
        self._groups_synced = self._requests_synced = 0
        stats_logger = stats_logger.scope_label(names.JOURNAL_INDEX_LABEL, str(index))
        self._stats = JournalStats(stats_logger)
        stats_logger.register_gauge(names.JOURNAL_QUEUE_SIZE, self._queue.qsize)  # requests not yet written
        # Groups written and waiting for their fsync (BookKeeper's ForceWriteRequests).
        stats_logger.register_gauge(names.JOURNAL_FORCE_WRITE_QUEUE_SIZE,
                                    lambda: self._groups_written - self._groups_synced)
        # Requests logged and not yet answered (queued, written, or waiting for their fsync).
        stats_logger.register_gauge(names.JOURNAL_CB_QUEUE_SIZE,
                                    lambda: self._queue.qsize() + self._requests_written - self._requests_synced)
        os.makedirs(journal_current_dir(journal_dir), exist_ok=True)

    # -- writing ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Open a new journal file (after replay) and start the journal thread."""
        existing = list_journal_ids(self.journal_dir)
        log_id = max(int(time.time() * 1000), (existing[-1] + 1) if existing else 0)
        self._channel = self._new_channel(log_id)
        self.last_log_mark = LogMark(log_id, self._channel.position)
        self._thread = threading.Thread(target=self._run, name=f"BookieJournal-{self.index}", daemon=True)
        self._force_thread = threading.Thread(target=self._force_writes, name=f"ForceWriteThread-{self.index}", daemon=True)
        self._thread.start()
        self._force_thread.start()

    def log(self, data: bytes, callback: Callback | None, entries: int = 1) -> None:
        """Queue framed records; ``callback(None)`` runs once they are fsynced (or ``callback(error)``)."""
        if self._failure is not None:
            raise JournalException(f"journal {self.journal_dir} failed earlier, the bookie is stopping: "
                                   f"{self._failure}")
        self._queue.put(_Request(data, callback, entries))

    def has_room(self, requests: int) -> bool:
        """Whether ``requests`` more can be queued without blocking (back-pressure check)."""
        return self._queue.qsize() + requests <= self._queue.maxsize

    def _run(self) -> None:
        q, stats = self._queue, self._stats
        while True:
            request = q.get()
            if request is None:
                return
            started = time.monotonic()
            group: list[_Request] = []
            nbytes = nentries = forces = 0
            enqueued = forces_enqueued = 0.0
            deadline = request.enqueued + self.max_group_wait
            stop = False
            while True:
                group.append(request)
                nbytes += len(request.data)
                entries = request.entries
                if entries:
                    nentries += entries
                    enqueued += request.enqueued * entries
                else:  # a force-ledger request: nothing of its own to write
                    forces += 1
                    forces_enqueued += request.enqueued
                if nbytes >= self.bytes_threshold or (self.entries_threshold and nentries >= self.entries_threshold):
                    stats.flush_max_outstanding_bytes.inc()
                    break
                try:
                    request = q.get_nowait()
                except queue.Empty:
                    if self.flush_when_queue_empty:
                        stats.flush_empty_queue.inc()
                        break
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        stats.flush_max_wait.inc()
                        break
                    try:
                        request = q.get(timeout=wait)
                    except queue.Empty:
                        stats.flush_max_wait.inc()
                        break
                if request is None:
                    stop = True
                    break
            self._flush(group, nbytes, nentries, enqueued, forces, forces_enqueued, started)
            if stop:
                return

    def _flush(self, group: list[_Request], nbytes: int, nentries: int, enqueued: float, forces: int,
               forces_enqueued: float, started: float) -> None:
        """Write a group (records + padding with its CRC) and hand it to the force-write thread; ``nentries``
        .. ``forces_enqueued`` are what its fsync records (``_Written``), ``started`` when the journal thread
        took its first request."""
        if self._failure is not None:  # nothing is written after a failed write or fsync
            self._complete(group, self._failure)
            return
        stats = self._stats
        try:
            channel = self._channel
            if channel.position > HEADER_SIZE and channel.position + nbytes + self.alignment > self.max_size:
                channel = self._roll()
            crc = 0
            for request in group:
                crc = crc32c.crc32c(request.data, crc)
            pad = padding_record(channel.position + nbytes, crc, nbytes, self.alignment)
            writing = time.monotonic()
            channel.write([r.data for r in group if r.data] + [pad])
        except OSError as exc:
            self._complete(group, self.fail(f"journal write to {self.journal_dir} failed: {exc}"))
            return
        written = time.monotonic()
        stats.flush.register_successful_event(written - writing)
        stats.write_bytes.inc(nbytes + len(pad))
        stats.force_write_batch_entries.register_successful_value(nentries)
        stats.force_write_batch_bytes.register_successful_value(nbytes)
        stats.process_time.register_successful_event(written - started)
        self._groups_written += 1
        self._requests_written += len(group)
        self._force_queue.put(_Written(channel, channel.position, group, nentries, enqueued, forces, forces_enqueued))

    def _force_writes(self) -> None:
        """Force-write thread: one fdatasync for all groups written so far, then their callbacks."""
        q = self._force_queue
        stop = False
        while not stop:
            items = [q.get()]
            while True:
                try:
                    items.append(q.get_nowait())
                except queue.Empty:
                    break
            synced: set[int] = set()
            closing = []
            drop: dict[JournalChannel, int] = {}  # channel -> synced end whose pages leave the cache
            stats = self._stats
            groups = 0
            for item in items:
                if item is None:
                    stop = True
                elif item[0] is _CLOSE_CHANNEL:
                    closing.append(item[1])  # a rolled journal: closed once what was written to it is synced
                else:
                    channel, end, group = item.channel, item.end, item.group
                    groups += 1
                    # After a failure every group still waiting fails too, synced or not, and the
                    # LastLogMark stays before the failed group: a later fsync that "succeeds" may
                    # not have persisted the pages the failed one dropped.
                    error = self._failure
                    if error is None and self.sync_data and id(channel) not in synced:
                        syncing = time.monotonic()
                        try:
                            self._fdatasync(channel.fd)
                            synced.add(id(channel))
                            stats.sync.register_successful_event(time.monotonic() - syncing)
                        except OSError as exc:
                            stats.sync.register_failed_event(time.monotonic() - syncing)
                            error = self.fail(f"journal fsync of {channel.path} failed: {exc}")
                    if error is None:
                        self.last_log_mark = LogMark(channel.log_id, end)
                        if self.sync_data and self.remove_pages_from_cache:
                            drop[channel] = end
                    self._record_synced(item, error)
                    self._complete(group, error)
                    self._groups_synced += 1
                    self._requests_synced += len(group)
            if groups:
                stats.force_write_grouping.register_successful_value(groups)
            # Pages leave the cache once the adds are answered: the advice is not on the ack path.
            for channel, end in drop.items():
                channel.drop_synced_pages(end)
            for channel in closing:
                channel.close()

    def _record_synced(self, written: _Written, error: Exception | None) -> None:
        """JOURNAL_ADD_ENTRY and JOURNAL_FORCE_LEDGER of a group whose fsync is done: one event per group, of
        its entries' mean latency (their sum exact), before the callbacks run (as BookKeeper's QueueEntry)."""
        now = time.monotonic()
        for logger, count, enqueued in ((self._stats.add_entry, written.entries, written.enqueued),
                                        (self._stats.force_ledger, written.forces, written.forces_enqueued)):
            if count:
                record = logger.register_successful_event if error is None else logger.register_failed_event
                record(now - enqueued / count, count)

    def _fdatasync(self, fd: int) -> None:
        """The force-write thread's sync (a method, so a test can make it fail in its own process)."""
        os.fdatasync(fd)

    def fail(self, message: str) -> JournalException:
        """Stop this journal for good: every group not yet acknowledged, and every later one, fails."""
        with self._failure_lock:
            first = self._failure is None
            if first:
                self._failure = JournalException(message)
        if first:
            log.error("%s", message)
            if self.on_failure is not None:
                self.on_failure(self._failure)
        return self._failure

    @staticmethod
    def _complete(group: list[_Request], error: Exception | None) -> None:
        for request in group:
            if request.callback is not None:
                try:
                    request.callback(error)
                except Exception:  # a failing callback must not stop the journal
                    log.exception("journal callback failed")

    def _roll(self) -> JournalChannel:
        old = self._channel
        # The force-write thread closes it after syncing what was written to it.
        self._force_queue.put((_CLOSE_CHANNEL, old))
        self._channel = self._new_channel(old.log_id + 1)
        log.info("journal rolled: %x.txn -> %x.txn", old.log_id, self._channel.log_id)
        return self._channel

    def _new_channel(self, log_id: int) -> JournalChannel:
        creating = time.monotonic()
        channel = JournalChannel(self.journal_dir, log_id, self.prealloc)
        self._stats.creation.register_successful_event(time.monotonic() - creating)
        return channel

    def shutdown(self) -> None:
        """Flush what is queued, then stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._force_queue.put(None)
            self._force_thread.join()
            self._thread = self._force_thread = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # -- after a checkpoint ------------------------------------------------------------------------
    def gc_journals(self, mark: LogMark) -> list[int]:
        """Delete journal files older than ``mark`` beyond the newest ``journalMaxBackups`` of them."""
        older = [i for i in list_journal_ids(self.journal_dir) if i < mark.log_id]
        doomed = older[: max(0, len(older) - self.max_backups)]
        for log_id in doomed:
            os.unlink(journal_path(self.journal_dir, log_id))
            log.info("deleted journal %x.txn (LastLogMark is %x:%d)", log_id, mark.log_id, mark.offset)
        return doomed


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
