"""Interleaved ledger storage: entry logs + ledger cache + per-ledger state (InterleavedLedgerStorage).

Per ledger the bookie keeps its master key (the first key wins), the fenced flag, the explicit LAC
blob, the highest LAC seen piggybacked on entries, and the highest entry id it stores. Master key,
fence and explicit LAC live in the index file header once checkpointed; before that the journal
holds them (see bookie.server.bookie).

A read finds locations in the ledger cache and groups neighbouring records of one log into one read.
Every record's ledger id and entry id are checked: a mismatch, a bad size or a short read is
EntryCorruptedException (EIO), never "no such entry", since recovery must not end a ledger early
because a disk went bad. Digests are the reader's (the client's) to check; it falls back to another
replica.
"""
from __future__ import annotations

import logging
import struct
import threading
import time

import numpy as np

from bookie.exceptions import (BadRequestException, EntryCorruptedException, NoEntryException,
                               NoLedgerException, UnauthorizedAccessException)
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.range_columns import RangeColumns
from bookie.server.entry_logger import EntryLogCorruptedException, EntryLogger
from bookie.server.index import (EXPLICIT_LAC_LENGTHS, LAC_METADATA_LENGTH, MAX_ENTRY_ID, MAX_MASTER_KEY_LENGTH,
                                 IndexHeader, IndexPersistenceMgr)
from bookie.server.ledger_cache import LedgerCache
from bookie.server.ledger_descriptor import LedgerDescriptor
from bookie.util.io import fsync_dir

log = logging.getLogger(__name__)

_OFFSET_MASK = 0xFFFFFFFF
MAX_READ_GAP = 1 << 20  # records further apart than this in a log are read separately
READ_WINDOW = 8192  # wanted entry ids looked up in the index at a time by a range read
SCALAR_WINDOW = 4  # windows of at most this many ids are read record by record (numpy costs more there)
MAX_FEW_BYTES = 1 << 62  # read_few_ranges: no budget (a few entries a range)
# A checkpoint's entry-log fsyncs without the storage lock: at most this many, until one is this quick.
MAX_UNLOCKED_LOG_FLUSHES = 3
QUICK_LOG_FLUSH_SECONDS = 0.02
_LAC_BLOB = struct.Struct(">qq")


def check_master_key(ledger: LedgerId, master_key: bytes) -> None:
    """A master key must fit the index header next to any explicit LAC (BookKeeper's is a 20-byte SHA-1)."""
    if len(master_key) > MAX_MASTER_KEY_LENGTH:
        raise BadRequestException(f"ledger {ledger}: master key of {len(master_key)} bytes refused; a master key "
                                  f"has at most {MAX_MASTER_KEY_LENGTH} bytes (BookKeeper's is 20)")


def check_explicit_lac(ledger: LedgerId, lac_blob: bytes, lac: int | None = None) -> int:
    """Validate an explicit LAC blob (ledgerId | lac | digest) and return its LAC.

    A bookie does not know the ledger's digest type, so every digest's size is allowed; the blob must
    name this ledger and, when the request states it, the same LAC.
    """
    if len(lac_blob) not in EXPLICIT_LAC_LENGTHS:
        allowed = ", ".join(map(str, EXPLICIT_LAC_LENGTHS[:-1])) + f" or {EXPLICIT_LAC_LENGTHS[-1]}"
        raise BadRequestException(f"ledger {ledger}: explicit LAC blob of {len(lac_blob)} bytes refused; it is "
                                  f"{LAC_METADATA_LENGTH} bytes (ledgerId, lac) plus the digest: {allowed} bytes")
    blob_ledger, blob_lac = _LAC_BLOB.unpack_from(lac_blob, 0)
    if blob_ledger != ledger.ledger_id:
        raise BadRequestException(f"ledger {ledger}: explicit LAC blob names ledger {blob_ledger}")
    if lac is not None and blob_lac != lac:
        raise BadRequestException(f"ledger {ledger}: request says LAC {lac} but its blob says {blob_lac}")
    if blob_lac < entry_format.INVALID_ENTRY_ID:
        raise BadRequestException(f"ledger {ledger}: explicit LAC {blob_lac} refused (allowed: -1 or an entry id)")
    return blob_lac


