"""The journal: every change to a ledger is written and fsynced here before it is acknowledged.

Files are ``<journalDir>/current/<hex id>.txn`` (BookKeeper's Journal and JournalChannel): a 512-byte header (``BKLG``, version 6,
zero padded), then records ``int32 len | payload``. A payload is an entry (exactly as the client sent
it) or a metadata record (master key, fence, explicit LAC; negative entry ids).

Group commit, in two threads as in BookKeeper: the journal thread drains everything queued into a
group (bounded by ``journalMaxGroupWaitMSec``, ``journalBufferedWritesThreshold`` and
``journalBufferedEntriesThreshold``) and writes it with ONE ``pwritev``; the force-write thread
``fdatasync``s everything written so far with ONE call (groups written meanwhile share it:
``journalAdaptiveGroupWrites``), advances the LastLogMark and only then runs the callbacks. So the
next group is written while the previous one is being synced.

Each group ends with a padding record (``int32 -0x100 | int32 padLen | pad``) that aligns the file to
``journalAlignmentSize``, as BookKeeper's V5+ journals do. Our pad starts with ``BKGC`` + CRC32C + the
group's length, so replay verifies every group. A bad group with nothing verified after it is a torn
tail (never acknowledged: its fsync never returned) and replay ends there; a bad group with verified
groups after it held acknowledged entries, and replay refuses to go on (``JournalCorruption``) unless
``skipReplayJournalInvalidRecord`` is set. BookKeeper's readers ignore pad contents.

A failed write or fsync stops the journal for good (``Journal.fail``): every group behind it fails,
the LastLogMark stays before it, and ``on_failure`` tells the bookie, which shuts down.
"""
from __future__ import annotations

import logging
import mmap
import os
import queue
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

import crc32c

from bookie.exceptions import JournalException
from bookie.proto import entry_format
from bookie.util.io import pwritev_all

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


class JournalChannel:
    """One journal file open for appending, preallocated in ``journalPreAllocSizeMB`` steps."""

    def __init__(self, journal_dir: str, log_id: int, prealloc_bytes: int):
        self.log_id = log_id
        self.path = journal_path(journal_dir, log_id)
        self._prealloc = prealloc_bytes
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

    def close(self) -> None:
        os.close(self.fd)


class Journal:
    """One journal directory and its group-commit thread."""

    def __init__(self, journal_dir: str, conf, index: int = 0):
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
        os.makedirs(journal_current_dir(journal_dir), exist_ok=True)

    # -- writing ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Open a new journal file (after replay) and start the journal thread."""
        existing = list_journal_ids(self.journal_dir)
        log_id = max(int(time.time() * 1000), (existing[-1] + 1) if existing else 0)
        self._channel = JournalChannel(self.journal_dir, log_id, self.prealloc)
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
        q = self._queue
        while True:
            first = q.get()
            if first is None:
                return
            group = [first]
            nbytes, nentries, stop = len(first.data), first.entries, False
            deadline = first.enqueued + self.max_group_wait
            while nbytes < self.bytes_threshold and not (self.entries_threshold and nentries >= self.entries_threshold):
                try:
                    request = q.get_nowait()
                except queue.Empty:
                    wait = deadline - time.monotonic()
                    if self.flush_when_queue_empty or wait <= 0:
                        break
                    try:
                        request = q.get(timeout=wait)
                    except queue.Empty:
                        break
                if request is None:
                    stop = True
                    break
                group.append(request)
                nbytes += len(request.data)
                nentries += request.entries
            self._flush(group, nbytes)
            if stop:
                return

    def _flush(self, group: list[_Request], nbytes: int) -> None:
        """Write a group (records + padding with its CRC) and hand it to the force-write thread."""
        if self._failure is not None:  # nothing is written after a failed write or fsync
            self._complete(group, self._failure)
            return
        try:
            channel = self._channel
            if channel.position > HEADER_SIZE and channel.position + nbytes + self.alignment > self.max_size:
                channel = self._roll()
            crc = 0
            for request in group:
                crc = crc32c.crc32c(request.data, crc)
            pad = padding_record(channel.position + nbytes, crc, nbytes, self.alignment)
            channel.write([r.data for r in group if r.data] + [pad])
        except OSError as exc:
            self._complete(group, self.fail(f"journal write to {self.journal_dir} failed: {exc}"))
            return
        self._force_queue.put((channel, channel.position, group))

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
            for item in items:
                if item is None:
                    stop = True
                elif item[0] is _CLOSE_CHANNEL:
                    closing.append(item[1])  # a rolled journal: closed once what was written to it is synced
                else:
                    channel, end, group = item
                    # After a failure every group still waiting fails too, synced or not, and the
                    # LastLogMark stays before the failed group: a later fsync that "succeeds" may
                    # not have persisted the pages the failed one dropped.
                    error = self._failure
                    if error is None and self.sync_data and id(channel) not in synced:
                        try:
                            self._fdatasync(channel.fd)
                            synced.add(id(channel))
                        except OSError as exc:
                            error = self.fail(f"journal fsync of {channel.path} failed: {exc}")
                    if error is None:
                        self.last_log_mark = LogMark(channel.log_id, end)
                    self._complete(group, error)
            for channel in closing:
                channel.close()

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
        self._channel = JournalChannel(self.journal_dir, old.log_id + 1, self.prealloc)
        log.info("journal rolled: %x.txn -> %x.txn", old.log_id, self._channel.log_id)
        return self._channel

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


