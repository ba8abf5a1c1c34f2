"""Entry logs: the entries of all ledgers, interleaved, in the order they arrive (DefaultEntryLogger).

The files and an entry's *location* (what the index stores) are in bookie.server.entry_log_format.

Writes go to a buffer, written out when it fills (``writeBufferSizeBytes``) and fsynced by a
checkpoint. The buffer holds the batches themselves (immutable bytes, as they came off the wire); a
writer thread writes them with one ``pwritev`` each time the buffer fills, so adds never wait for the
page cache (up to ``MAX_BUFFERED_FACTOR`` buffers; past that, adds wait). No copy of an entry in Python. A log is rolled at ``entryLogSizeLimit``; a finished log (rolled, or closed at shutdown)
ends with its *ledgers map* — which ledgers it holds and how many bytes each — and its header points
at it, so GC and compaction need not scan it. The next log id is kept in ``current/lastId`` (hex).

A roll on the add path writes the ledgers map but neither fsyncs the log nor patches its header: the
log joins the *rotated* logs, which the next checkpoint fsyncs, then points the header at the map
(fsynced again) and closes, as BookKeeper's EntryLogManager flushes rotated logs in its checkpoint.
So an add never waits for a gigabyte of entry log to reach the disk, and a header never points at a
map that is not on disk. A checkpoint's fsyncs run outside the logger's lock: adds go on meanwhile.

Written pages leave the page cache once they are on disk (``entryLogRemoveFromPageCache``): at each
``flushEntrylogBytes`` step the writer thread drops the step before (its writeback has had a step's
time to finish), and a checkpoint drops its rotated logs after fsyncing them. New writes then reuse
those pages instead of growing the cache: on this project's VMs a page the cache has not held before
costs several times its copy, and a bookie that kept every log it wrote in the cache spent twice the CPU
per entry after a few gigabytes. The newest step or two stay cached, and so does the unwritten buffer,
for tailing reads; older entries are read from disk, a range read asking the kernel to read ahead
(``entryLogReadAheadBytes``). The step, ``flushEntrylogBytes`` (1 MiB by default), bounds how much entry
log the journal's fsyncs can queue behind on a disk the two share.

A writeback failure met there is sticky (``_writeback_error``): the kernel reports it once, to that call,
so adds stop and no checkpoint passes from then on; the bookie's shutdown then abandons the storage as
after a crash, and replay from the LastLogMark restores the entries the journal holds.
"""
from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
import threading
from dataclasses import dataclass

from bookie.exceptions import EntryLogCorruptedException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.server.entry_log_format import (LOG_HEADER, LOG_HEADER_SIZE, LOG_MAGIC, MAX_LOG_SIZE, decode_ledgers_map,
                                            encode_ledgers_map, encode_log_header, entry_log_paths, location,
                                            log_id_in, log_path)
from bookie.util.io import drop_clean_pages, drop_written_pages, pwritev_all, read_ahead, start_writeback

log = logging.getLogger(__name__)

MAX_BUFFERED_FACTOR = 8
RECORD_READ_AHEAD = 4096  # bytes read with a record's size (read_framed): a whole entry of most ledgers
READ_MANY_PER_HOLD = 64  # read_framed_many: reads per hold of the lock (adds wait for it at most that long)


@dataclass
class RotatedLog:
    """A log rolled on the add path: ledgers map written, not yet fsynced, header not yet patched."""

    fd: int
    map_offset: int
    ledgers: dict[LedgerId, int]


def _immutable(blob) -> bool:
    """Whether ``blob``'s bytes can never change: bytes, or a view into bytes (an add's received message)."""
    return isinstance(blob, bytes) or (isinstance(blob, memoryview) and isinstance(blob.obj, bytes))