class InterleavedLedgerStorage:
    def __init__(self, conf, ledger_dirs: list[str], index_dirs: list[str]):
        self.lock = threading.RLock()
        self.entry_logger = EntryLogger(ledger_dirs, conf)
        self.index = IndexPersistenceMgr(index_dirs, conf["openFileLimit"])
        self.cache = LedgerCache(self.index, conf["pageSize"], conf["pageLimit"],
                                 before_write=self.entry_logger.flush, header_for=self._header_for)
        self._ledgers: dict[LedgerId, LedgerDescriptor] = {}

    def _header_for(self, ledger: LedgerId) -> IndexHeader:
        return self._ledgers[ledger].header()

    # -- ledger state ------------------------------------------------------------------------------
    def descriptor(self, ledger: LedgerId) -> LedgerDescriptor | None:
        """The ledger's descriptor, loaded from its index file if it is not in memory (None if unknown)."""
        with self.lock:
            state = self._ledgers.get(ledger)
            if state is None:
                info = self.index.find(ledger)
                if info is None:
                    return None
                header = info.read_header()
                state = LedgerDescriptor(header.master_key, header.fenced, header.explicit_lac, header_dirty=False)
                state.last_entry_id = self.cache.last_entry_on_disk(ledger)
                self._ledgers[ledger] = state
                if state.last_entry_id >= 0:
                    state.lac = self._lac_of(ledger, state.last_entry_id)
            return state

    def _lac_of(self, ledger: LedgerId, entry_id: int) -> int:
        try:
            return entry_format.peek_ids(self.read_entry(ledger, entry_id), 0)[3]
        except (NoEntryException, EntryCorruptedException) as exc:
            log.warning("ledger %s: cannot read entry %d for its LAC: %s", ledger, entry_id, exc)
            return -1

    def get_or_create(self, ledger: LedgerId, master_key: bytes) -> tuple[LedgerDescriptor, bool]:
        """The ledger's state, created with ``master_key`` if new; another key -> EUA."""
        with self.lock:
            state = self.descriptor(ledger)
            if state is None:
                state = self._ledgers[ledger] = LedgerDescriptor(master_key)
                return state, True
            if state.master_key != master_key:
                raise UnauthorizedAccessException(f"ledger {ledger}: master key does not match the ledger's key")
            return state, False

    def require(self, ledger: LedgerId) -> LedgerDescriptor:
        state = self.descriptor(ledger)
        if state is None:
            raise NoLedgerException(f"ledger {ledger} is not stored on this bookie")
        return state

    def set_fenced(self, ledger: LedgerId) -> None:
        with self.lock:
            state = self.require(ledger)
            state.fenced = True
            state.header_dirty = True

    def set_explicit_lac(self, ledger: LedgerId, lac_blob: bytes) -> None:
        """Keep the explicit LAC blob (ledgerId | lac | digest); its LAC also raises the ledger's LAC.
        Only a blob of a valid size reaches the index header (check_explicit_lac)."""
        lac = check_explicit_lac(ledger, lac_blob)
        with self.lock:
            state = self.require(ledger)
            state.explicit_lac = bytes(lac_blob)
            state.header_dirty = True
            state.raise_lac(lac)

    def stored_entry_ids(self, ledger: LedgerId) -> np.ndarray:
        """Ids of the entries of ``ledger`` this bookie stores (costs the index pages that hold some)."""
        with self.lock:
            last = self.require(ledger).last_entry_id
            if last < 0:
                return np.zeros(0, dtype=np.int64)
            return self.cache.stored_ids(ledger, last)

    # -- entries -----------------------------------------------------------------------------------
    def add_framed(self, ledger: LedgerId, state: LedgerDescriptor, blob, entry_ids: np.ndarray,
                   frame_offsets: np.ndarray, max_lac: int) -> None:
        """Store a framed batch of ``ledger``'s entries (ids and frame offsets already parsed)."""
        with self.lock:
            start = self.entry_logger.add_framed(ledger, blob)
            self.cache.put(ledger, entry_ids, frame_offsets + (start + entry_format.FRAME_LEN))
            last = int(entry_ids.max())
            if last > state.last_entry_id:
                state.last_entry_id = last
            state.raise_lac(max_lac)

    def read_entry(self, ledger: LedgerId, entry_id: int) -> bytes:
        """The entry as stored; NoEntry if absent, EntryCorrupted if what is stored is not that entry."""
        with self.lock:
            state = self.require(ledger)
            if entry_id == entry_format.INVALID_ENTRY_ID:  # entry -1: the last entry this bookie has
                entry_id = state.last_entry_id
                if entry_id < 0:
                    raise NoEntryException(f"ledger {ledger} has no entries on this bookie")
            if entry_id < 0 or entry_id > MAX_ENTRY_ID:
                raise NoEntryException(f"ledger {ledger}: entry {entry_id} is not an entry id a bookie stores "
                                       f"(0..{MAX_ENTRY_ID})")
            loc = self.cache.get(ledger, entry_id)
            if loc == 0:
                raise NoEntryException(f"ledger {ledger}: entry {entry_id} is not stored on this bookie")
            try:
                data = self.entry_logger.read_record(loc)
            except (EntryLogCorruptedException, OSError) as exc:
                raise EntryCorruptedException(f"ledger {ledger} entry {entry_id}: {exc}") from None
        check_ids(data, 0, ledger, entry_id, loc)
        return data

    def read_framed_parts(self, ledger: LedgerId, first: int, last: int, max_bytes: int,
                          stride: int = 0, offset: int = 0) -> tuple[list, int, int]:
        """Framed entries this bookie stores in ``[first, last]``, in id order, up to about ``max_bytes``,
        as buffers to join (the service joins them straight into its message).

        With ``stride``, only ids ``e % stride == offset``. Returns (buffers, number of entries, last
        entry id covered): ids up to the covered one that are not in the buffers are not stored here
        (striping leaves gaps by design; nothing is stored past the bookie's last entry). The range is
        looked up READ_WINDOW wanted ids at a time, so a message costs what it sends, not what is left
        of the range; after a window with nothing in it the read jumps to the next index page that holds
        something, so holes between far-apart ids cost nothing.
        """
        with self.lock:
            stored_last = min(last, self.require(ledger).last_entry_id)
        step = max(stride, 1)
        per = self.cache.entries_per_page
        parts: list = []
        count = total = 0
        lo = _first_wanted(first, step, offset)
        while lo <= stored_last:
            hi = min(stored_last, lo + READ_WINDOW * step - 1)
            window_count, window_bytes, covered = self._read_window(ledger, lo, hi, max_bytes - total, step, parts)
            count += window_count
            total += window_bytes
            if covered < hi or total >= max_bytes:
                return parts, count, covered
            if window_count:
                lo = _first_wanted(hi + 1, step, offset)
                continue
            with self.lock:
                page_no = self.cache.next_stored_page(ledger, (hi + 1) // per)
            if page_no is None:
                break
            lo = _first_wanted(max(hi + 1, page_no * per), step, offset)
        return parts, count, last  # nothing is stored past the bookie's last entry

    def read_few_ranges(self, ranges: RangeColumns) -> list[list[bytes] | None]:
        """The framed entries of each of ``ranges`` that asks for at most SCALAR_WINDOW ids (a small ledger's
        share), all located under one hold of the lock, then read record by record: those of one entry
        (``EntryLogger.read_framed_many``) together. None for a range that asks for more, or whose read failed
        (``read_framed_parts`` reads it again, and says why); an unknown ledger gives no entries. A call of
        many small ledgers costs a lookup and a read per range, not a whole range read each: the loop over its
        ranges is kept lean."""
        out: list[list[bytes] | None] = [None] * len(ranges)
        singles: list[tuple[int, LedgerId, int]] = []  # (range, ledger, entry id) of the ranges of one entry
        single_locs: list[int] = []
        several: list[tuple] = []  # (range, ledger, first, last, step, locations) of the others
        in_memory, locate = self._ledgers.get, self.cache.get
        with self.lock:
            for k, (scope, lid, first, last, stride, offset) in enumerate(zip(*ranges.lists())):
                ledger = LedgerId(scope, lid)
                state = in_memory(ledger) or self.descriptor(ledger)
                if state is None:
                    out[k] = []
                    continue
                if stride > 1:
                    first += (offset - first) % stride
                else:
                    stride = 1
                if state.last_entry_id < last:
                    last = state.last_entry_id
                if 0 <= last - first < stride:  # one id wanted: first
                    loc = locate(ledger, first)
                    if loc:
                        singles.append((k, ledger, first))
                        single_locs.append(loc)
                    else:
                        out[k] = []
                elif (last - first) // stride < SCALAR_WINDOW:
                    several.append((k, ledger, first, last, stride, self._locate_few(ledger, first, last, stride)))
        for (k, ledger, entry_id), framed in zip(singles, self.entry_logger.read_framed_many(single_locs)):
            if framed is not None and _holds(framed, entry_format.FRAME_LEN, ledger, entry_id):
                out[k] = [framed]  # else None: read alone, it says what is wrong
        for k, ledger, first, last, stride, locs in several:
            parts: list = []
            try:
                self._read_few(ledger, locs, first, last, MAX_FEW_BYTES, stride, parts)
                out[k] = parts
            except (EntryCorruptedException, _LogRemoved):
                pass
        return out

    def _locate_few(self, ledger: LedgerId, first: int, last: int, step: int) -> list[int]:
        """Locations of a few ids (0 = absent), one index lookup each: an array would cost more (caller holds
        the lock)."""
        return [self.cache.get(ledger, entry_id) for entry_id in range(first, last + 1, step)]

    def _read_window(self, ledger: LedgerId, first: int, last: int, budget: int, step: int,
                     parts: list) -> tuple[int, int, int]:
        """``_read_window_once``, looked up again when compaction removed a log it had located entries in
        (between the lookup and the read: the index points at the entries' copies by then)."""
        while True:
            mark = len(parts)
            try:
                return self._read_window_once(ledger, first, last, budget, step, parts)
            except _LogRemoved:
                del parts[mark:]

    def _read_window_once(self, ledger: LedgerId, first: int, last: int, budget: int, step: int,
                          parts: list) -> tuple[int, int, int]:
        """Append the framed entries stored at ids ``first, first + step, ...`` up to ``last`` (up to
        ``budget`` bytes) to ``parts``; returns (entries, bytes, last entry id covered)."""
        if (last - first) // step < SCALAR_WINDOW:
            with self.lock:
                few = self._locate_few(ledger, first, last, step)
            return self._read_few(ledger, few, first, last, budget, step, parts)
        with self.lock:
            locs = self.cache.get_strided(ledger, first, last, step)
        present = np.flatnonzero(locs)
        if not len(present):
            return 0, 0, last
        loc_present = locs[present]
        log_ids = loc_present >> 32
        offsets = loc_present & _OFFSET_MASK
        gaps = np.diff(offsets)
        breaks = np.flatnonzero((np.diff(log_ids) != 0) | (gaps <= 0) | (gaps > MAX_READ_GAP)) + 1
        total = count = 0
        for run in np.split(np.arange(len(present)), breaks):
            run_offsets = offsets[run]
            # Keep a run within the byte budget, so one read never fetches far more than asked for.
            full = len(run)
            cut = max(1, int(np.searchsorted(run_offsets - run_offsets[0], budget - total, side="right")))
            run, run_offsets = run[:cut], run_offsets[:cut]
            ids = present[run] * step + first
            run_parts, n, nbytes = self._read_run(ledger, int(log_ids[run[0]]), ids, run_offsets, budget - total)
            parts += run_parts
            count += n
            total += nbytes
            if n < full or total >= budget:
                return count, total, int(ids[n - 1])
        return count, total, last

    def _read_few(self, ledger: LedgerId, locs: list[int], first: int, last: int, budget: int, step: int,
                  parts: list) -> tuple[int, int, int]:
        """``_read_window_once`` for a window of a few ids (a small ledger's share, a probe): a record read
        each, no array work, which would cost more than the reads."""
        count = total = 0
        for k, loc in enumerate(locs):
            if not loc:
                continue
            entry_id = first + k * step
            try:
                framed = self.entry_logger.read_framed(loc)
            except (EntryLogCorruptedException, OSError) as exc:
                raise self._log_read_failure(loc >> 32, f"ledger {ledger} entry {entry_id}", exc) from None
            check_ids(framed, entry_format.FRAME_LEN, ledger, entry_id, loc)
            parts.append(framed)
            count += 1
            total += len(framed)
            if total >= budget:
                return count, total, entry_id
        return count, total, last

    def _log_read_failure(self, log_id: int, what: str, exc: Exception) -> Exception:
        """What a failed read of entry log ``log_id`` raises: _LogRemoved when compaction removed the log since
        the index was looked up (the caller looks it up again), else the entries are corrupt."""
        if self.entry_logger.was_removed(log_id):
            return _LogRemoved(log_id)
        return EntryCorruptedException(f"{what}: {exc}")

    def _read_run(self, ledger: LedgerId, log_id: int, ids: np.ndarray, offs: np.ndarray, budget: int):
        """Read the records at ``offs`` of one log with one read; returns (framed parts, entries, bytes).

        Sizes and ids are checked with numpy gathers, not a Python loop; stops after the entry that
        reaches ``budget`` bytes (always at least one entry).
        """
        try:
            tail = self.entry_logger.read_framed((log_id << 32) | int(offs[-1]))
            if len(ids) > 1:
                span = self.entry_logger.read_span(log_id, int(offs[0]) - entry_format.FRAME_LEN,
                                                   int(offs[-1]) - entry_format.FRAME_LEN)
        except (EntryLogCorruptedException, OSError) as exc:
            raise self._log_read_failure(log_id, f"ledger {ledger} entries {ids[0]}..{ids[-1]}", exc) from None
        if len(ids) == 1:
            check_ids(tail, entry_format.FRAME_LEN, ledger, int(ids[-1]), (log_id << 32) | int(offs[-1]))
            return [tail], 1, len(tail)
        rel = offs[:-1] - (int(offs[0]) - entry_format.FRAME_LEN)  # where each record (after its size) starts in span
        data = np.frombuffer(span, dtype=np.uint8)
        sizes = entry_format.gather_be(data, rel - entry_format.FRAME_LEN, 4).astype(np.int64)
        bad = np.flatnonzero((sizes < entry_format.V1_HEADER_LEN) | (rel + sizes > len(span)))
        if len(bad):
            k = int(bad[0])
            raise EntryCorruptedException(f"ledger {ledger} entry {ids[k]}: record in entry log {log_id:x}.log has "
                                          f"bad size {sizes[k]}")
        id_at = rel + (1 + 8 if ledger.scope_id else 0)  # v2 records: flags byte and scope come first
        lids, eids = entry_format.gather_be(data, id_at, 8), entry_format.gather_be(data, id_at + 8, 8)
        wrong = np.flatnonzero((lids != ledger.ledger_id) | (eids != ids[:-1]))
        if len(wrong):
            k = int(wrong[0])
            check_ids(span, int(rel[k]), ledger, int(ids[k]), (log_id << 32) | int(offs[k]))
        check_ids(tail, entry_format.FRAME_LEN, ledger, int(ids[-1]), (log_id << 32) | int(offs[-1]))
        used = np.cumsum(sizes + entry_format.FRAME_LEN)
        cut = int(np.searchsorted(used, budget)) + 1  # entries up to the one that reaches the budget
        if cut < len(ids):
            return entry_format.frames_at(span, rel[:cut], sizes[:cut]), cut, int(used[cut - 1])
        if (rel[1:] == rel[:-1] + sizes[:-1] + entry_format.FRAME_LEN).all() and rel[-1] + sizes[-1] == len(span):
            return [span, tail], len(ids), int(used[-1]) + len(tail)  # back to back: no per-entry copies
        return entry_format.frames_at(span, rel, sizes) + [tail], len(ids), int(used[-1]) + len(tail)

    # -- checkpoint --------------------------------------------------------------------------------
    def flush(self) -> None:
        """Entry logs fsynced, then index pages and dirty ledger headers written and fsynced.

        The entry logs' fsync (seconds of adds: the long part) runs without the storage lock, so adds go
        on, as in BookKeeper's checkpoint; it is repeated while it takes long, so the flush the index
        write then does under the lock (``before_write``) only has the last moments' adds to sync."""
        for _ in range(MAX_UNLOCKED_LOG_FLUSHES):
            start = time.monotonic()
            self.entry_logger.flush()
            if time.monotonic() - start < QUICK_LOG_FLUSH_SECONDS:
                break
        with self.lock:
            headers = {lid: s.header() for lid, s in self._ledgers.items() if s.header_dirty}
            self.cache.flush(headers)  # flushes the entry logs again first, if it writes anything
            for lid in headers:
                self._ledgers[lid].header_dirty = False

    def active_ledgers(self) -> set[LedgerId]:
        """Every ledger this bookie stores: in memory (maybe not checkpointed yet) or with an index file."""
        with self.lock:
            in_memory = set(self._ledgers)
        return in_memory | self.index.ledgers()

    def ledger_exists(self, ledger: LedgerId) -> bool:
        with self.lock:
            return ledger in self._ledgers or self.index.exists(ledger)

    def delete_ledger(self, ledger: LedgerId) -> None:
        self.delete_ledgers([ledger])

    def delete_ledgers(self, ledgers: list[LedgerId]) -> int:
        """Forget the ledgers (descriptor, cache pages, index file with master key and fence state), durably:
        each directory an index file left is fsynced, so a crash does not bring one back. Returns how many
        had something here. Their entry-log bytes come back through entry-log GC and compaction."""
        dirs: set[str] = set()
        found = 0
        with self.lock:
            for ledger in ledgers:
                known = self._ledgers.pop(ledger, None) is not None
                self.cache.drop(ledger)
                removed = self.index.delete(ledger)
                if removed is not None:
                    dirs.add(removed)
                found += known or removed is not None
        for directory in dirs:
            fsync_dir(directory)
        return found

    def shutdown(self) -> None:
        with self.lock:
            self.flush()
            self.entry_logger.shutdown()
            self.index.close()

    def abandon(self) -> None:
        """Stop without a flush (after a failure that a checkpoint may not pass): files closed as they are."""
        with self.lock:
            self.entry_logger.abandon()
            self.index.close()


class _LogRemoved(Exception):
    """A range read located entries in a log that compaction removed before the read: look again."""


def _first_wanted(entry_id: int, step: int, offset: int) -> int:
    """The first id from ``entry_id`` on with ``id % step == offset`` (every id when step is 1)."""
    return entry_id + (offset - entry_id) % step if step > 1 else entry_id


def _holds(buf, offset: int, ledger: LedgerId, entry_id: int) -> bool:
    """Whether the record at ``offset`` is entry ``entry_id`` of ``ledger`` (False also for an unreadable header)."""
    try:
        scope, lid, eid, _ = entry_format.peek_ids(buf, offset)
    except (IndexError, struct.error):
        return False
    return eid == entry_id and lid == ledger.ledger_id and scope == ledger.scope_id


def check_ids(buf, offset: int, ledger: LedgerId, entry_id: int, loc: int) -> None:
    """EntryCorruptedException, saying what is there instead, unless the record at ``offset`` ``_holds`` the entry."""
    if _holds(buf, offset, ledger, entry_id):
        return
    try:
        scope, lid, eid, _ = entry_format.peek_ids(buf, offset)
    except (IndexError, struct.error) as exc:  # a record too short for a header
        raise EntryCorruptedException(f"ledger {ledger} entry {entry_id}: unreadable header ({exc})") from None
    raise EntryCorruptedException(
        f"ledger {ledger} entry {entry_id}: location {loc >> 32:x}:{loc & _OFFSET_MASK} holds ledger "
        f"{LedgerId(scope, lid)} entry {eid} (corrupt entry log or index)")