# -- reading ------------------------------------------------------------------------------------
@dataclass
class JournalCorruption:
    """A bad spot with a verified group after it: not a torn tail, so it held acknowledged entries."""

    path: str
    offset: int  # where the bad group starts
    reason: str
    next_group: int  # where the next verified group starts

    def __str__(self) -> str:
        return (f"{self.path} is corrupt at byte {self.offset} ({self.reason}); "
                f"a verified group follows at byte {self.next_group}")


@dataclass
class ScanResult:
    end: LogMark  # position just after the last good group
    groups: int = 0
    records: int = 0
    torn: str | None = None  # why the scan stopped early, if it did
    corrupt: JournalCorruption | None = None  # the stop is not a torn tail: verified groups follow it
    skipped: list[JournalCorruption] = field(default_factory=list)  # passed over (skip_invalid)


class _Group(NamedTuple):
    start: int
    records_end: int  # where its padding record starts
    end: int  # after its padding
    count: int  # records
    checked: bool  # its padding carried a BKGC check, and it matched


def scan_journal(journal_dir: str, log_id: int, start: int, on_group: Callable[[memoryview], None],
                 skip_invalid: bool = False) -> ScanResult:
    """Feed every complete, verified group of records from ``start`` on to ``on_group``.

    A group is handed over as one memoryview of framed records (padding excluded). The scan ends at
    the end of the journal (a zero length where a group starts). At a torn or corrupt group, and at
    that end, it looks for a verified group further on. None: the bad spot is a torn tail, whose
    fsync never returned, so nothing in it was acknowledged; ``ScanResult.torn`` says why the scan
    stopped. One: the bad spot is corruption of acknowledged data, named in ``ScanResult.corrupt``,
    and the scan stops there; with ``skip_invalid`` (skipReplayJournalInvalidRecord) it is logged,
    listed in ``ScanResult.skipped`` and the scan goes on at the verified group.
    """
    path = journal_path(journal_dir, log_id)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            return ScanResult(LogMark(log_id, start), torn=f"{path}: {size}-byte file has no journal header")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                return _scan(mm, view, path, log_id, start, on_group, skip_invalid)
            finally:
                view.release()