class EntryLogger:
    """Appends framed batches to the current entry log and reads records back by location."""

    def __init__(self, ledger_dirs: list[str], conf):
        self.ledger_dirs = ledger_dirs
        self.size_limit = min(conf["entryLogSizeLimit"], MAX_LOG_SIZE)
        self.buffer_size = conf["writeBufferSizeBytes"]
        self.writeback_bytes = conf["flushEntrylogBytes"]
        self.remove_from_page_cache = conf["entryLogRemoveFromPageCache"]
        self.read_ahead = conf["entryLogReadAheadBytes"]
        self.max_record = conf["nettyMaxFrameSizeBytes"]
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # buffer filled / written
        # Held by whoever fsyncs or closes a log's write fd (checkpoint, removal, shutdown), so no fd is
        # closed, and its number reused, under a fsync. Taken before ``_lock``, never inside it.
        self._flush_lock = threading.Lock()
        self._rotated: dict[int, RotatedLog] = {}
        self._writing = False
        self._stopping = False
        self._write_error: OSError | None = None
        self._writeback_error: OSError | None = None  # written pages lost: no checkpoint may pass
        for ledger_dir in ledger_dirs:
            os.makedirs(os.path.join(ledger_dir, "current"), exist_ok=True)
        self._paths: dict[int, str] = entry_log_paths(ledger_dirs)
        self._read_fds: dict[int, int] = {}
        self._read_ahead_to: dict[int, int] = {}  # log id -> the end of what the kernel was asked to read ahead
        self._ledgers_map: dict[LedgerId, int] = {}
        self._chunks: list[bytes] = []  # unwritten batches of the current log, in order
        self._chunk_starts: list[int] = []  # file offset of each chunk
        self._buffered = 0
        self.writable_dirs = list(ledger_dirs)
        self._reserved_id = -1  # the last id handed to a log written beside this one (compaction)
        self._removed: set[int] = set()  # ids of logs removed while the bookie runs (never reused)
        self._open_new_log(self._last_id() + 1)
        self._writer = threading.Thread(target=self._write_behind, name="EntryLogWriter", daemon=True)
        self._writer.start()

    # -- log files -------------------------------------------------------------------------------
    def _last_id(self) -> int:
        last = max(self._paths, default=-1)
        for ledger_dir in self.ledger_dirs:
            ids = (log_id_in(name) for name in os.listdir(os.path.join(ledger_dir, "current")))
            last = max([last, *(i for i in ids if i is not None)])
            try:
                with open(os.path.join(ledger_dir, "current", "lastId")) as f:
                    last = max(last, int(f.read().strip() or "-1", 16))
            except (FileNotFoundError, ValueError):
                pass
        return last

    def _pick_dir(self) -> str:
        candidates = self.writable_dirs or self.ledger_dirs
        return max(candidates, key=lambda d: shutil.disk_usage(d).free)

    def _open_new_log(self, log_id: int) -> None:
        ledger_dir = self._pick_dir()
        path = log_path(ledger_dir, log_id)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.pwrite(self.fd, encode_log_header(), 0)
        self.log_id = log_id
        self._paths[log_id] = path
        self._flushed = LOG_HEADER_SIZE  # bytes of the current log already written to the file
        self._writeback_from = LOG_HEADER_SIZE  # written bytes from here on are not handed to writeback yet
        self._cached_from = 0  # pages before this offset were written back and dropped from the page cache
        self._chunks, self._chunk_starts, self._buffered = [], [], 0
        self._ledgers_map = {}
        self._write_last_id(ledger_dir, log_id)

    @staticmethod
    def _write_last_id(ledger_dir: str, log_id: int) -> None:
        with open(os.path.join(ledger_dir, "current", "lastId"), "w") as f:
            f.write(f"{log_id:x}")
            f.flush()
            os.fsync(f.fileno())

    @property
    def position(self) -> int:
        return self._flushed + self._buffered

    def log_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._paths)

    def finished_log_ids(self) -> list[int]:
        """Every log but the one being written, taken together under the lock: a log listed here never
        grows again (GC must not describe a log from a scan that a roll then extends)."""
        with self._lock:
            return sorted(i for i in self._paths if i != self.log_id)

    # -- logs written or removed beside the current one (compaction, GC) ----------------------------
    def reserve_log_id(self, ledger_dir: str) -> int:
        """A fresh log id for a log another writer makes (compaction); kept in lastId so no restart
        reuses it (BookKeeper's EntryLoggerAllocator hands out compaction log ids the same way)."""
        with self._lock:
            self._reserved_id = max(self.log_id, self._reserved_id) + 1
            self._write_last_id(ledger_dir, self._reserved_id)
            return self._reserved_id

    def path_of(self, log_id: int) -> str | None:
        with self._lock:
            return self._paths.get(log_id)

    def add_log(self, log_id: int, path: str, read_fd: int | None = None) -> None:
        """Serve reads of ``log_id`` from ``path`` (or from ``read_fd``, which survives renames)."""
        with self._lock:
            self._paths[log_id] = path
            if read_fd is not None:
                self._read_fds[log_id] = read_fd

    def remove_log(self, log_id: int) -> None:
        """Delete a finished log. A reader that looked up a location in it before finds it gone
        (``was_removed``) and looks the entry up again."""
        with self._lock:
            was_rotated = log_id in self._rotated  # no other log becomes rotated: only the current one rolls
        # Only a rotated log's write fd needs the flush lock: other removals never wait for a checkpoint's fsync.
        with self._flush_lock if was_rotated else contextlib.nullcontext(), self._lock:
            if log_id == self.log_id:
                raise ValueError(f"entry log {log_id:x}.log is being written: it cannot be removed")
            fd = self._read_fds.pop(log_id, None)
            self._read_ahead_to.pop(log_id, None)
            if fd is not None:
                os.close(fd)
            rotated = self._rotated.pop(log_id, None)
            if rotated is not None:
                os.close(rotated.fd)
            path = self._paths.pop(log_id, None)
            self._removed.add(log_id)
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def was_removed(self, log_id: int) -> bool:
        with self._lock:
            return log_id in self._removed

    def current_log_usage(self) -> tuple[int, int, dict[LedgerId, int]]:
        """The log being written: its id, its size so far, and the bytes each ledger has in it."""
        with self._lock:
            return self.log_id, self.position, dict(self._ledgers_map)

    # -- writing ---------------------------------------------------------------------------------
    def add_framed(self, ledger: LedgerId, blob) -> int:
        """Append a framed batch of ``ledger``'s entries; returns the location of the batch's first byte.

        The entry framed at byte k of ``blob`` is then at location ``result + k + 4``.
        """
        with self._lock:
            while self._buffered >= MAX_BUFFERED_FACTOR * self.buffer_size and self._write_error is None:
                self._changed.wait()  # the writer thread is behind: hold the add back
            if self._write_error is not None:
                raise self._write_error
            if self.position > LOG_HEADER_SIZE and self.position + len(blob) > self.size_limit:
                self.roll()
            position = self.position
            if not _immutable(blob):
                blob = bytes(blob)  # the buffer keeps a reference: it must not change under us
            self._chunks.append(blob)
            self._chunk_starts.append(position)
            self._buffered += len(blob)
            self._ledgers_map[ledger] = self._ledgers_map.get(ledger, 0) + len(blob)
            if self._buffered >= self.buffer_size:
                self._changed.notify_all()
            return location(self.log_id, position)

    def _write_behind(self) -> None:
        """Writer thread: write full buffers while adds go on (chunks stay readable until written)."""
        while True:
            with self._lock:
                while not self._stopping and (self._buffered < self.buffer_size or self._writing):
                    self._changed.wait()
                if self._stopping:
                    return
                chunks, fd, pos = list(self._chunks), self.fd, self._flushed
                self._writing = True
            error = lost = None
            try:
                end = pwritev_all(fd, chunks, pos)
            except OSError as exc:
                error = exc
                log.error("entry log write failed: %s", exc)
            else:
                try:
                    self._start_writeback(fd, end)
                except OSError as exc:
                    lost = OSError(exc.errno, f"entry log {self.log_id:x}.log: pages written earlier did not reach "
                                              f"the disk ({exc.strerror}); no checkpoint from now on, so the "
                                              f"journal keeps those entries for replay")
                    log.error("%s", lost)
            with self._lock:
                self._writing = False
                if error is None:
                    self._drop_written(len(chunks), end)
                else:
                    self._write_error = error
                if lost is not None:
                    self._write_error = self._writeback_error = lost
                self._changed.notify_all()

    def _start_writeback(self, fd: int, end: int) -> None:
        """Every ``flushEntrylogBytes`` written, start their writeback (BookKeeper's regular entry-log
        flushes): the disk takes the log as it comes instead of all at the checkpoint, when the journal's
        fsyncs would queue behind it; then drop the step before from the page cache. Writer thread only,
        while ``_writing`` holds rolls off."""
        if not self.writeback_bytes or end - self._writeback_from < self.writeback_bytes:
            return
        try:
            start_writeback(fd, self._writeback_from, end - self._writeback_from)
        except OSError as exc:  # the checkpoint's fsync writes them anyway
            log.warning("entry log writeback not started: %s", exc)
        if self.remove_from_page_cache:
            # Raises if their writeback failed: the kernel reports that once, here, not to a later fsync.
            self._cached_from = drop_written_pages(fd, self._cached_from, self._writeback_from)
        self._writeback_from = end

    def _drop_written(self, count: int, end: int) -> None:
        self._buffered -= end - self._flushed
        del self._chunks[:count]
        del self._chunk_starts[:count]
        self._flushed = end

    def _write_buffer(self) -> None:
        """Write every buffered chunk now (caller holds the lock; waits for the writer thread first)."""
        while self._writing:
            self._changed.wait()
        if self._chunks:
            self._drop_written(len(self._chunks), pwritev_all(self.fd, self._chunks, self._flushed))
            self._changed.notify_all()

    def _read_buffered(self, offset: int, size: int) -> bytes:
        """Bytes ``[offset, offset+size)`` of the unwritten chunks (fewer past their end: a read ahead)."""
        i = max(bisect.bisect_right(self._chunk_starts, offset) - 1, 0)  # none unwritten: 0, and nothing read
        parts, need = [], size
        while need > 0 and i < len(self._chunks):
            chunk = self._chunks[i]
            rel = offset - self._chunk_starts[i]
            piece = chunk[rel: rel + need]
            parts.append(piece)
            need -= len(piece)
            offset += len(piece)
            i += 1
        return b"".join(parts)

    def flush(self) -> None:
        """Everything added so far on disk (checkpoint, index writes): rotated logs fsynced, their headers
        pointed at their maps and fsynced, then the current log fsynced. Only the write of the buffer
        holds the lock; adds go on during the fsyncs."""
        with self._flush_lock:
            with self._lock:
                if self._writeback_error is not None:
                    raise self._writeback_error
                self._write_buffer()
                rotated, fd = list(self._rotated.items()), self.fd
            for log_id, log_ in rotated:
                self._fsync(log_.fd)  # the entries and the ledgers map first ...
                os.pwrite(log_.fd, encode_log_header(log_.map_offset, len(log_.ledgers)), 0)
                self._fsync(log_.fd)  # ... then the header that points at the map
                if self.remove_from_page_cache:  # all of it clean now: its pages go back to the kernel
                    drop_clean_pages(log_.fd)
                with self._lock:
                    del self._rotated[log_id]
                os.close(log_.fd)
            if fd >= 0:  # rolled meanwhile or not, it stays open: only a holder of _flush_lock closes a log
                self._fsync(fd)

    def _fsync(self, fd: int) -> None:
        """A checkpoint's fsync of a log (a method, so a test can hold it)."""
        os.fsync(fd)

    def roll(self) -> None:
        """Finish the current log (buffer, ledgers map) and start the next one; the checkpoint fsyncs it."""
        with self._lock:
            map_offset = self._write_ledgers_map()
            self._rotated[self.log_id] = RotatedLog(self.fd, map_offset, dict(self._ledgers_map))
            self._open_new_log(max(self.log_id, self._reserved_id) + 1)
            log.info("entry log rolled to %x.log", self.log_id)

    def _write_ledgers_map(self) -> int:
        """Write the buffer, then the ledgers map after it; returns the map's offset."""
        self._write_buffer()
        map_offset = self._flushed
        self._chunks.append(encode_ledgers_map(self._ledgers_map))
        self._chunk_starts.append(map_offset)
        self._write_buffer()
        return map_offset

    def _finish_current(self) -> None:
        """Shutdown: the ledgers map, the header pointing at it, fsynced, closed."""
        map_offset = self._write_ledgers_map()
        os.pwrite(self.fd, encode_log_header(map_offset, len(self._ledgers_map)), 0)
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1

    def shutdown(self) -> None:
        self.flush()  # rotated logs finished first
        with self._flush_lock, self._lock:
            if self.fd >= 0:
                self._finish_current()
            self._stopping = True
            self._changed.notify_all()
        self._writer.join()
        with self._lock:
            for fd in self._read_fds.values():
                os.close(fd)
            self._read_fds.clear()

    def abandon(self) -> None:
        """Stop after a failure without writing anything more (no ledgers map, no header): the logs stay
        as after a crash, and replay from the LastLogMark brings back what they lack."""
        with self._lock:
            self._stopping = True
            self._changed.notify_all()
        self._writer.join()
        with self._flush_lock, self._lock:
            for fd in [self.fd, *(r.fd for r in self._rotated.values()), *self._read_fds.values()]:
                if fd >= 0:
                    os.close(fd)
            self.fd = -1
            self._rotated.clear()
            self._read_fds.clear()

    # -- reading ---------------------------------------------------------------------------------
    def _pread(self, log_id: int, size: int, offset: int) -> bytes:
        """Read bytes of a log, whether in the file or still in the write buffer."""
        if log_id == self.log_id and offset + size > self._flushed:
            if offset >= self._flushed:
                return self._read_buffered(offset, size)
            head = os.pread(self.fd, self._flushed - offset, offset)
            return head + self._read_buffered(self._flushed, offset + size - self._flushed)
        if log_id == self.log_id:
            return os.pread(self.fd, size, offset)
        fd = self._read_fds.get(log_id)
        if fd is None:
            path = self._paths.get(log_id)
            if path is None:
                raise EntryLogCorruptedException(f"entry log {log_id:x}.log does not exist")
            fd = self._read_fds[log_id] = os.open(path, os.O_RDONLY)
        return os.pread(fd, size, offset)

    def read_record(self, loc: int) -> bytes:
        """The entry stored at ``loc`` (without its size int)."""
        return self.read_framed(loc)[entry_format.FRAME_LEN:]

    def read_framed(self, loc: int) -> bytes:
        """The entry stored at ``loc`` with its size int in front (as a read answer frames it). One read
        fetches the size and RECORD_READ_AHEAD bytes after it: most entries come whole with it, where
        reading the size first took a system call more per entry (single-entry reads, small ledgers)."""
        with self._lock:
            return self._read_framed(loc)

    def read_framed_many(self, locs: list[int]) -> list[bytes | None]:
        """``read_framed`` of each location, READ_MANY_PER_HOLD of them under one hold of the lock (a call of
        many small ledgers reads thousands of single entries); None where one fails (read alone, it says why)."""
        out: list[bytes | None] = []
        for start in range(0, len(locs), READ_MANY_PER_HOLD):
            with self._lock:
                for loc in locs[start: start + READ_MANY_PER_HOLD]:
                    try:
                        out.append(self._read_framed(loc))
                    except (EntryLogCorruptedException, OSError):
                        out.append(None)
        return out

    def _read_framed(self, loc: int) -> bytes:
        """``read_framed`` (the caller holds the lock)."""
        log_id, offset = loc >> 32, loc & 0xFFFFFFFF
        head = self._pread(log_id, entry_format.FRAME_LEN + RECORD_READ_AHEAD, offset - entry_format.FRAME_LEN)
        if len(head) < entry_format.FRAME_LEN:
            raise EntryLogCorruptedException(f"entry log {log_id:x}.log ends before offset {offset}")
        (size,) = entry_format.FRAME.unpack_from(head)
        if size < entry_format.V1_HEADER_LEN or size > self.max_record:
            raise EntryLogCorruptedException(f"entry log {log_id:x}.log: record at offset {offset} has bad size {size}")
        framed = entry_format.FRAME_LEN + size
        if len(head) >= framed:
            head = head[:framed]
        elif len(head) == entry_format.FRAME_LEN + RECORD_READ_AHEAD:  # a big entry: the rest of it
            head += self._pread(log_id, framed - len(head), offset - entry_format.FRAME_LEN + len(head))
        if len(head) != framed:
            raise EntryLogCorruptedException(f"entry log {log_id:x}.log: record at offset {offset} is cut short")
        return head

    def read_span(self, log_id: int, first_offset: int, end_offset: int) -> bytes:
        """Raw bytes ``[first_offset, end_offset)`` of a log: many records in one read. A range read goes on
        where the span ends: the kernel is asked to read the next ``entryLogReadAheadBytes`` meanwhile."""
        with self._lock:
            data = self._pread(log_id, end_offset - first_offset, first_offset)
            if self.read_ahead:
                self._read_ahead_after(log_id, end_offset)
            return data

    def _read_ahead_after(self, log_id: int, offset: int) -> None:
        """Have the kernel read the log's next ``read_ahead`` bytes after ``offset`` into the page cache
        (POSIX_FADV_WILLNEED: started, not waited for), as DbLedgerStorage's read-ahead cache reads the entries
        after a miss: pages ``entryLogRemoveFromPageCache`` dropped come back before the reads that want them.
        Asked again once half of what was asked is read (lock held)."""
        asked = self._read_ahead_to.get(log_id, 0)
        if offset + self.read_ahead // 2 <= asked:
            return
        fd = self.fd if log_id == self.log_id else self._read_fds.get(log_id)
        if fd is None or fd < 0:
            return
        start = max(offset, asked)
        self._read_ahead_to[log_id] = offset + self.read_ahead
        read_ahead(fd, start, offset + self.read_ahead - start)

    def read_ledgers_map(self, log_id: int) -> dict[LedgerId, int] | None:
        """The ledgers map of a finished log (None if the log was never finished: scan it instead)."""
        with self._lock:
            if log_id == self.log_id:
                return None
            if log_id in self._rotated:  # its header points at the map once a checkpoint has fsynced it
                return dict(self._rotated[log_id].ledgers)
            header = self._pread(log_id, LOG_HEADER.size, 0)
            magic, _, map_offset, count = LOG_HEADER.unpack(header)
            if magic != LOG_MAGIC or map_offset == 0:
                return None
            end = os.fstat(self._read_fds[log_id]).st_size
            return decode_ledgers_map(self._pread(log_id, end - map_offset, map_offset), count)