def _scan(data: mmap.mmap, view: memoryview, path: str, log_id: int, start: int, on_group,
          skip_invalid: bool) -> ScanResult:
    result = ScanResult(LogMark(log_id, start))
    if bytes(view[:4]) != JOURNAL_MAGIC:
        pos, reason = 0, "the header has no BKLG magic"
    else:
        (version,) = struct.unpack_from(">i", view, 4)
        pos, reason = max(start, HEADER_SIZE if version >= 5 else 8), None
        result.end = LogMark(log_id, pos)
    checked = False  # once one group carried a BKGC check, every later one must
    while True:
        if reason is None:
            group = _read_group(view, pos, checked)
            if isinstance(group, _Group):
                if group.count:
                    on_group(view[pos:group.records_end])
                    result.groups += 1
                    result.records += group.count
                checked = checked or group.checked
                pos = group.end
                result.end = LogMark(log_id, pos)
                continue
            reason = group  # None: a zero length, the end of the journal unless a verified group follows
        found = _find_verified_group(data, view, pos)
        if found is None:
            if reason is not None:
                result.torn = f"{path}: {reason}"
            return result
        corruption = JournalCorruption(path, pos, reason or "a zero length where a group should start", found.start)
        if not skip_invalid:
            result.corrupt = corruption
            result.torn = str(corruption)
            return result
        log.error("skipping corrupt journal bytes, as skipReplayJournalInvalidRecord=true asks: %s; "
                  "entries written there are lost on this bookie", corruption)
        result.skipped.append(corruption)
        if found.count:
            on_group(view[found.start:found.records_end])
            result.groups += 1
            result.records += found.count
        checked, pos, reason = True, found.end, None
        result.end = LogMark(log_id, pos)


def _read_group(view: memoryview, pos: int, require_check: bool) -> _Group | str | None:
    """The group starting at ``pos``; or why it is bad; or None at the end of the journal."""
    size, first, count = len(view), pos, 0
    while pos + 4 <= size:
        (length,) = entry_format.FRAME.unpack_from(view, pos)
        if length == 0:
            break
        if length == PADDING_MASK:
            if pos + 8 > size:
                return f"padding record at byte {pos} is cut short"
            (pad_len,) = struct.unpack_from(">i", view, pos + 4)
            end = pos + 8 + pad_len
            if pad_len < 0 or end > size:
                return f"padding of {pad_len} bytes at byte {pos} runs past the file end"
            has_check = pad_len >= _GROUP_CHECK.size and bytes(view[pos + 8: pos + 12]) == GROUP_CHECK_MAGIC
            if has_check:
                _, crc, glen = _GROUP_CHECK.unpack_from(view, pos + 8)
                if glen != pos - first or crc32c.crc32c(view[first:pos]) != crc:
                    return f"group at bytes {first}..{pos} fails its checksum"
            elif require_check:  # BookKeeper's own journals have no check; ours have it on every group
                return f"group at bytes {first}..{pos} lacks the BKGC check the groups before it carry"
            return _Group(first, pos, end, count, has_check)
        if length < 0 or pos + 4 + length > size:
            return f"record of length {length} at byte {pos} runs past the file end"
        pos += 4 + length
        count += 1
    return f"{count} records at bytes {first}..{pos} have no group end" if count else None


def _find_verified_group(data: mmap.mmap, view: memoryview, start: int) -> _Group | None:
    """The first group starting at or after ``start`` whose BKGC check matches its records.

    Candidates are found by their check's magic (a C-speed search), so the preallocated zeros after
    the end of a journal cost next to nothing.
    """
    size = len(view)
    at = data.find(GROUP_CHECK_MAGIC, start + _PAD_HEADER.size)
    while at >= 0 and at + _GROUP_CHECK.size <= size:
        pad = at - _PAD_HEADER.size
        marker, pad_len = _PAD_HEADER.unpack_from(view, pad)
        _, crc, glen = _GROUP_CHECK.unpack_from(view, at)
        first, end = pad - glen, pad + _PAD_HEADER.size + pad_len
        if marker == PADDING_MASK and pad_len >= _GROUP_CHECK.size and end <= size and first >= start:
            count = _count_records(view, first, pad)
            if count is not None and crc32c.crc32c(view[first:pad]) == crc:
                return _Group(first, pad, end, count, True)
        at = data.find(GROUP_CHECK_MAGIC, at + 1)
    return None


def _count_records(view: memoryview, pos: int, stop: int) -> int | None:
    """How many records exactly fill ``[pos, stop)``; None if they do not."""
    count = 0
    while pos < stop:
        if pos + 4 > stop:
            return None
        (length,) = entry_format.FRAME.unpack_from(view, pos)
        if length <= 0:
            return None
        pos += 4 + length
        count += 1
    return count if pos == stop else None


def iter_records(group: memoryview) -> Iterator[memoryview]:
    """The records (payloads) of a group handed over by ``scan_journal``."""
    return entry_format.iter_frames(group)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
